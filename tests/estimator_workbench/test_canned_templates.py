"""The canned estimators as no-code templates (estimator_workbench/templates/canned/): listed, read-only,
trained through the same build path as any template, with clear errors for the wrong task."""

from __future__ import annotations

import numpy as np
import pytest

import estimator_engine as ee
from estimator_workbench import templates
from estimator_workbench.data import datasets
from estimator_workbench.data.model_inputs import feature_columns, optimizer_arg, require_task
from estimator_workbench.execution import build, preflight

CANNED = ("BaselineClassifier", "BaselineRegressor", "DNNClassifier", "DNNLinearCombinedClassifier",
          "DNNLinearCombinedRegressor", "DNNRegressor", "LinearClassifier", "LinearRegressor")


def spec_for(name: str) -> datasets.DatasetSpec:
    df = datasets.load_csv(datasets.bundled_path(name))
    return datasets.DatasetSpec({"kind": "bundled", "name": name}, datasets.infer_schema(df))


def build_canned(name: str, dataset: str, model_dir, params=None):
    run_spec = {"template": {"name": name, "code": templates.get_template(name).code},
                "params": params or {}, "dataset": spec_for(dataset).to_dict(), "schedule": {"batch_size": 32},
                "run_config": {"tf_random_seed": 0, "device": "cpu", "log_step_count_steps": None}}
    return build.build_estimator(run_spec, model_dir)


def test_every_canned_estimator_is_a_listed_read_only_template(tmp_path):
    listed = {t.name: t for t in templates.list_templates(tmp_path)}
    assert sorted(templates.CANNED) == list(CANNED)
    for name in CANNED:
        info = listed[name]
        assert info.kind == "canned" and info.error is None, info.error
        assert f"ee.canned.{name}(" in info.code and "def model_fn(features, labels, mode, params, config)" in info.code
        assert templates.validate_params(info.params, {}) == info.defaults()
        assert templates.get_template(name) is templates.CANNED[name]
    with pytest.raises(ValueError, match=r"Template name 'DNNClassifier' is a bundled template, which is read-only"):
        templates.save_template(tmp_path, "DNNClassifier", listed["DNNClassifier"].code)
    copy = templates.save_template(tmp_path, "my_dnn", listed["DNNClassifier"].code)  # a starting point
    assert copy.kind == "user" and copy.params == listed["DNNClassifier"].params


@pytest.mark.parametrize("name", [n for n in CANNED if "Classifier" in n])
def test_canned_classifiers_train_on_mixed_columns(name, tmp_path):
    baseline = name == "BaselineClassifier"
    params = {"optimizer": "Adam", "learning_rate": 0.1} if baseline else {}
    if name == "DNNClassifier":  # TF 2's default Adagrad rate (0.001) is too slow for 100 steps
        params = {"learning_rate": 0.05}
    estimator, fns = build_canned(name, "penguins", tmp_path / "model", params)  # numeric + categorical
    estimator.train(fns.train, steps=300 if baseline else 100)
    result = estimator.evaluate(fns.eval)
    batch = next(iter(estimator.predict(fns.predict, yield_single_examples=False)))
    assert batch["probabilities"].shape[1] == 3
    np.testing.assert_allclose(batch["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    if baseline:  # it learns the class prior of the train split, the same for every row
        spec = spec_for("penguins")
        train, _ = datasets.split(datasets.load_csv(spec.path), spec)
        prior = train["species"].value_counts(normalize=True).sort_index().to_numpy()
        np.testing.assert_allclose(batch["probabilities"][0], prior, atol=0.03)
        np.testing.assert_allclose(batch["probabilities"], np.tile(batch["probabilities"][:1], (len(batch["probabilities"]), 1)), atol=1e-6)
    else:
        assert result["accuracy"] > 0.85, result


@pytest.mark.parametrize("name", [n for n in CANNED if "Regressor" in n])
def test_canned_regressors_learn_the_label_scale(name, tmp_path):
    # diabetes targets are ~150 +- 77: a learning rate that suits unscaled labels (TF's defaults
    # suit standardised ones, as in TF)
    params = {"DNNRegressor": {"learning_rate": 0.05},  # Adagrad at 0.05 (TF 2's default is 0.001)
              "DNNLinearCombinedRegressor": {"linear_optimizer": "Adam", "linear_learning_rate": 1.0,
                                             "dnn_optimizer": "Adam", "dnn_learning_rate": 0.05},
              }.get(name, {"optimizer": "Adam", "learning_rate": 1.0})
    estimator, fns = build_canned(name, "diabetes", tmp_path / "model", params)
    estimator.train(fns.train, steps=300)
    result = estimator.evaluate(fns.eval)
    assert abs(result["prediction/mean"] - result["label/mean"]) < 25, result
    if name != "BaselineRegressor":
        df = datasets.load_csv(datasets.bundled_path("diabetes"))
        assert result["average_loss"] < 0.8 * float(df["target"].var()), result  # beats the mean


def test_variable_names_are_tfs(tmp_path):
    estimator, fns = build_canned("DNNLinearCombinedClassifier", "iris", tmp_path / "model")
    estimator.train(fns.train, steps=1)
    names = estimator.get_variable_names()
    assert {"dnn/hiddenlayer_0/kernel", "dnn/hiddenlayer_1/bias", "dnn/logits/kernel",
            "linear/linear_model/bias_weights", "linear/linear_model/petal_width_cm/weights"} <= set(names)


def test_the_wrong_task_gets_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"^DNNClassifier is for classification, but the dataset's label "
                                         r"'target' makes this a regression task\. Choose DNNRegressor instead"):
        estimator, fns = build_canned("DNNClassifier", "diabetes", tmp_path / "model")
        estimator.train(fns.train, steps=1)
    with pytest.raises(ValueError, match=r"^LinearRegressor is for regression, but the dataset's label "
                                         r"'species' makes this a classification task\. Choose LinearClassifier"):
        require_task({"task": "classification", "label": "species"}, "regression", "LinearRegressor")
    with pytest.raises(ValueError, match=r"^BaselineRegressor needs a label column: the dataset has none"):
        require_task({"task": "none", "label": None}, "regression", "BaselineRegressor")


def test_preflight_reports_the_canned_spec():
    spec = spec_for("iris")
    report = preflight.run_preflight(templates.get_template("LinearClassifier").code, spec, {}, timeout=120,
                                     template_name="LinearClassifier")
    assert report.ok, report.summary()
    train, pred = report.modes["train"], report.modes["predict"]
    assert train["train_op"] is True and train["parameter_count"] == 4 * 3 + 3
    assert {"class_ids", "probabilities", "logits"} <= set(pred["prediction_keys"])
    wrong = preflight.run_preflight(templates.get_template("LinearRegressor").code, spec, {}, timeout=120,
                                    template_name="LinearRegressor")
    assert not wrong.ok and wrong.stage == "train"
    assert "ValueError: LinearRegressor is for regression, but the dataset's label 'species' makes this a " \
        "classification task. Choose LinearClassifier instead" in wrong.summary()


def test_feature_columns_follow_the_task_info():
    task = {"feature_names": ["c", "x"], "numeric_features": ["x"], "numeric_stats": {"x": {"mean": 1.0, "std": 2.0}},
            "categorical_features": ["c"], "categorical_vocabularies": {"c": ["b", "a"]}}
    columns = feature_columns(task, "embedding", 3)
    assert [type(c).__name__ for c in columns] == ["EmbeddingColumn", "NumericColumn"]
    assert columns[0].dimension == 3
    assert [type(c).__name__ for c in feature_columns(task, "categorical", numeric=False)] == \
        ["VocabularyListCategoricalColumn"]
    dense = ee.feature_column.DenseFeatures(feature_columns(task, "indicator"))
    out = dense({"x": np.array([3.0, 1.0], dtype=np.float32), "c": np.array(["a", "zzz"])})
    # vocabulary sorted (a, b) + one OOV bucket; then x standardised: (3 - 1) / 2
    np.testing.assert_allclose(out.numpy(), [[1, 0, 0, 1.0], [0, 0, 1, 0.0]])
    with pytest.raises(ValueError, match=r"categorical must be one of \('embedding', 'indicator', 'categorical'\)"):
        feature_columns(task, "onehot")
    with pytest.raises(ValueError, match=r"no feature column for this model"):
        feature_columns({"feature_names": []})
    assert optimizer_arg("Ftrl", 0) == "Ftrl"
