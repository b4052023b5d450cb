"""Tests of ``estimator-workbench import-tf`` (estimator_workbench.execution.tf_import, issue 29 section 3).

The fixture ``fixtures/tf_import/iris_dnn`` is a TF 2.15 DNNClassifier trained on the bundled iris
(``make_fixture.py``); ``iris_dnn.json`` holds TF's predictions on every row of iris.csv.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from estimator_workbench.cli import commands as cli
from estimator_workbench.execution import tf_import
from estimator_workbench.execution.submit import submit_run
from estimator_workbench.store.records import IMPORT_ACTION
from estimator_workbench.store.registry import RunRegistry
from estimator_workbench.store.run_spec import RunSpecError

HERE = Path(__file__).resolve().parent
MODEL = HERE / "fixtures" / "tf_import" / "iris_dnn"
REFERENCE = json.loads((HERE / "fixtures" / "tf_import" / "iris_dnn.json").read_text())
ENGINE_FIXTURES = HERE.parent / "estimator_engine" / "fixtures" / "tf_checkpoints"
PARAMS = '{"hidden_units": "6"}'


def _hashes(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


class TestSource:
    def test_model_dir_prefix_and_saved_model(self):
        assert tf_import.source_checkpoint(MODEL) == (str(MODEL / "model.ckpt-20"), 20)
        assert tf_import.source_checkpoint(MODEL / "model.ckpt-0") == (str(MODEL / "model.ckpt-0"), 0)
        prefix, step = tf_import.source_checkpoint(ENGINE_FIXTURES / "saved_model" / "dnn_classifier_3")
        assert prefix.endswith("variables/variables") and step == 5

    def test_refuses_what_is_not_a_tf_checkpoint(self, tmp_path):
        with pytest.raises(ValueError, match=r"'/no/such/dir' does not exist\. Give a TensorFlow Estimator's model_dir"):
            tf_import.source_checkpoint("/no/such/dir")
        with pytest.raises(ValueError, match=r"holds no checkpoint to import: Could not find trained model"):
            tf_import.source_checkpoint(tmp_path)

    def test_optimizer_state_is_not_a_model_weight(self):
        assert all(tf_import.is_optimizer_variable(n) for n in (
            "global_step", "training/Adam/beta_1", "dnn/logits/kernel/t_0/Adagrad", "beta1_power"))
        assert not tf_import.is_optimizer_variable("dnn/hiddenlayer_0/kernel")

    def test_copy_leaves_the_source_alone(self, tmp_path):
        before = _hashes(MODEL)
        copied = tf_import.copy_checkpoint(str(MODEL / "model.ckpt-20"), 20, tmp_path / "model")
        assert copied == str(tmp_path / "model" / "model.ckpt-20")
        assert sorted(p.name for p in (tmp_path / "model").iterdir()) == [
            "checkpoint", "model.ckpt-20.data-00000-of-00001", "model.ckpt-20.index"]
        assert _hashes(MODEL) == before


def test_a_model_that_does_not_fit_is_refused_before_the_run_exists(workspace):
    """The refusal names the variables on both sides; nothing is registered."""
    def checker(spec, prefix):
        # the params as submit_run checked them: given ones kept, the template's defaults filled
        assert prefix == str(MODEL / "model.ckpt-20") and spec["params"]["hidden_units"] == "8"
        assert spec["params"]["activation"] == "relu"
        return tf_import.ImportFit(missing=["dnn/hiddenlayer_1/bias"], unused=["linear/linear_model/bias_weights"],
                                   shape_mismatch={"dnn/logits/kernel": ([6, 3], [8, 3])})

    registry = RunRegistry(workspace)
    dataset = cli._dataset_dict("iris", None)
    template, _ = cli._template_dict("DNNClassifier", workspace)
    with pytest.raises(RunSpecError) as caught:
        submit_run(registry, None, name="x", action=IMPORT_ACTION, dataset=dataset, template=template,
                   params={"hidden_units": "8"}, run_config={}, schedule={}, checkpoint_path=str(MODEL),
                   import_checker=checker)
    assert str(caught.value) == (
        f"The TensorFlow model {str(MODEL)!r} does not fit template 'DNNClassifier' on dataset 'iris'; variables "
        "that differ in shape (TensorFlow -> this model): dnn/logits/kernel [6, 3] -> [8, 3]; the model has, the "
        "TensorFlow checkpoint lacks: dnn/hiddenlayer_1/bias; the TensorFlow checkpoint has, the model lacks: "
        "linear/linear_model/bias_weights. Choose the template, params (hidden_units, categorical_encoding, "
        "embedding_dim, ...) and dataset columns the TensorFlow model was trained with.")
    with pytest.raises(RunSpecError, match=r"An import needs the TensorFlow model to import"):
        submit_run(registry, None, name="x", action=IMPORT_ACTION, dataset=dataset, template=template,
                   params={}, run_config={}, schedule={}, import_checker=checker)
    assert registry.list_runs() == []


def test_run_cannot_start_an_import(workspace, capsys):
    with pytest.raises(SystemExit) as caught:
        cli.main(["run", "--dataset", "iris", "--template", "DNNClassifier", "--action", "import_tf"])
    assert caught.value.code == 2
    assert "invalid choice: 'import_tf'" in capsys.readouterr().err


def _last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


@pytest.mark.slow
def test_import_evaluate_predict_and_continue_give_tensorflows_numbers(workspace, tmp_path, capsys):
    import numpy as np
    import pandas as pd

    from estimator_workbench.data import datasets

    before = _hashes(MODEL)
    assert cli.main(["import-tf", str(MODEL), "--template", "DNNClassifier", "--dataset", "iris",
                     "--params", PARAMS, "--name", "iris from TF", "--json"]) == 0, capsys.readouterr().err
    imported = _last_json(capsys.readouterr().out)
    assert (imported["action"], imported["status"], imported["name"]) == ("import_tf", "succeeded", "iris from TF")
    assert imported["checkpoint_path"] == str(MODEL / "model.ckpt-20")
    assert imported["params"]["hidden_units"] == "6" and imported["template_name"] == "DNNClassifier"
    assert imported["summary"]["eval/accuracy"]["last_step"] == REFERENCE["global_step"] == 20
    run_dir = RunRegistry(workspace).run_dir(imported["run_id"])
    assert json.loads((run_dir / tf_import.IMPORT_FILE).read_text())["global_step"] == 20

    # TF's numbers on the eval split the workbench evaluates (its own split of iris)
    spec = datasets.DatasetSpec.from_dict(imported["dataset"])
    _, eval_rows = datasets.split(spec.load(), spec)
    probabilities = np.array(REFERENCE["probabilities"])[eval_rows.index]
    labels = eval_rows["species"].map({"setosa": 0, "versicolor": 1, "virginica": 2}).to_numpy()
    tf_loss = float(np.mean(-np.log(probabilities[np.arange(len(labels)), labels])))
    tf_accuracy = float(np.mean(probabilities.argmax(axis=1) == labels))
    for summary in (imported["summary"], None):
        if summary is None:  # an evaluate run of the imported run
            assert cli.main(["run", "--action", "evaluate", "--from", imported["run_id"], "--json"]) == 0
            summary = _last_json(capsys.readouterr().out)["summary"]
        assert math.isclose(summary["eval/average_loss"]["last"], tf_loss, rel_tol=1e-5)
        assert summary["eval/accuracy"]["last"] == pytest.approx(tf_accuracy, abs=1e-9)

    out = tmp_path / "predictions.csv"
    assert cli.main(["predict", imported["run_id"], "--data", str(datasets.bundled_path("iris")),
                     "--out", str(out)]) == 0
    predicted = pd.read_csv(out)
    columns = ["probability_setosa", "probability_versicolor", "probability_virginica"]
    assert np.abs(predicted[columns].to_numpy() - np.array(REFERENCE["probabilities"])).max() < 1e-5
    assert predicted["class_ids"].tolist() == REFERENCE["class_ids"]

    # continued training starts at TF's step 20 (a resume) and reaches the new max_steps
    assert cli.main(["run", "--action", "train", "--from", imported["run_id"], "--steps", "24", "--json"]) == 0
    continued = _last_json(capsys.readouterr().out)
    assert (continued["status"], continued["parent_relation"]) == ("succeeded", "resume")
    assert continued["summary"]["train/loss"]["last_step"] == 24
    from estimator_engine import checkpoints

    assert checkpoints.read_global_step(RunRegistry(workspace).run_dir(continued["run_id"]) / "model") == 24
    assert _hashes(MODEL) == before  # TF's files were only read


@pytest.mark.slow
@pytest.mark.parametrize("model,extra,names", [
    (ENGINE_FIXTURES / "models" / "linear_classifier_3", ["--params", PARAMS],
     ["the model has, the TensorFlow checkpoint lacks: dnn/hiddenlayer_0/bias, dnn/hiddenlayer_0/kernel, "
      "dnn/logits/bias, dnn/logits/kernel",
      "the TensorFlow checkpoint has, the model lacks: linear/linear_model/bias_weights, "
      "linear/linear_model/petal_length_cm/weights"]),
    (MODEL, ["--params", '{"hidden_units": "8"}'],
     ["differ in shape (TensorFlow -> this model): dnn/hiddenlayer_0/bias [6] -> [8], dnn/hiddenlayer_0/kernel "
      "[4, 6] -> [4, 8], dnn/logits/kernel [6, 3] -> [8, 3]"]),
    (MODEL, ["--params", PARAMS, "--role", "sepal_width_cm=ignore"],  # a column the TF model read is left out
     ["differ in shape (TensorFlow -> this model): dnn/hiddenlayer_0/kernel [4, 6] -> [3, 6]. Choose"]),
])
def test_cli_refuses_a_model_that_does_not_fit(workspace, capsys, model, extra, names):
    assert cli.main(["import-tf", str(model), "--template", "DNNClassifier", "--dataset", "iris", *extra]) == 2
    err = capsys.readouterr().err
    assert f"error: The TensorFlow model {str(model)!r} does not fit template 'DNNClassifier' on dataset 'iris'" in err
    assert all(name in err for name in names), err
    assert "Traceback" not in err
    assert RunRegistry(workspace).list_runs() == []


@pytest.mark.slow
@pytest.mark.parametrize("source,case,template,params", [
    ("models", "dnn_classifier_3", "DNNClassifier", '{"hidden_units": "6", "standardize_numeric": false}'),
    ("models", "linear_classifier_3", "LinearClassifier", '{"standardize_numeric": false}'),
    ("saved_model", "dnn_classifier_3", "DNNClassifier", '{"hidden_units": "6", "standardize_numeric": false}'),
])
def test_a_model_trained_on_raw_numbers_imports_with_standardize_numeric_off(workspace, tmp_path, capsys, source,
                                                                             case, template, params):
    """TF models of the engine's fixtures (numeric_column(name), no normalizer) on iris's columns: two
    model_dirs and the SavedModel exported from dnn_classifier_3."""
    import numpy as np
    import pandas as pd

    reference = json.loads((ENGINE_FIXTURES / "models" / f"{case}.json").read_text())
    assert cli.main(["import-tf", str(ENGINE_FIXTURES / source / case), "--template", template,
                     "--dataset", "iris", "--params", params, "--json"]) == 0, capsys.readouterr().err
    imported = _last_json(capsys.readouterr().out)
    assert imported["checkpoint_path"].endswith("variables/variables" if source == "saved_model" else "model.ckpt-5")
    rows = tmp_path / "rows.csv"
    pd.DataFrame({name: column["values"] for name, column in reference["features"].items()}).to_csv(rows, index=False)
    out = tmp_path / "predictions.csv"
    assert cli.main(["predict", imported["run_id"], "--data", str(rows), "--out", str(out)]) == 0
    predicted = pd.read_csv(out)[["probability_setosa", "probability_versicolor", "probability_virginica"]]
    assert np.abs(predicted.to_numpy() - np.array(reference["predictions"]["probabilities"])).max() < 1e-5
