"""Run artifacts on an object store: with ``WORKBENCH_STORAGE_URL=s3://...`` (or ``--storage-url``)
a run's model_dir is ``<storage>/runs/<run_id>/model``, the registry and metrics stay local, and
evaluate / predict from such a run work (against moto's S3 server, tests/s3_server.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from s3_server import list_keys

from estimator_workbench.cli import commands as cli
from estimator_workbench.execution import runner
from estimator_workbench.store import paths
from estimator_workbench.store.registry import RunRegistry


class TestStorageUrl:
    def test_unset_keeps_the_model_in_the_run_folder(self, monkeypatch):
        monkeypatch.delenv(paths.STORAGE_URL_ENV, raising=False)
        assert paths.storage_url() is None
        assert paths.model_location("/ws/runs/r-1") == "/ws/runs/r-1/model"

    def test_a_url_puts_the_model_under_runs_of_the_storage(self, monkeypatch):
        monkeypatch.setenv(paths.STORAGE_URL_ENV, "s3://bucket/team/")
        assert paths.storage_url() == "s3://bucket/team"
        assert paths.model_location("/ws/runs/r-1") == "s3://bucket/team/runs/r-1/model"

    def test_a_local_path_is_refused(self, monkeypatch):
        monkeypatch.setenv(paths.STORAGE_URL_ENV, "/mnt/share")
        with pytest.raises(ValueError, match=r"WORKBENCH_STORAGE_URL='/mnt/share' is not a storage URL: "
                                             r"use an object store's URL such as s3://bucket/prefix"):
            paths.storage_url()

    def test_cli_refuses_a_bad_storage_url_in_one_line(self, workspace, capsys, monkeypatch):
        # main() sets the variable for the runners it starts: restored (unset) after this test
        monkeypatch.setenv(paths.STORAGE_URL_ENV, "")
        monkeypatch.delenv(paths.STORAGE_URL_ENV)
        assert cli.main(["--storage-url", "nosuchproto://x", "runs"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("estimator-workbench: error: 'nosuchproto://x' is not a storage URL fsspec knows")
        assert len(err.strip().splitlines()) == 1


def _iris_run(workspace, **kwargs):
    from estimator_workbench import templates

    info = templates.get_template("mlp_classifier")
    return RunRegistry(workspace).create_run(
        name="iris", dataset=cli._dataset_dict("iris", None),
        template={"name": info.name, "code": info.code}, params={"hidden_units": "16"},
        run_config={"tf_random_seed": 0, "save_checkpoints_steps": 20, "keep_checkpoint_max": 2},
        **kwargs)


def _run(workspace, run_id):
    code = runner.run(RunRegistry(workspace).run_dir(run_id), install_signal_handlers=False)
    record = RunRegistry(workspace).get(run_id)
    assert record.status == "succeeded", (code, record.error, record.traceback)
    return record


def test_train_evaluate_and_predict_with_the_model_on_s3(s3_server, s3_bucket, workspace, monkeypatch):
    storage = f"{s3_bucket}/team"
    monkeypatch.setenv(paths.STORAGE_URL_ENV, storage)
    trained = _run(workspace, _iris_run(workspace, action="train", schedule={"max_steps": 40}).run_id)
    run_dir = RunRegistry(workspace).run_dir(trained.run_id)
    keys = list_keys(s3_server, f"{storage}/runs/{trained.run_id}/model")
    prefix = f"team/runs/{trained.run_id}/model/"
    assert [k for k in keys if "model.ckpt" in k] == [f"{prefix}model.ckpt-20", f"{prefix}model.ckpt-40"]
    assert f"{prefix}checkpoint" in keys
    assert any(k.startswith(f"{prefix}events.out.tfevents.") for k in keys)
    assert not (run_dir / paths.MODEL_DIR).exists()  # nothing of the model on local disk
    assert (run_dir / paths.METRICS_FILE).exists()  # the metrics stay in the workspace

    registry = RunRegistry(workspace)
    evaluated = _run(workspace, registry.create_run(
        name="eval", action="evaluate", dataset=trained.dataset, template=trained.template,
        params=trained.params, run_config=trained.run_config, parent_run_id=trained.run_id,
        parent_relation="evaluate_from").run_id)
    assert evaluated.summary["eval/accuracy"]["last_step"] == 40
    assert 0.0 <= evaluated.summary["eval/accuracy"]["last"] <= 1.0

    predicted = _run(workspace, registry.create_run(
        name="predict", action="predict", dataset=trained.dataset, template=trained.template,
        params=trained.params, run_config=trained.run_config, parent_run_id=trained.run_id,
        parent_relation="predict_from").run_id)
    import pandas as pd

    predictions = pd.read_csv(Path(registry.run_dir(predicted.run_id)) / paths.PREDICTIONS_FILE)
    assert len(predictions) > 0 and "class_ids" in predictions.columns


class TestLineageOnTheStore:
    """A child run whose parent's model_dir is on the storage (fsspec's memory:// store)."""

    def make_ctx(self, workspace, **kwargs):
        from estimator_workbench.execution import run_context
        from estimator_workbench.store.run_spec import RunSpec

        rec = RunRegistry(workspace).create_run(
            name="t", action="train", dataset={"name": "none"}, template={"name": "t", "code": ""},
            params={}, run_config={}, schedule={}, **kwargs)
        folder = RunRegistry(workspace).run_dir(rec.run_id)
        return run_context.RunContext(run_dir=folder, spec=RunSpec.read(folder / "run.json"))

    def parent_on_store(self, workspace, storage):
        from estimator_engine import checkpoints

        parent = RunRegistry(workspace).create_run(
            name="p", action="train", dataset={"name": "none"}, template={"name": "t", "code": ""},
            params={}, run_config={}, schedule={})
        model = f"{storage}/runs/{parent.run_id}/model"
        checkpoints.create_checkpoint(model, {"net/w": [1.0]}, 5)
        return parent, model

    def test_warm_start_resume_and_evaluate_from_a_parent_on_the_store(self, workspace, tmp_path, monkeypatch):
        from estimator_engine import checkpoints
        from estimator_workbench.execution import lineage

        storage = f"memory://{tmp_path.name}/store"
        monkeypatch.setenv(paths.STORAGE_URL_ENV, storage)
        parent, model = self.parent_on_store(workspace, storage)

        found = lineage.prepare_lineage(self.make_ctx(workspace, parent_run_id=parent.run_id,
                                                      parent_relation="warm_start"))
        assert found.warm_start_from == model

        found = lineage.prepare_lineage(self.make_ctx(workspace, parent_run_id=parent.run_id,
                                                      parent_relation="warm_start",
                                                      checkpoint_path="model/model.ckpt-5"))
        assert found.warm_start_from == f"{model}/model.ckpt-5"

        child = self.make_ctx(workspace, parent_run_id=parent.run_id, parent_relation="resume")
        lineage.prepare_lineage(child)
        assert checkpoints.latest_checkpoint(child.model_location) == f"{child.model_location}/model.ckpt-5"
        assert checkpoints.load_variable(child.model_location, "net/w").tolist() == [1.0]

        found = lineage.prepare_lineage(self.make_ctx(workspace, parent_run_id=parent.run_id,
                                                      parent_relation="predict_from"))
        assert found.checkpoint_path == f"{model}/model.ckpt-5"
