"""Bad input beyond the CSV corpus of tests/estimator_workbench/test_datasets.py (tests/data/bad/): a 2 GB
file, CSV bombs, formula cells in downloads, hostile and Unicode column names, 2,000 columns,
one row, HTML in every field the UI shows."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pandas as pd
import pytest

from estimator_workbench.data import datasets, predictions, sources
from estimator_workbench.execution import runner
from estimator_workbench.store.registry import RunRegistry

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "estimator_workbench" / "ui" / "app.py")
HOSTILE = {"größe 📏": [1.0, 2, 3, 4, 5, 6, 7, 8], "../../etc/x": [1.0, 2, 3, 4, 5, 6, 7, 8],
           "a/b\\c": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
           "<script>alert(1)</script>": ["u", "v"] * 4, "=cmd|' /C calc'!A0": [3.0] * 8,
           "espèce 🌸": ["a", "b"] * 4}


def test_two_gigabyte_file_is_refused_by_size_before_reading(tmp_path, monkeypatch):
    big = tmp_path / "huge.csv"
    with open(big, "wb") as f:
        f.truncate(2 * 1024**3)  # sparse: no 2 GB actually written
    monkeypatch.setattr(sources, "_read_bytes", lambda source: pytest.fail("read the file"))
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"is 2147\.5 MB, over the size limit of 209\.7 MB"):
        datasets.load_table(big)
    spec = datasets.DatasetSpec({"kind": "file", "path": str(big)},
                                datasets.Schema((datasets.ColumnSchema("a", "feature", "numeric", 0),
                                                 datasets.ColumnSchema("b", "label", "categorical", 0))))
    with pytest.raises(ValueError, match="over the size limit"):
        spec.load()
    assert time.monotonic() - started < 1.0


def test_two_gigabyte_file_through_the_cli(tmp_path, monkeypatch, capsys, workspace):
    from estimator_workbench.cli import commands as cli

    big = tmp_path / "huge.csv"
    with open(big, "wb") as f:
        f.truncate(2 * 1024**3)
    monkeypatch.setattr(sources, "_read_bytes", lambda source: pytest.fail("read the file"))
    assert cli.main(["run", "--dataset", str(big), "--template", "mlp_classifier",
                     "--steps", "5", "--detach"]) == 2
    assert "over the size limit" in capsys.readouterr().err


def test_csv_bomb_wide_header_is_refused_fast():
    header = ",".join(f"c{i}" for i in range(300_000)).encode()  # 2.3 MB, one line
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"has 300,000 columns, over the limit of 10,000"):
        datasets.load_csv(header + b"\n" + b"1," * 299_999 + b"1\n")
    # Without the limit this file took pandas ~10 s; 32 MB took 107 s and 4 GB of memory.
    assert time.monotonic() - started < 3.0


def test_csv_bomb_one_huge_field_is_refused_with_the_cause():
    data = b"a,b\n1,\"" + b"x" * 500_000 + b"\n2,y\n"  # an unclosed quote swallows the file
    with pytest.raises(ValueError, match=r"could not be parsed: field larger than field limit.*"
                                         r"unclosed quote"):
        datasets.load_csv(data)


def test_parquet_bomb_is_refused_from_its_footer(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    wide = pd.DataFrame({f"c{i}": [1.0] for i in range(datasets.MAX_COLUMNS + 1)})
    path = tmp_path / "wide.parquet"
    wide.to_parquet(path)
    monkeypatch.setattr(pd, "read_parquet", lambda *a, **k: pytest.fail("read the table"))
    with pytest.raises(ValueError, match="10,001 columns, over the limit of 10,000"):
        datasets.load_table(path)


def test_two_thousand_columns_one_row():
    names = [f"f{i}" for i in range(1999)] + ["label"]
    data = (",".join(names) + "\n" + ",".join(["1.5"] * 1999 + ["a"]) + "\n").encode()
    started = time.monotonic()
    frame = datasets.load_csv(data)
    schema = datasets.infer_schema(frame)
    assert frame.shape == (1, 2000) and schema.label == "label" and len(schema.features) == 1999
    # One row is the reason (issue 14 item 8), not the one class that follows from it.
    assert datasets.validate(frame, schema) == [
        "The dataset has 1 row(s); the action 'train' needs at least 2 rows (and more to learn "
        "anything). Add rows."]
    assert time.monotonic() - started < 2.0


def test_formula_cells_are_escaped_in_every_downloaded_csv(workspace):
    # Predictions (also checked through a real write in test_crash_consistency.py).
    escaped = predictions.escape_formulas(pd.DataFrame({
        "=HYPERLINK(\"http://x\")": ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "ok"],
        "n": [-1.5, 2, 3, 4, 5, 6]}))
    assert escaped.columns[0] == "'=HYPERLINK(\"http://x\")"
    assert escaped.iloc[:, 0].tolist() == ["'=cmd|' /C calc'!A0", "'+1+1", "'-2+3", "'@SUM(A1)",
                                           "'\tx", "ok"]
    assert escaped["n"].tolist() == [-1.5, 2, 3, 4, 5, 6]  # numbers stay numbers
    # The compare page's series download: run names and metric names are user text.
    from estimator_workbench.store.metrics_hook import append_rows
    from estimator_workbench.ui import tables

    reg = RunRegistry(workspace)
    rec = reg.create_run(name="=cmd|' /C calc'!A0", action="train", dataset={}, template={},
                         params={}, run_config={})
    append_rows(reg.run_dir(rec.run_id) / "metrics.jsonl",
                [{"step": 1, "wall_time": 0.0, "split": "eval", "name": "@evil", "value": -1.0}])
    table = pd.read_csv(io.BytesIO(tables.series_csv([reg.get(rec.run_id)], workspace)()))
    assert table["run_name"].tolist() == ["'=cmd|' /C calc'!A0"]
    assert table["name"].tolist() == ["'@evil"] and table["value"].tolist() == [-1.0]


def test_hostile_and_unicode_column_names_train_and_predict(workspace, tmp_path):
    """Column names are data, never paths: '../../etc/x', 'a/b\\c', emoji and HTML train, predict
    and come back in predictions.csv, and nothing is written outside the workspace."""
    from estimator_workbench import templates
    from estimator_workbench.cli import commands as cli

    path = tmp_path / "hostile 🌸.csv"
    pd.DataFrame(HOSTILE).to_csv(path, index=False)
    stored = datasets.save_upload(workspace, path.name, path.read_bytes())
    assert stored.parent == workspace / "datasets" and stored.name == "hostile.csv"
    dataset = cli._dataset_dict(str(stored), "espèce 🌸")
    reg = RunRegistry(workspace)
    info = templates.get_template("mlp_classifier")
    rec = reg.create_run(name="<b>hostile</b>", action="train", dataset=dataset,
                         template={"name": info.name, "code": info.code},
                         params={"hidden_units": "4"}, run_config={"tf_random_seed": 0},
                         schedule={"max_steps": 4, "batch_size": 4})
    before = set(tmp_path.parent.rglob("*"))
    assert runner.run(reg.run_dir(rec.run_id), install_signal_handlers=False) == 0, \
        reg.get(rec.run_id).error
    pred = reg.create_run(name="p", action="predict", dataset=dataset, template=rec.template,
                          params=rec.params, run_config=rec.run_config,
                          parent_run_id=rec.run_id, parent_relation="predict_from")
    assert runner.run(reg.run_dir(pred.run_id), install_signal_handlers=False) == 0, \
        reg.get(pred.run_id).error
    out = pd.read_csv(reg.run_dir(pred.run_id) / "predictions.csv")
    assert {"größe 📏", "../../etc/x", "a/b\\c", "<script>alert(1)</script>",
            "'=cmd|' /C calc'!A0", "class_ids", "class"} <= set(out.columns)
    assert len(out) == 8
    created = {p for p in set(tmp_path.parent.rglob("*")) - before}
    assert all(str(p).startswith(str(workspace)) for p in created), sorted(created)[:5]


def _elements(at):
    stack = [at._tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(getattr(node, "children", {}).values())


def test_html_in_every_field_is_shown_as_text(workspace, monkeypatch):
    """Run name, tags, template name, column names, errors with HTML/markdown: no element allows
    HTML, and user text inside markdown is escaped (no link, image or emphasis)."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    evil = "<img src=x onerror=alert(1)> [click](javascript:alert(1)) **bold** :red[x]"
    reg = RunRegistry(workspace)
    rec = reg.create_run(name=evil, action="train", dataset={"ref": {"kind": "bundled", "name": "iris"}},
                         template={"name": evil, "code": ""}, params={}, run_config={})
    reg.set_tags(rec.run_id, [evil])
    reg.set_status(rec.run_id, "cancelled", error=evil)
    for page in ("runs", "run", "compare", "data", "train"):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["run"] = rec.run_id
        at.run()
        at.switch_page(f"../../pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        for node in _elements(at):
            proto = getattr(node, "proto", None)
            if proto is not None and hasattr(proto, "allow_html"):
                assert not proto.allow_html, (page, node)
            assert getattr(node, "type", None) != "html", (page, node)
        if page == "run":
            caption = next(c.value for c in at.caption if "template" in c.value)
            # The header sets the run's name in bold (its own **...**); inside, all is escaped.
            name = re.match(r"^\*\*(.*?)(?<!\\)\*\* · ", caption)
            assert name and name.group(1).replace("\\", "") == evil, caption
            body = caption[name.end():]
            for active in (r"\]\(", r"\*\*", r"<", r":red\["):  # link, emphasis, tag, colour
                assert not re.search(r"(?<!\\)" + active, body), (active, caption)
            assert body.replace("\\", "").count(evil) == 2  # template and tag, as text
    # The upload path: HTML and markdown column names are escaped in the Data page's messages.
    frame = pd.DataFrame({"<b>x</b>": [1.0, 2, 3, 4], "[l](http://e)": ["a", "b", "a", "b"]})
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("../../pages/data.py").run()
    at.radio(key="data-source").set_value("Upload a file").run()
    at.file_uploader(key="data-upload").set_value(
        ("x.csv", frame.to_csv(index=False).encode(), "text/csv")).run()
    assert not at.exception, at.exception
    success = " ".join(s.value for s in at.success)
    assert re.search(r"label \*\*\\\[l\\\]\\\(http\\:", success), success
