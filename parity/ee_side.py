"""The engine side of the parity runs: ``.venv/bin/python parity/ee_side.py WORKDIR [case ...]``.

Each case mirrors the same-named case of ``tf_side.py``: the same data, batches, steps and settings,
starting from the weights TF wrote in its ``model.ckpt-0`` (``WORKDIR/<case>_init.npz``), written
into the engine's model_dir with ``ee.checkpoints.create_checkpoint`` at step 0. Writes
``WORKDIR/ee.json``.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
import numpy as np
import torch

import estimator_engine as ee

fc = ee.feature_column
WORK = sys.argv[1]
RESULTS: dict = {}
ERRORS: dict = {}


def _model_dir(case: str, init: str | None = None) -> str:
    """A fresh model_dir holding TF's initial weights of ``init`` (default: ``case``) at step 0."""
    path = os.path.join(WORK, "ee_" + case)
    shutil.rmtree(path, ignore_errors=True)
    npz = os.path.join(WORK, (init or case) + "_init.npz")
    if os.path.exists(npz):
        ee.checkpoints.create_checkpoint(path, common.init_variables(npz), global_step=0)
    return path


def _metrics(result: dict) -> dict:
    return {k: float(v) for k, v in result.items() if np.ndim(v) == 0}


def _iris_train_eval(case: str, make, steps: int = common.STEPS, init: str | None = None) -> None:
    x, y = common.iris()
    est = make(_model_dir(case, init))
    est.train(ee.inputs.numpy_input_fn(x, y, batch_size=common.BATCH, num_epochs=None, shuffle=False), steps=steps)
    RESULTS[case] = _metrics(est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=150, num_epochs=1,
                                                                   shuffle=False)))


def _config(seed: int = 1, **kwargs) -> ee.RunConfig:
    return ee.RunConfig(tf_random_seed=seed, **kwargs)


def _iris_columns():
    return [fc.numeric_column(n) for n in common.IRIS_FEATURES]


def case_dnn() -> None:
    for name in ("Adagrad", "Adam"):
        _iris_train_eval("dnn_" + name.lower(), lambda d, name=name: ee.DNNClassifier(
            hidden_units=[10, 10], feature_columns=_iris_columns(), n_classes=3, optimizer=name,
            model_dir=d, config=_config()))


class TFAdam(torch.optim.Optimizer):
    """TF's ``ApplyAdam`` kernel (what Keras' legacy Adam runs): epsilon is added to ``sqrt(v)``
    before the bias correction, ``w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``.
    A diagnostic: torch's Adam adds epsilon after the bias correction."""

    def __init__(self, params, lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-7):
        super().__init__(params, {"lr": lr, "beta1": beta1, "beta2": beta2, "epsilon": epsilon})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["t"], state["m"], state["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                state["t"] += 1
                b1, b2, t = group["beta1"], group["beta2"], state["t"]
                state["m"].mul_(b1).add_(p.grad, alpha=1 - b1)
                state["v"].mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                lr_t = group["lr"] * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
                p.sub_(lr_t * state["m"] / (state["v"].sqrt() + group["epsilon"]))


def case_dnn_adam_tf_rule() -> None:
    """'Adam' run with TF's own update rule (TFAdam) instead of the engine's: isolates the
    Adam residual of case dnn_adam to the epsilon placement."""
    _iris_train_eval("dnn_adam_tf_rule", lambda d: ee.DNNClassifier(
        hidden_units=[10, 10], feature_columns=_iris_columns(), n_classes=3, optimizer=TFAdam,
        model_dir=d, config=_config()), init="dnn_adam")


def case_linear_baseline() -> None:
    _iris_train_eval("linear_classifier", lambda d: ee.LinearClassifier(
        feature_columns=_iris_columns(), n_classes=3, model_dir=d, config=_config()))
    _iris_train_eval("baseline_classifier", lambda d: ee.BaselineClassifier(
        n_classes=3, model_dir=d, config=_config()))
    x, _ = common.iris()
    target = x.pop("petal_width_cm")
    for case, make in (
            ("linear_regressor", lambda d: ee.LinearRegressor(
                feature_columns=[fc.numeric_column(n) for n in sorted(x)], model_dir=d, config=_config())),
            ("baseline_regressor", lambda d: ee.BaselineRegressor(model_dir=d, config=_config()))):
        est = make(_model_dir(case))
        est.train(ee.inputs.numpy_input_fn(x, target, batch_size=common.BATCH, num_epochs=None, shuffle=False),
                  steps=common.STEPS)
        RESULTS[case] = _metrics(est.evaluate(ee.inputs.numpy_input_fn(x, target, batch_size=150,
                                                                       shuffle=False)))


def case_seeded_shuffle() -> None:
    x, y = common.iris()
    losses = []
    for run in range(2):
        est = ee.DNNClassifier(hidden_units=[10, 10], feature_columns=_iris_columns(), n_classes=3,
                               optimizer="Adam", model_dir=_model_dir(f"seeded_{run}"), config=_config(seed=0))
        est.train(ee.inputs.numpy_input_fn(x, y, batch_size=common.BATCH, num_epochs=None, shuffle=True), steps=50)
        losses.append(_metrics(est.evaluate(ee.inputs.numpy_input_fn(x, y, batch_size=150, shuffle=False)))["loss"])
    # Only identical-ness is comparable with TF (another RNG draws the init and the order).
    RESULTS["seeded_shuffle"] = {"numpy_input_fn_loss_run1": losses[0], "numpy_input_fn_loss_run2": losses[1],
                                 "numpy_input_fn_identical": float(losses[0] == losses[1])}


def _keras_sgd(lr: float):
    return functools.partial(torch.optim.SGD, lr=lr)


def case_early_stopping(learning_rate: float = 0.5, case: str = "early_stopping") -> None:
    x, y = common.iris()
    train_x = {k: v[::2] for k, v in x.items()}
    eval_x = {k: v[1::2] for k, v in x.items()}
    est = ee.DNNClassifier(
        hidden_units=[10, 10], feature_columns=_iris_columns(), n_classes=3, optimizer=_keras_sgd(learning_rate),
        model_dir=_model_dir(case), config=_config(save_checkpoints_steps=50, save_checkpoints_secs=None, keep_checkpoint_max=100))
    hook = ee.early_stopping.stop_if_no_decrease_hook(
        est, metric_name="loss", max_steps_without_decrease=100, run_every_secs=None, run_every_steps=50)
    train_spec = ee.TrainSpec(ee.inputs.numpy_input_fn(
        train_x, y[::2], batch_size=common.BATCH, num_epochs=None, shuffle=False), max_steps=3000, hooks=[hook])
    eval_spec = ee.EvalSpec(ee.inputs.numpy_input_fn(eval_x, y[1::2], batch_size=75, shuffle=False),
                            steps=None, throttle_secs=0, start_delay_secs=0)
    ee.train_and_evaluate(est, train_spec, eval_spec)
    evals = ee.read_eval_metrics(est.eval_dir())
    RESULTS[case] = {"stop_step": float(est.get_variable_value("global_step")),
                                 "eval_steps": [int(s) for s in evals],
                                 "eval_losses": [float(m["loss"]) for m in evals.values()]}


class TFDense(torch.nn.Module):
    """``tf.compat.v1.layers.dense`` with TF's variable layout (``kernel`` [in, out], ``bias``)."""

    def __init__(self, in_features: int, units: int) -> None:
        super().__init__()
        limit = (6.0 / (in_features + units)) ** 0.5
        self.kernel = torch.nn.Parameter(torch.empty(in_features, units).uniform_(-limit, limit))
        self.bias = torch.nn.Parameter(torch.zeros(units))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.kernel)


def case_custom() -> None:
    columns = [*_iris_columns(), fc.embedding_column(fc.bucketized_column(fc.numeric_column("petal_length_cm"), [2.0, 5.0]), dimension=2)]

    def model_fn(features, labels, mode, params):
        net = fc.input_layer(features, params["feature_columns"])
        names = ["dense"] + [f"dense_{i}" for i in range(1, len(params["hidden_units"]) + 1)]
        for name, units in zip(names, params["hidden_units"]):
            net = torch.relu(ee.get_module(name, lambda n=net.shape[1], u=units: TFDense(n, u))(net))
        logits = ee.get_module(names[-1], lambda n=net.shape[1]: TFDense(n, params["n_classes"]))(net)
        predicted = logits.argmax(dim=1)
        if mode == ee.ModeKeys.PREDICT:
            return ee.EstimatorSpec(mode, predictions={"class_ids": predicted, "probabilities": logits.softmax(1)})
        loss = torch.nn.functional.cross_entropy(logits, labels)
        if mode == ee.ModeKeys.EVAL:
            return ee.EstimatorSpec(mode, loss=loss, eval_metric_ops={
                "accuracy": ee.metrics.accuracy(labels=labels, predictions=predicted)})
        # tf.compat.v1.train.AdagradOptimizer(0.1): accumulator starts at 0.1, no epsilon.
        optimizer = ee.get_optimizer("adagrad", lambda: torch.optim.Adagrad(
            ee.trainable_variables(), lr=0.1, initial_accumulator_value=0.1, eps=0.0))
        return ee.EstimatorSpec(mode, loss=loss, train_op=ee.minimize(optimizer, loss))

    _iris_train_eval("custom", lambda d: ee.Estimator(
        model_fn, model_dir=d, config=_config(),
        params={"feature_columns": columns, "hidden_units": [10, 10], "n_classes": 3}))


def _wide_deep_columns():
    island = fc.categorical_column_with_vocabulary_list("island", ["Biscoe", "Dream", "Torgersen"])
    sex = fc.categorical_column_with_hash_bucket("sex", 10)
    flipper = fc.bucketized_column(fc.numeric_column("flipper_length"), [190.0, 200.0, 210.0])
    cross = fc.crossed_column(["island", "sex"], 20)
    wide = [island, sex, flipper, cross]
    deep = [fc.numeric_column("bill_length"), fc.numeric_column("bill_depth"),
            fc.embedding_column(island, dimension=2), fc.indicator_column(sex)]
    return wide, deep


def case_wide_deep() -> None:
    x, y = common.penguins()
    wide, deep = _wide_deep_columns()
    est = ee.DNNLinearCombinedClassifier(
        linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[8, 4],
        model_dir=_model_dir("wide_deep"), config=_config(save_checkpoints_steps=100, save_checkpoints_secs=None))
    spec = ee.make_parse_example_spec(wide + deep)
    exporter = ee.LatestExporter("latest", ee.export.build_parsing_serving_input_receiver_fn(spec))
    train_spec = ee.TrainSpec(ee.inputs.numpy_input_fn(
        x, y, batch_size=common.BATCH, num_epochs=None, shuffle=False), max_steps=common.STEPS)
    eval_spec = ee.EvalSpec(ee.inputs.numpy_input_fn(x, y, batch_size=len(y), shuffle=False),
                            steps=None, exporters=[exporter], throttle_secs=0, start_delay_secs=0)
    result, exports = ee.train_and_evaluate(est, train_spec, eval_spec)
    first = {k: v[:10] for k, v in x.items()}
    predicted = np.stack([p["probabilities"] for p in est.predict(
        ee.inputs.numpy_input_fn(first, batch_size=10, shuffle=False))])
    serve = ee.export.load(exports[0], signature="predict")
    rows = [{k: (str(v[i]) if v.dtype == object else float(v[i])) for k, v in first.items()} for i in range(10)]
    served = np.asarray(serve(rows)["probabilities"])
    metrics = _metrics(result)
    metrics["serving_default_outputs"] = ",".join(sorted(ee.export.load(exports[0])(rows)))
    metrics["served_vs_predict_max_abs"] = float(np.abs(served - predicted).max())
    metrics["p_first_row"] = float(predicted[0, 1])
    metrics["p_mean_first10"] = float(predicted[:, 1].mean())
    RESULTS["wide_deep"] = metrics


def _write(path: str, tokens) -> str:
    with open(path, "w") as handle:
        handle.write("\n".join(tokens) + "\n")
    return path


EMB = "dnn/input_from_feature_columns/input_layer/island_embedding/embedding_weights"


def case_warm_start() -> None:
    """Warm-starts from TF's trained old model (its final weights written as an engine checkpoint)."""
    x, y = common.penguins()
    old_vocab = _write(os.path.join(WORK, "ee_old_vocab.txt"), ["Biscoe", "Dream", "Torgersen"])
    new_vocab = _write(os.path.join(WORK, "ee_new_vocab.txt"), ["Torgersen", "Biscoe", "Eastbay", "Dream"])

    def columns(vocab, size, oov):
        island = fc.categorical_column_with_vocabulary_file("island", vocab, vocabulary_size=size,
                                                            num_oov_buckets=oov)
        return [fc.numeric_column("bill_length"), fc.embedding_column(island, dimension=3)]

    old_dir = os.path.join(WORK, "ee_warm_start_old")
    shutil.rmtree(old_dir, ignore_errors=True)
    old_vars = common.init_variables(os.path.join(WORK, "warm_start_old_final.npz"))
    ee.checkpoints.create_checkpoint(old_dir, old_vars, global_step=50)
    settings = ee.WarmStartSettings(
        ckpt_to_initialize_from=old_dir, vars_to_warm_start=".*input_layer.*",
        var_name_to_vocab_info={EMB: ee.VocabInfo(
            new_vocab=new_vocab, new_vocab_size=4, num_oov_buckets=1, old_vocab=old_vocab)})
    new = ee.DNNClassifier(hidden_units=[4], feature_columns=columns(new_vocab, 4, 1),
                           model_dir=_model_dir("warm_start_new"), config=_config(seed=2),
                           warm_start_from=settings, optimizer=_keras_sgd(0.0))
    new.train(ee.inputs.numpy_input_fn(x, y, batch_size=common.BATCH, num_epochs=None, shuffle=False), steps=1)
    RESULTS["warm_start"] = {
        "embedding": np.asarray(new.get_variable_value(EMB)).tolist(),
        "hidden_kernel_warm_started": float(np.array_equal(
            new.get_variable_value("dnn/hiddenlayer_0/kernel"), old_vars["dnn/hiddenlayer_0/kernel"]))}



def case_early_stopping_lr01() -> None:
    """The same with SGD 0.1: the eval loss falls, then stops falling."""
    case_early_stopping(0.1, "early_stopping_lr01")


def main() -> None:
    known = [n[5:] for n in globals() if n.startswith("case_")]
    wanted = [n for n in sys.argv[2:] if n in known] if sys.argv[2:] else known
    for name in wanted:
        try:
            globals()["case_" + name]()
        except Exception as error:  # a failing case is a finding: record it, run the others
            ERRORS[name] = f"{type(error).__name__}: {error}"
            print("ee FAILED:", name, ERRORS[name], flush=True)
        else:
            print("ee done:", name, flush=True)
    path = os.path.join(WORK, "ee.json")
    old = common.load_json(path) if os.path.exists(path) else {}
    old.update(RESULTS)
    old.setdefault("_errors", {}).update(ERRORS)
    for name in wanted:
        if name not in ERRORS:
            old["_errors"].pop(name, None)
    common.save_json(path, old)


if __name__ == "__main__":
    main()
