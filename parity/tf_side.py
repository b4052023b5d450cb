"""The TensorFlow 2.15 side of the parity runs: ``/tmp/tfpeer_venv/bin/python parity/tf_side.py WORKDIR``.

Writes ``WORKDIR/tf.json`` (metrics per case) and ``WORKDIR/<case>_init.npz`` (the model weights of
TF's ``model.ckpt-0``, which the engine side starts from). Not run in CI: it needs TensorFlow.
"""

from __future__ import annotations

import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
import numpy as np
import tensorflow as tf

fc = tf.feature_column
inputs = tf.compat.v1.estimator.inputs
WORK = sys.argv[1]
RESULTS: dict = {}


def _model_dir(case: str) -> str:
    path = os.path.join(WORK, "tf_" + case)
    shutil.rmtree(path, ignore_errors=True)
    return path


def _save_init(case: str, model_dir: str) -> None:
    reader = tf.train.load_checkpoint(os.path.join(model_dir, "model.ckpt-0"))
    names = [n for n in reader.get_variable_to_shape_map() if common.is_model_variable(n)]
    np.savez(os.path.join(WORK, case + "_init.npz"), **{n.replace("/", "|"): reader.get_tensor(n) for n in names})


def _metrics(result: dict) -> dict:
    return {k: float(v) for k, v in result.items() if np.ndim(v) == 0}


def _iris_train_eval(case: str, make, steps: int = common.STEPS) -> None:
    x, y = common.iris()
    model_dir = _model_dir(case)
    est = make(model_dir)
    est.train(inputs.numpy_input_fn(x, y, batch_size=common.BATCH, num_epochs=None, shuffle=False), steps=steps)
    _save_init(case, model_dir)
    result = est.evaluate(inputs.numpy_input_fn(x, y, batch_size=150, num_epochs=1, shuffle=False))
    RESULTS[case] = _metrics(result)


def _config(seed: int = 1, **kwargs) -> tf.estimator.RunConfig:
    return tf.estimator.RunConfig(tf_random_seed=seed, **kwargs)


def _iris_columns():
    return [fc.numeric_column(n) for n in common.IRIS_FEATURES]


def case_dnn() -> None:
    for name in ("Adagrad", "Adam"):
        _iris_train_eval("dnn_" + name.lower(), lambda d, name=name: tf.estimator.DNNClassifier(
            hidden_units=[10, 10], feature_columns=_iris_columns(), n_classes=3, optimizer=name,
            model_dir=d, config=_config()))


def case_linear_baseline() -> None:
    _iris_train_eval("linear_classifier", lambda d: tf.estimator.LinearClassifier(
        feature_columns=_iris_columns(), n_classes=3, model_dir=d, config=_config()))
    _iris_train_eval("baseline_classifier", lambda d: tf.estimator.BaselineClassifier(
        n_classes=3, model_dir=d, config=_config()))
    # Regressors: petal width from the other three measurements.
    x, _ = common.iris()
    target = x.pop("petal_width_cm")
    for case, make in (
            ("linear_regressor", lambda d: tf.estimator.LinearRegressor(
                feature_columns=[fc.numeric_column(n) for n in sorted(x)], model_dir=d, config=_config())),
            ("baseline_regressor", lambda d: tf.estimator.BaselineRegressor(model_dir=d, config=_config()))):
        model_dir = _model_dir(case)
        est = make(model_dir)
        est.train(inputs.numpy_input_fn(x, target, batch_size=common.BATCH, num_epochs=None, shuffle=False),
                  steps=common.STEPS)
        _save_init(case, model_dir)
        RESULTS[case] = _metrics(est.evaluate(inputs.numpy_input_fn(x, target, batch_size=150, shuffle=False)))


def case_seeded_shuffle() -> None:
    """Two runs, tf_random_seed=0, shuffled input: numpy_input_fn (a RandomShuffleQueue fed by a thread)
    and tf.data's Dataset.shuffle (seeded from the graph seed)."""
    x, y = common.iris()
    result = {}
    for kind in ("numpy_input_fn", "tf_data"):
        losses = []
        for run in range(2):
            model_dir = _model_dir(f"seeded_{kind}_{run}")
            est = tf.estimator.DNNClassifier(hidden_units=[10, 10], feature_columns=_iris_columns(), n_classes=3,
                                             optimizer="Adam", model_dir=model_dir, config=_config(seed=0))
            if kind == "numpy_input_fn":
                train_fn = inputs.numpy_input_fn(x, y, batch_size=common.BATCH, num_epochs=None, shuffle=True)
            else:
                def train_fn():
                    return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(150).repeat().batch(common.BATCH)
            est.train(train_fn, steps=50)
            losses.append(_metrics(est.evaluate(inputs.numpy_input_fn(x, y, batch_size=150, shuffle=False)))["loss"])
        result[f"{kind}_loss_run1"], result[f"{kind}_loss_run2"] = losses
        result[f"{kind}_identical"] = float(losses[0] == losses[1])
    RESULTS["seeded_shuffle"] = result


def case_early_stopping(learning_rate: float = 0.5, case: str = "early_stopping") -> None:
    """The stop_if_no_decrease_hook docstring example, made deterministic (steps, not seconds)."""
    x, y = common.iris()
    train_x = {k: v[::2] for k, v in x.items()}
    eval_x = {k: v[1::2] for k, v in x.items()}
    model_dir = _model_dir(case)
    est = tf.estimator.DNNClassifier(
        hidden_units=[10, 10], feature_columns=_iris_columns(), n_classes=3,
        optimizer=lambda: tf.keras.optimizers.legacy.SGD(learning_rate=learning_rate), model_dir=model_dir,
        config=_config(save_checkpoints_steps=50, save_checkpoints_secs=None, keep_checkpoint_max=100))
    hook = tf.estimator.experimental.stop_if_no_decrease_hook(
        est, metric_name="loss", max_steps_without_decrease=100, run_every_secs=None, run_every_steps=50)
    train_spec = tf.estimator.TrainSpec(inputs.numpy_input_fn(
        train_x, y[::2], batch_size=common.BATCH, num_epochs=None, shuffle=False), max_steps=3000, hooks=[hook])
    eval_spec = tf.estimator.EvalSpec(inputs.numpy_input_fn(eval_x, y[1::2], batch_size=75, shuffle=False),
                                      steps=None, throttle_secs=0, start_delay_secs=0)
    tf.estimator.train_and_evaluate(est, train_spec, eval_spec)
    _save_init(case, model_dir)
    from tensorflow_estimator.python.estimator.early_stopping import read_eval_metrics
    evals = read_eval_metrics(est.eval_dir())
    RESULTS[case] = {"stop_step": float(est.get_variable_value("global_step")),
                                 "eval_steps": [int(s) for s in evals],
                                 "eval_losses": [float(m["loss"]) for m in evals.values()]}


def case_custom() -> None:
    """The custom iris estimator: input_layer (numeric + an embedding of a bucketized column) + Dense layers."""
    columns = [*_iris_columns(), fc.embedding_column(fc.bucketized_column(fc.numeric_column("petal_length_cm"), [2.0, 5.0]), dimension=2)]

    def model_fn(features, labels, mode, params):
        net = tf.compat.v1.feature_column.input_layer(features, params["feature_columns"])
        for units in params["hidden_units"]:
            net = tf.compat.v1.layers.dense(net, units, activation=tf.nn.relu)
        logits = tf.compat.v1.layers.dense(net, params["n_classes"])
        predicted = tf.argmax(logits, 1)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions={"class_ids": predicted,
                                                                 "probabilities": tf.nn.softmax(logits)})
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.EVAL:
            return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={
                "accuracy": tf.compat.v1.metrics.accuracy(labels=labels, predictions=predicted)})
        optimizer = tf.compat.v1.train.AdagradOptimizer(learning_rate=0.1)
        train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    _iris_train_eval("custom", lambda d: tf.estimator.Estimator(
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


def _example(row: dict) -> bytes:
    feature = {}
    for key, value in row.items():
        if isinstance(value, str):
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        else:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def case_wide_deep() -> None:
    x, y = common.penguins()
    wide, deep = _wide_deep_columns()
    model_dir = _model_dir("wide_deep")
    est = tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=wide, dnn_feature_columns=deep, dnn_hidden_units=[8, 4], model_dir=model_dir,
        config=_config(save_checkpoints_steps=100, save_checkpoints_secs=None))
    spec = fc.make_parse_example_spec(wide + deep)
    exporter = tf.estimator.LatestExporter(
        "latest", tf.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    train_spec = tf.estimator.TrainSpec(inputs.numpy_input_fn(
        x, y, batch_size=common.BATCH, num_epochs=None, shuffle=False), max_steps=common.STEPS)
    eval_spec = tf.estimator.EvalSpec(inputs.numpy_input_fn(x, y, batch_size=len(y), shuffle=False),
                                      steps=None, exporters=[exporter], throttle_secs=0, start_delay_secs=0)
    result, exports = tf.estimator.train_and_evaluate(est, train_spec, eval_spec)
    _save_init("wide_deep", model_dir)
    first = {k: v[:10] for k, v in x.items()}
    predicted = np.stack([p["probabilities"] for p in est.predict(
        inputs.numpy_input_fn(first, batch_size=10, shuffle=False))])
    loaded = tf.saved_model.load(exports[0].decode() if isinstance(exports[0], bytes) else exports[0])
    rows = [{k: (str(v[i]) if v.dtype == object else float(v[i])) for k, v in first.items()} for i in range(10)]
    served = loaded.signatures["predict"](examples=tf.constant([_example(r) for r in rows]))["probabilities"].numpy()
    metrics = _metrics(result)
    metrics["serving_default_outputs"] = ",".join(sorted(loaded.signatures["serving_default"].structured_outputs))
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
    """WarmStartSettings docstring example: vars_to_warm_start regex + a vocabulary remap of an embedding."""
    x, y = common.penguins()
    old_vocab = _write(os.path.join(WORK, "old_vocab.txt"), ["Biscoe", "Dream", "Torgersen"])
    new_vocab = _write(os.path.join(WORK, "new_vocab.txt"), ["Torgersen", "Biscoe", "Eastbay", "Dream"])

    def columns(vocab, size, oov):
        island = fc.categorical_column_with_vocabulary_file("island", vocab, vocabulary_size=size,
                                                            num_oov_buckets=oov)
        return [fc.numeric_column("bill_length"), fc.embedding_column(island, dimension=3)]

    old_dir = _model_dir("warm_start_old")
    old = tf.estimator.DNNClassifier(hidden_units=[4], feature_columns=columns(old_vocab, 3, 0),
                                     model_dir=old_dir, config=_config(), optimizer="Adam")
    old.train(inputs.numpy_input_fn(x, y, batch_size=common.BATCH, num_epochs=None, shuffle=False), steps=50)
    reader = tf.train.load_checkpoint(old_dir)
    names = [n for n in reader.get_variable_to_shape_map() if common.is_model_variable(n)]
    np.savez(os.path.join(WORK, "warm_start_old_final.npz"),
             **{n.replace("/", "|"): reader.get_tensor(n) for n in names})
    settings = tf.estimator.WarmStartSettings(
        ckpt_to_initialize_from=old_dir, vars_to_warm_start=".*input_layer.*",
        var_name_to_vocab_info={EMB: tf.estimator.VocabInfo(
            new_vocab=new_vocab, new_vocab_size=4, num_oov_buckets=1, old_vocab=old_vocab,
            backup_initializer=tf.compat.v1.zeros_initializer())})
    new = tf.estimator.DNNClassifier(
        hidden_units=[4], feature_columns=columns(new_vocab, 4, 1), model_dir=_model_dir("warm_start_new"),
        config=_config(seed=2), warm_start_from=settings,
        optimizer=lambda: tf.keras.optimizers.legacy.SGD(learning_rate=0.0))
    new.train(inputs.numpy_input_fn(x, y, batch_size=common.BATCH, num_epochs=None, shuffle=False), steps=1)
    embedding = new.get_variable_value(EMB)
    RESULTS["warm_start"] = {
        "embedding": embedding.tolist(),
        "hidden_kernel_warm_started": float(np.array_equal(
            new.get_variable_value("dnn/hiddenlayer_0/kernel"), old.get_variable_value("dnn/hiddenlayer_0/kernel")))}



def case_early_stopping_lr01() -> None:
    """The same with SGD 0.1: the eval loss falls, then stops falling."""
    case_early_stopping(0.1, "early_stopping_lr01")


def main() -> None:
    os.makedirs(WORK, exist_ok=True)
    known = [n[5:] for n in globals() if n.startswith("case_")]
    wanted = [n for n in sys.argv[2:] if n in known] if sys.argv[2:] else known
    path = os.path.join(WORK, "tf.json")
    for name in wanted:
        globals()["case_" + name]()
        print("tf done:", name, flush=True)
        old = common.load_json(path) if os.path.exists(path) else {}
        old.update(RESULTS)
        common.save_json(path, old)


if __name__ == "__main__":
    main()
