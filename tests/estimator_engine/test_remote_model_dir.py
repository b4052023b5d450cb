"""model_dir on an object store (``s3://`` on a real S3-compatible server, moto; ``memory://``).

What TF's ``model_dir="s3://..."`` gave: checkpoints, ``latest_checkpoint``, keep_checkpoint_max,
resume, warm start, event files TensorBoard reads, exports; plus the engine's own guarantee that a
reader never sees a partial checkpoint (an upload that fails or is killed leaves the previous one
the latest), and that wrong credentials fail clearly with nothing written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
from s3_server import list_keys, unfinished_uploads

import estimator_engine as ee
from estimator_engine import checkpoints, gfile, summary
from estimator_engine import export as export_lib
from estimator_engine.export import build_raw_serving_input_receiver_fn
from estimator_engine.gfile import StorageError
from estimator_engine.inputs import numpy_input_fn
from estimator_engine.testing import linear_model_fn, make_linear_data

FEATURES, LABELS = make_linear_data(n=64)
X, Y = FEATURES["x"].numpy(), LABELS.numpy()


def train_input_fn():
    return numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=None, shuffle=False)()


def eval_input_fn():
    return numpy_input_fn({"x": X}, Y, batch_size=16, num_epochs=1, shuffle=False)()


def make_estimator(model_dir: str, **config) -> ee.Estimator:
    config.setdefault("save_checkpoints_steps", 5)
    return ee.Estimator(linear_model_fn, model_dir=model_dir, params={"learning_rate": 0.1},
                        config=ee.RunConfig(tf_random_seed=7, log_step_count_steps=None, **config))


def weights(estimator: ee.Estimator) -> dict[str, np.ndarray]:
    return {name: estimator.get_variable_value(name) for name in estimator.get_variable_names()}


class TestPaths:
    def test_file_url_is_the_local_path(self, tmp_path):
        estimator = make_estimator(f"file://{tmp_path}/m")
        assert estimator.model_dir == f"{tmp_path}/m"
        estimator.train(train_input_fn, max_steps=5)
        assert estimator.latest_checkpoint() == f"{tmp_path}/m/model.ckpt-5"

    def test_a_local_model_dir_never_imports_fsspec(self, tmp_path):
        script = textwrap.dedent(f"""
            import sys
            sys.path[:0] = [{os.path.dirname(__file__)!r}, {os.path.dirname(os.path.dirname(__file__))!r}]
            import test_remote_model_dir as t
            estimator = t.make_estimator({str(tmp_path / "m")!r}, save_summary_steps=2)
            estimator.train(t.train_input_fn, max_steps=5)
            estimator.evaluate(t.eval_input_fn)
            print(sorted(name for name in ("fsspec", "s3fs") if name in sys.modules))
        """)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == "[]"

    def test_unknown_protocol_is_refused_before_training(self):
        with pytest.raises(ValueError, match=r"'nosuchproto://b/m' is not a storage URL fsspec knows"):
            make_estimator("nosuchproto://b/m")


class TestMemoryStore:
    """fsspec's in-memory file system: the remote code path without a server."""

    def test_train_resume_and_evaluate_match_local_disk(self, tmp_path):
        local = make_estimator(str(tmp_path / "local"), keep_checkpoint_max=2)
        remote = make_estimator(f"memory://{tmp_path.name}/remote", keep_checkpoint_max=2)
        for estimator in (local, remote):
            estimator.train(train_input_fn, max_steps=10)
            estimator.train(train_input_fn, max_steps=20)  # resumes from step 10
        for name, value in weights(local).items():
            np.testing.assert_array_equal(weights(remote)[name], value)
        assert checkpoints.all_checkpoints(remote.model_dir) == [
            f"{remote.model_dir}/model.ckpt-15", f"{remote.model_dir}/model.ckpt-20"]
        assert remote.evaluate(eval_input_fn) == local.evaluate(eval_input_fn)
        assert summary.read_eval_metrics(remote.eval_dir()) == summary.read_eval_metrics(local.eval_dir())

    def test_early_stopping_rereads_results_written_to_the_store(self, tmp_path):
        from estimator_engine import early_stopping
        from estimator_engine.hooks import SessionRunContext, SessionRunValues

        estimator = make_estimator(f"memory://{tmp_path.name}/early")
        hook = early_stopping.stop_if_no_decrease_hook(estimator, "loss", 10, run_every_secs=None,
                                                       run_every_steps=1)
        writer = summary.SummaryWriterCache.get(estimator.eval_dir())

        def stops_at(step):
            context = SessionRunContext(original_args=None, session=type("S", (), {"global_step": step})())
            hook.after_run(context, SessionRunValues(None))
            return context.stop_requested

        hook.begin()
        writer.add_scalars({"loss": 1.0}, step=10)
        writer.flush()
        assert stops_at(11) is False
        writer.add_scalars({"loss": 2.0}, step=30)  # no decrease for 20 > 10 steps
        writer.flush()
        assert stops_at(31) is True
        summary.SummaryWriterCache.clear()


def test_checkpoints_on_s3(s3_server, s3_bucket, tmp_path):
    model_dir = f"{s3_bucket}/run/model"
    estimator = make_estimator(model_dir, keep_checkpoint_max=2)
    estimator.train(train_input_fn, max_steps=20)
    assert estimator.latest_checkpoint() == f"{model_dir}/model.ckpt-20"
    keys = list_keys(s3_server, f"{s3_bucket}/run/model")
    ckpts = [key for key in keys if "model.ckpt" in key]
    assert ckpts == ["run/model/model.ckpt-15", "run/model/model.ckpt-20"]  # pruned to 2
    state = gfile.read_bytes(f"{model_dir}/checkpoint").decode()
    assert 'model_checkpoint_path: "model.ckpt-20"' in state
    # The same training on local disk gives the same weights (the store changes nothing).
    local = make_estimator(str(tmp_path / "m"), keep_checkpoint_max=2)
    local.train(train_input_fn, max_steps=20)
    loaded = checkpoints.load_checkpoint(model_dir)
    assert loaded["global_step"] == 20
    for name, value in weights(local).items():
        np.testing.assert_array_equal(checkpoints.load_variable(model_dir, name), value)
        if name != "global_step":
            torch.testing.assert_close(loaded["variables"][name], torch.from_numpy(value))
    # A fresh Estimator (another process, as the workbench's evaluate) resumes from the store.
    again = make_estimator(model_dir, keep_checkpoint_max=2)
    assert again.evaluate(eval_input_fn) == local.evaluate(eval_input_fn)
    again.train(train_input_fn, max_steps=25)
    assert again.latest_checkpoint() == f"{model_dir}/model.ckpt-25"
    assert checkpoints.list_checkpoint_files(model_dir) == [f"{model_dir}/model.ckpt-20",
                                                            f"{model_dir}/model.ckpt-25"]


def test_warm_start_from_s3_and_export_to_s3(s3_server, s3_bucket, tmp_path):
    source = make_estimator(f"{s3_bucket}/source")
    source.train(train_input_fn, max_steps=10)
    warm = ee.Estimator(linear_model_fn, model_dir=str(tmp_path / "warm"), params={"learning_rate": 0.0},
                        warm_start_from=f"{s3_bucket}/source")
    warm.train(train_input_fn, max_steps=1)  # learning rate 0: the weights stay the warm-started ones
    for name in ("linear/weight", "linear/bias"):
        np.testing.assert_array_equal(warm.get_variable_value(name), source.get_variable_value(name))

    serving_input_fn = build_raw_serving_input_receiver_fn({"x": torch.zeros(2, 1)})
    export_dir = source.export_saved_model(f"{s3_bucket}/exports", serving_input_fn)
    assert export_dir.startswith(f"{s3_bucket}/exports/") and len(export_dir.rsplit("/", 1)[1]) == 10
    keys = list_keys(s3_server, f"{s3_bucket}/exports")
    assert f"exports/{export_dir.rsplit('/', 1)[1]}/{export_lib.SIGNATURE_FILENAME}" in keys
    model = export_lib.load(export_dir)
    outputs = model({"x": np.array([[1.0], [2.0]], np.float32)})
    w, b = source.get_variable_value("linear/weight"), source.get_variable_value("linear/bias")
    np.testing.assert_allclose(np.asarray(next(iter(outputs.values()))).reshape(-1),
                               (np.array([[1.0], [2.0]]) @ w.T + b).reshape(-1), rtol=1e-6)


def test_event_files_on_s3_are_read_by_tensorboard(s3_server, s3_bucket, tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model_dir = f"{s3_bucket}/tb"
    estimator = make_estimator(model_dir, save_summary_steps=5)
    estimator.train(train_input_fn, max_steps=10)
    estimator.evaluate(eval_input_fn)
    local = tmp_path / "download"
    fs, inner = gfile.filesystem(model_dir)
    fs.get(inner + "/", str(local) + "/", recursive=True)
    events = [name for name in os.listdir(local) if name.startswith("events.out.tfevents.")]
    assert len(events) == 1
    # What TensorBoard reads from the store equals what it reads from the same run on local disk.
    on_disk = make_estimator(str(tmp_path / "disk"), save_summary_steps=5)
    on_disk.train(train_input_fn, max_steps=10)
    on_disk.evaluate(eval_input_fn)
    for store_dir, disk_dir in ((local, tmp_path / "disk"), (local / "eval", tmp_path / "disk" / "eval")):
        store, disk = EventAccumulator(str(store_dir)), EventAccumulator(str(disk_dir))
        store.Reload()
        disk.Reload()
        assert [(e.step, e.value) for e in store.Scalars("loss")] == [
            (e.step, e.value) for e in disk.Scalars("loss")]
    assert len(EventAccumulator(str(local)).Reload().Scalars("loss")) == 2  # steps 1 and 6
    # TensorBoard itself reads the bucket (its S3 file system: boto3, S3_ENDPOINT), as
    # `tensorboard --logdir s3://...` does.
    monkeypatch.setenv("S3_ENDPOINT", s3_server.endpoint)
    direct = EventAccumulator(model_dir)
    direct.Reload()
    disk = EventAccumulator(str(tmp_path / "disk"))
    disk.Reload()
    assert [(e.step, e.value) for e in direct.Scalars("loss")] == [
        (e.step, e.value) for e in disk.Scalars("loss")]


def test_event_file_upload_keeps_the_bytes_already_read(s3_server, s3_bucket, monkeypatch):
    """Append by rewrite: each upload starts with the previous upload's bytes (TensorBoard's
    reader goes on from the offset it had read to)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv("S3_ENDPOINT", s3_server.endpoint)
    logdir = f"{s3_bucket}/writer"
    writer = summary.SummaryWriter(logdir)
    writer.add_scalar("loss", 1.0, step=1)
    writer.flush()
    name = next(n for n in gfile.listdir(logdir) if n.startswith("events."))
    first = gfile.read_bytes(f"{logdir}/{name}")
    tensorboard = EventAccumulator(logdir)  # a TensorBoard that keeps reading the bucket
    assert [e.value for e in tensorboard.Reload().Scalars("loss")] == [1.0]
    writer.add_scalar("loss", 0.5, step=2)
    writer.close()
    second = gfile.read_bytes(f"{logdir}/{name}")
    assert len(second) > len(first) and second.startswith(first)
    assert [e.value for e in tensorboard.Reload().Scalars("loss")] == [1.0, 0.5]  # read on, not again
    assert [r["value"] for r in summary.read_summaries(logdir)] == [1.0, 0.5]
    # A new writer (a later evaluate in another process) appends to summaries.jsonl.
    with summary.SummaryWriter(logdir) as again:
        again.add_scalar("loss", 0.25, step=3)
    assert [r["value"] for r in summary.read_summaries(logdir)] == [1.0, 0.5, 0.25]


def test_failed_upload_leaves_the_previous_checkpoint_latest(s3_server, s3_bucket, monkeypatch):
    """An upload that fails half-way (the server never gets a whole object) writes nothing: the
    previous checkpoint stays the latest, loads, and training resumes from it."""
    import s3fs

    model_dir = f"{s3_bucket}/m"
    estimator = make_estimator(model_dir)
    estimator.train(train_input_fn, max_steps=5)
    original = s3fs.S3FileSystem._call_s3

    async def failing_call(self, method, *args, **kwargs):
        if method == "put_object" and kwargs.get("Key", "").endswith("model.ckpt-10"):
            raise ConnectionResetError("connection reset by peer (injected mid-upload)")
        return await original(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", failing_call)
    with pytest.raises(StorageError, match=rf"Could not upload to {model_dir}/model.ckpt-10: "
                                           r"ConnectionResetError"):
        estimator.train(train_input_fn, max_steps=10)
    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", original)
    assert [k for k in list_keys(s3_server, model_dir) if "ckpt" in k] == ["m/model.ckpt-0", "m/model.ckpt-5"]
    assert checkpoints.latest_checkpoint(model_dir) == f"{model_dir}/model.ckpt-5"
    assert checkpoints.load_checkpoint(model_dir)["global_step"] == 5
    make_estimator(model_dir).train(train_input_fn, max_steps=10)
    assert checkpoints.latest_checkpoint(model_dir) == f"{model_dir}/model.ckpt-10"


_KILLED_WRITER = textwrap.dedent("""
    import os, sys, time
    import s3fs
    sys.path[:0] = [{tests!r}, os.path.dirname({tests!r})]
    import test_remote_model_dir as t

    original = s3fs.S3FileSystem._call_s3

    async def stalled(self, method, *args, **kwargs):
        if method in ("put_object", "upload_part") and kwargs.get("Key", "").endswith("model.ckpt-10"):
            open({marker!r}, "w").close()  # the upload has begun: the test kills us now
            time.sleep(600)
        return await original(self, method, *args, **kwargs)

    s3fs.S3FileSystem._call_s3 = stalled
    t.make_estimator({model_dir!r}).train(t.train_input_fn, max_steps=10)
""")


def test_writer_killed_mid_upload(s3_server, s3_bucket, tmp_path):
    model_dir = f"{s3_bucket}/killed"
    make_estimator(model_dir).train(train_input_fn, max_steps=5)
    marker = tmp_path / "uploading"
    script = _KILLED_WRITER.format(tests=os.path.dirname(__file__), marker=str(marker), model_dir=model_dir)
    scratch = tmp_path / "tmp"  # the killed process's staging files stay under tmp_path
    scratch.mkdir()
    env = dict(os.environ, **s3_server.env(), TMPDIR=str(scratch))
    process = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():  # wait on the condition: the upload of model.ckpt-10 began
            assert process.poll() is None, f"the writer exited early ({process.returncode})"
            assert time.monotonic() < deadline, "the writer never began uploading model.ckpt-10"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    assert [k for k in list_keys(s3_server, model_dir) if "ckpt" in k] == ["killed/model.ckpt-0", "killed/model.ckpt-5"]
    assert checkpoints.latest_checkpoint(model_dir) == f"{model_dir}/model.ckpt-5"
    assert checkpoints.load_checkpoint(model_dir)["global_step"] == 5
    assert unfinished_uploads(s3_server, model_dir) == []


def test_wrong_credentials_fail_clearly_with_nothing_written(s3_server, s3_bucket, monkeypatch):
    from s3_server import clear_s3fs_instances

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    clear_s3fs_instances()
    model_dir = f"{s3_bucket}/denied"
    estimator = make_estimator(model_dir)
    with pytest.raises(StorageError) as raised:
        estimator.train(train_input_fn, max_steps=5)
    message = str(raised.value)
    assert f"{model_dir}/" in message
    assert "PermissionError" in message
    assert "Check the S3 credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY" in message
    assert list_keys(s3_server, s3_bucket) == []
