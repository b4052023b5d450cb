"""Exporters: TF's arguments and errors, export policies, garbage collection, BestExporter restarts."""

from __future__ import annotations

import os

import pytest

import estimator_engine as ee
from estimator_engine.exporter import (
    BestExporter,
    Exporter,
    FinalExporter,
    LatestExporter,
    _loss_smaller,
)
from estimator_engine.summary import SummaryWriterCache
from estimator_engine.testing import linear_model_fn


class FakeEstimator:
    """Records export_saved_model calls and writes a new 10-digit folder each time."""

    def __init__(self, model_dir):
        self.model_dir = str(model_dir)
        self.calls = []
        self._next = 1_700_000_000

    def export_saved_model(self, export_dir_base, serving_input_receiver_fn, assets_extra=None, checkpoint_path=None):
        self.calls.append((export_dir_base, checkpoint_path, assets_extra))
        path = os.path.join(export_dir_base, str(self._next))
        self._next += 1
        os.makedirs(path)
        return path


def receiver():
    return None


def test_exporter_base_is_abstract():
    with pytest.raises(NotImplementedError):
        Exporter().name  # noqa: B018
    with pytest.raises(NotImplementedError):
        Exporter().export(None, "", None, {}, False)


@pytest.mark.parametrize("cls, kwargs", [(LatestExporter, {"name": "x", "serving_input_receiver_fn": receiver}),
                                         (BestExporter, {})])
@pytest.mark.parametrize("bad", [0, -1])
def test_exports_to_keep_must_be_positive(cls, kwargs, bad):
    with pytest.raises(ValueError, match="`exports_to_keep`, if provided, must be positive number"):
        cls(exports_to_keep=bad, **kwargs)


def test_latest_exporter_exports_every_time_and_collects_garbage(tmp_path):
    est = FakeEstimator(tmp_path)
    base = tmp_path / "export" / "latest"
    base.mkdir(parents=True)
    (base / "notes").mkdir()
    (base / "123").mkdir()  # not 10 digits: never collected
    exporter = LatestExporter("latest", receiver, assets_extra={"a": "b"}, exports_to_keep=2)
    results = [exporter.export(est, str(base), f"ckpt-{i}", {"loss": 1.0}, False) for i in range(4)]
    assert exporter.name == "latest" and results[-1].endswith("1700000003")
    assert sorted(os.listdir(base)) == ["123", "1700000002", "1700000003", "notes"]
    assert est.calls[0] == (str(base), "ckpt-0", {"a": "b"})
    keep_all = LatestExporter("all", receiver, exports_to_keep=None)
    for _ in range(3):
        keep_all.export(est, str(tmp_path / "all"), None, {}, False)
    assert len(os.listdir(tmp_path / "all")) == 3


def test_final_exporter_only_exports_at_the_end(tmp_path):
    est = FakeEstimator(tmp_path)
    exporter = FinalExporter("final", receiver)
    assert exporter.export(est, str(tmp_path / "f"), "c", {}, False) is None and est.calls == []
    assert exporter.export(est, str(tmp_path / "f"), "c", {}, True).endswith("1700000000")


def test_best_exporter_argument_checks():
    with pytest.raises(ValueError, match=r"`compare_fn` must not be None\."):
        BestExporter(compare_fn=None)
    with pytest.raises(ValueError, match="must include best_eval_result argument"):
        BestExporter(compare_fn=lambda current_eval_result: True)
    with pytest.raises(ValueError, match="must include current_eval_result argument"):
        BestExporter(compare_fn=lambda best_eval_result: True)
    with pytest.raises(ValueError, match=r"has following not expected args: \['extra'\]"):
        BestExporter(compare_fn=lambda best_eval_result, current_eval_result, extra: True)
    assert BestExporter().name == "best_exporter"


def test_default_compare_is_strictly_smaller_loss():
    assert _loss_smaller({"loss": 2.0}, {"loss": 1.0}) is True
    assert _loss_smaller({"loss": 1.0}, {"loss": 1.0}) is False
    with pytest.raises(ValueError, match="best_eval_result cannot be empty or no loss is found in it"):
        _loss_smaller({"auc": 1.0}, {"loss": 1.0})
    with pytest.raises(ValueError, match="current_eval_result cannot be empty or no loss is found in it"):
        _loss_smaller({"loss": 1.0}, {})


def test_best_exporter_exports_only_improvements(tmp_path):
    est = FakeEstimator(tmp_path)
    exporter = BestExporter(serving_input_receiver_fn=receiver, exports_to_keep=2)
    base = str(tmp_path / "best")
    losses = [3.0, 2.0, 2.5, 2.0, 1.0, 0.5]
    exported = [exporter.export(est, base, None, {"loss": loss, "global_step": i}, False) is not None
                for i, loss in enumerate(losses, start=1)]
    assert exported == [True, True, False, False, True, True]
    assert exporter.best_eval_result == {"loss": 0.5, "global_step": 6}
    assert len(os.listdir(base)) == 2


def test_best_exporter_reads_past_results_after_a_restart(tmp_path):
    # A previous run evaluated (and exported) loss 0.2 at step 10; this process starts at step 20.
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={})
    writer = SummaryWriterCache.get(est.eval_dir())
    writer.add_scalars({"loss": 0.2, "mae": 0.3}, step=10)
    writer.add_scalars({"loss": 0.9}, step=20)  # the current evaluation, already written
    writer.flush()
    calls = []

    class Recording(BestExporter):
        pass

    exporter = Recording(serving_input_receiver_fn=receiver, compare_fn=lambda best_eval_result, current_eval_result: (
        calls.append((dict(best_eval_result), dict(current_eval_result))) or
        best_eval_result["loss"] > current_eval_result["loss"]))
    fake = FakeEstimator(tmp_path)
    assert exporter.export(fake, str(tmp_path / "b"), None, {"loss": 0.9, "global_step": 20}, False) is None
    assert exporter.best_eval_result == {"loss": 0.2, "mae": 0.3, "global_step": 10}
    assert exporter.export(fake, str(tmp_path / "b"), None, {"loss": 0.1, "global_step": 30}, False) is not None
    assert exporter.best_eval_result["loss"] == 0.1


def test_best_exporter_with_train_and_evaluate(tmp_path):
    from estimator_engine.export import build_raw_serving_input_receiver_fn
    from estimator_engine.testing import make_linear_data
    from estimator_engine.train_eval import EvalSpec, TrainSpec, train_and_evaluate

    features, labels = make_linear_data(n=128)
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={"learning_rate": 0.2},
                       config=ee.RunConfig(save_checkpoints_steps=None, save_checkpoints_secs=None))
    exporter = BestExporter(serving_input_receiver_fn=build_raw_serving_input_receiver_fn(features), exports_to_keep=1)
    _, results = train_and_evaluate(
        est, TrainSpec(ee.inputs.numpy_input_fn(features, labels, batch_size=32, shuffle=True, num_epochs=None),
                       max_steps=6),
        EvalSpec(ee.inputs.numpy_input_fn(features, labels, batch_size=128, shuffle=False), steps=None,
                 every_n_steps=3, exporters=exporter))
    assert results[0] is not None  # loss keeps falling: the last evaluation is exported
    assert os.listdir(os.path.join(est.model_dir, "export", "best_exporter")) == [os.path.basename(results[0])]


class _FailingExporter(Exporter):
    name = "broken"

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        raise OSError("disk full")


@pytest.mark.parametrize("every_n_steps", [None, 3])
def test_an_exporter_error_names_the_exporter_and_keeps_the_evaluation(tmp_path, every_n_steps, caplog):
    """TF lets the exporter's error propagate after the result was written to eval/: here too, and
    the error names the exporter and carries the result, which is also logged and in the summaries."""
    from estimator_engine.exporter import ExporterError
    from estimator_engine.summary import read_eval_metrics
    from estimator_engine.testing import make_linear_data
    from estimator_engine.train_eval import EvalSpec, TrainSpec, train_and_evaluate

    features, labels = make_linear_data(n=64)
    est = ee.Estimator(linear_model_fn, model_dir=str(tmp_path), params={"learning_rate": 0.2},
                       config=ee.RunConfig(save_checkpoints_steps=3, save_checkpoints_secs=None))
    with pytest.raises(ExporterError, match=r"Exporter 'broken' failed after the evaluation at global step 3: "
                                            r"OSError: disk full\. The evaluation result is kept") as caught:
        train_and_evaluate(
            est, TrainSpec(ee.inputs.numpy_input_fn(features, labels, batch_size=16, shuffle=False, num_epochs=None),
                           max_steps=9),
            EvalSpec(ee.inputs.numpy_input_fn(features, labels, batch_size=64, shuffle=False), steps=None,
                     throttle_secs=0, every_n_steps=every_n_steps, exporters=[_FailingExporter()]))
    error = caught.value
    assert isinstance(error.__cause__, OSError)
    assert error.exporter_name == "broken" and error.global_step == 3
    written = read_eval_metrics(est.eval_dir())
    assert list(written) == [3]
    assert written[3]["loss"] == pytest.approx(error.eval_result["loss"], rel=1e-6)
    assert any("Exporter 'broken' failed" in r.getMessage() and "'loss'" in r.getMessage() for r in caplog.records)


def test_exporter_error_pickles_with_its_result():
    import pickle

    from estimator_engine.exporter import ExporterError

    error = pickle.loads(pickle.dumps(ExporterError("latest", {"loss": 0.25, "global_step": 7}, "OSError: x")))
    assert (error.exporter_name, error.global_step, error.eval_result["loss"]) == ("latest", 7, 0.25)
    assert str(error).startswith("Exporter 'latest' failed after the evaluation at global step 7: OSError: x.")
