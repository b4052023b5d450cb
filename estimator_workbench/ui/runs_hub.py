"""The Runs page as the hub of the workbench (issue 15 items 1, 5, 6): filters, the sortable and
selectable runs table, bulk actions on the selected rows (compare, tag, delete to the trash), the
trash (restore, empty), and the run page's header (rename, notes, progress with ETA or queue place).

The table's data comes from ``estimator_workbench.ui.tables`` (pure functions); this module only draws.
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
import time
import zlib
from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from estimator_workbench.execution import run_actions
from estimator_workbench.execution.tf_import import describe_import
from estimator_workbench.store import audit, trash
from estimator_workbench.store.audit import NotAllowedError, refusal
from estimator_workbench.store.records import STATUSES, RunNotFoundError, RunRecord
from estimator_workbench.ui import run_groups, run_query, tables
from estimator_workbench.ui.session import (
    PAGE_SCRIPTS,
    get_launcher,
    get_registry,
    md,
    page_link,
    set_selected_run,
    show_error,
    workspace,
)
from estimator_workbench.ui.signin import current_actor

__all__ = [
    "COMPARE_QUERY_KEY",
    "COMPARE_STATE_KEY",
    "ask_confirmation",
    "audit_section",
    "bulk_actions",
    "confirm_cancel",
    "confirm_trash",
    "confirmation_dialogs",
    "helper_grouping",
    "open_compare",
    "progress_line",
    "refresh_when_changed",
    "refreshed_by_watcher",
    "run_header",
    "runs_filters",
    "runs_table",
    "show_notice",
    "table_key",
    "trash_section",
    "trashed_notice",
]


COMPARE_QUERY_KEY = "runs"  # the Compare page reads ``?runs=a,b,c`` (comma-separated run ids)


COMPARE_STATE_KEY = "compare_runs"  # ... and the same ids from this session-state key


_PROGRESS_INTERVAL_S = 2.0


REFRESH_INTERVAL_S = 2.0  # how often an open Runs page looks for runs that changed elsewhere


_REFRESHED_KEY = "_runs_refreshed"  # set by the watcher for the rerun it asks for
_SELECTED_KEY = "_runs_selected_ids"  # the run ids ticked in the runs table when it was last drawn


def refresh_when_changed(drawn: tuple[Any, ...], interval: float = REFRESH_INTERVAL_S) -> None:
    """Redraws the page, within ``interval`` seconds, when the runs changed elsewhere (a run
    submitted from Python or the CLI, another browser's delete, a run that ended): ``drawn`` is
    the registry's ``change_stamp()`` the page was drawn with.

    Each tick is one aggregate query in a fragment that draws nothing; the page reruns only when
    the stamp differs. That rerun keeps the filters (keyed widgets) and the ticked runs
    (``runs_table``), and only reads: ``refreshed_by_watcher`` tells the page to skip the
    launcher's poll, so redrawing never starts a queued run or a spare runner."""

    @st.fragment(run_every=interval)
    def _watch() -> None:
        try:
            current = get_registry().change_stamp()
        except sqlite3.OperationalError:  # a busy or unreachable registry: look again next tick
            return
        if current != drawn:
            st.session_state[_REFRESHED_KEY] = True
            st.rerun()

    _watch()


def refreshed_by_watcher() -> bool:
    """Whether this run of the page is the watcher's redraw (``refresh_when_changed``); asks once."""
    return bool(st.session_state.pop(_REFRESHED_KEY, False))


def runs_filters(records: Sequence[RunRecord], key: str = "runs") -> tuple[list[RunRecord], str | None]:
    """Status, text (regex), tag, template and dataset filters, and the eval metric the table ranks
    by; returns the runs that pass and the chosen metric (None when no run has an eval metric)."""
    c1, c2, c3 = st.columns([2, 3, 2])
    statuses = c1.multiselect("Status", [*STATUSES, "stalled"], key=f"{key}-status")
    text = c2.text_input("Filter (regex on id, name, template, dataset, tags, notes)", key=f"{key}-filter")
    metrics = tables.eval_metric_names(records)
    default = tables.default_metric(metrics)
    metric = c3.selectbox("Eval metric", metrics, index=None if default is None else metrics.index(default),
                          key=f"{key}-metric",
                          help="Its columns: the final value (the last evaluation, the model the run ended "
                               "with), the best value the run reached and the step it reached it at.")
    c4, c5, c6, c7 = st.columns(4)
    tags = c4.multiselect("Tags (all of)", sorted({t for r in records for t in r.tags}), key=f"{key}-tags")
    templates = c5.multiselect("Template", sorted({r.template_name or "" for r in records}), key=f"{key}-templates")
    datasets = c6.multiselect("Dataset", sorted({tables.dataset_name(r) for r in records}), key=f"{key}-datasets")
    actions = c7.multiselect("Action", sorted({r.action for r in records}), key=f"{key}-actions")
    try:
        shown = tables.filter_runs(records, statuses, text, tags=tags, templates=templates, datasets=datasets)
    except ValueError as exc:
        show_error(exc)
        shown = list(records)
    if actions:  # (issue 28 item 9)
        shown = [r for r in shown if r.action in actions]
    condition = st.text_input("Metric condition", key=f"{key}-condition", placeholder="accuracy > 0.7 and loss < 0.5",
                              help="Runs whose last logged value of each metric passes (eval/<name> unless you "
                                   "write train/loss); operators > >= < <= == !=.")
    if condition.strip():  # (issue 28 item 10)
        try:
            shown = run_query.filter_by_condition(shown, condition)
        except ValueError as exc:
            show_error(exc)
    return shown, metric


def helper_grouping(shown: Sequence[RunRecord], key: str = "runs") -> run_groups.RunGroups:
    """The 'evaluate/predict runs of other runs' toggle (off: grouped under their parent, counted
    in its 'helpers' column; on: listed right under it) and the grouped rows (issue 28 item 9)."""
    show = st.toggle("Show evaluate/predict runs under their run", key=f"{key}-show-helpers",
                     help="Evaluation plots, predictions and evaluations launched from a trained run are "
                          "grouped under it; the 'helpers' column counts them.")
    return run_groups.group_helper_runs(shown, show_helpers=show)


def table_key(records: Sequence[RunRecord], prefix: str = "runs-table") -> str:
    """The widget key of a selectable table of ``records``: it changes whenever the rows do.

    A selection is a list of row positions; kept across a change of rows (a new run on top, runs
    moved to the trash) it would point at other runs, and a bulk delete would hit them."""
    return f"{prefix}-{zlib.crc32(' '.join(r.run_id for r in records).encode()):08x}"


def runs_table(shown: Sequence[RunRecord], every_run: Sequence[RunRecord], metric: str | None,
               groups: run_groups.RunGroups | None = None, keep_selection: bool = False) -> list[RunRecord]:
    """The runs table (sort by a click on a column header, select rows with the checkboxes on
    the left); returns the selected runs. ``every_run`` (unfiltered) gives the queue places;
    ``groups`` (of ``shown``) adds the 'helpers' column and marks helper rows under their run;
    ``keep_selection`` (the watcher's redraw) ticks again the runs ticked in the last drawn table."""
    frame = tables.hub_frame(shown, workspace(), metric, tables.queue_positions(every_run))
    frame.insert(frame.columns.get_loc("tags") + 1, "notes", [_first_line(r.note) for r in shown])
    if groups is not None:
        frame.insert(1, "helpers", [groups.helpers.get(r.run_id, "") for r in shown])
        frame["name"] = [run_groups.NESTED_PREFIX + n if r.run_id in groups.nested else n
                         for r, n in zip(shown, frame["name"])]
    frame = tables.tidy_frame(frame)
    params = {c: st.column_config.NumberColumn(c, format="%.4g") for c in frame.columns
              if str(c).startswith("param: ") and frame[c].dtype.kind == "f"}  # a sampled lr: 0.003162
    final, best, best_step = tables.metric_columns(metric)
    key = table_key(shown)
    # New rows give the table a new key (a selection is row positions). When the watcher redraws
    # the page for a run that arrived from elsewhere, the runs ticked before are ticked again at
    # their new positions; a filter or a new visit starts unticked, as before (a selection
    # brought back from an earlier visit was unticked by the user's next click).
    row_of = {record.run_id: i for i, record in enumerate(shown)}
    kept = [row_of[run_id] for run_id in st.session_state.get(_SELECTED_KEY, ()) if run_id in row_of] \
        if keep_selection else []
    default = {"selection": {"rows": kept, "columns": []}} if kept and key not in st.session_state else None
    event = st.dataframe(
        frame, hide_index=True, key=key, on_select="rerun", selection_mode="multi-row", placeholder="",
        selection_default=default,
        column_config={
            "name": st.column_config.TextColumn("name", pinned=True),
            "run": st.column_config.TextColumn("run", help="Run id"),
            "progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent"),
            "ETA": st.column_config.TextColumn("ETA", help="Time left at the step rate of the last minute"),
            "queue": st.column_config.NumberColumn("queue", help="Place in the queue (1 = next to start)"),
            final: st.column_config.NumberColumn(final, format="%.4g", help="At the run's last evaluation"),
            best: st.column_config.NumberColumn(best, format="%.4g", help="The best value over the run's evaluations"),
            best_step: st.column_config.NumberColumn(best_step, help=f"The step of the {best}"),
            "smoothed loss": st.column_config.NumberColumn(
                "smoothed loss", format="%.4g",
                help=f"Train loss, exponential moving average (weight {tables.LOSS_SMOOTHING}) of the last logged values"),
            "created": st.column_config.DatetimeColumn("created", format="YYYY-MM-DD HH:mm:ss"),
            **params,
        })
    rows = list(getattr(getattr(event, "selection", None), "rows", None) or [])
    selected = [shown[i] for i in rows if 0 <= i < len(shown)]
    st.session_state[_SELECTED_KEY] = [record.run_id for record in selected]
    return selected


def _first_line(note: str | None, limit: int = 80) -> str:
    """A note as a table cell: its first line, cut at ``limit`` characters."""
    line = (note or "").strip().splitlines()[0] if (note or "").strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def open_compare(run_ids: Sequence[str]) -> None:
    """Switches to the Compare page with ``run_ids`` in its URL (``?runs=a,b``) and session."""
    ids = list(dict.fromkeys(run_ids))
    st.session_state[COMPARE_STATE_KEY] = ids
    page = PAGE_SCRIPTS.get("compare")
    if page is None:  # no router (a page run on its own)
        st.query_params[COMPARE_QUERY_KEY] = ",".join(ids)
        return
    st.switch_page(page, query_params={COMPARE_QUERY_KEY: ",".join(ids)})


_ASK_KEY = "_runs_confirm"  # the open confirmation: {'kind', 'origin', 'run_ids', 'names'}


def _forget_question() -> None:
    st.session_state.pop(_ASK_KEY, None)


def ask_confirmation(kind: str, origin: str, run_ids: Sequence[str] = (), names: Sequence[str] = ()) -> None:
    """Opens the confirmation dialog ``kind`` ('trash' or 'empty') for ``run_ids``, drawn by the
    caller named ``origin`` (see ``confirmation_dialogs``).

    The question lives in the session until answered or dismissed, so that the dialog stays open
    through full reruns of the page (its buttons rerun only the dialog in a browser, the whole page
    under AppTest)."""
    st.session_state[_ASK_KEY] = {"kind": kind, "origin": origin, "run_ids": list(run_ids),
                                  "names": list(names)}
    confirmation_dialogs(origin)


def confirm_trash(run_ids: Sequence[str], names: Sequence[str], origin: str = "run") -> None:
    """Asks before moving runs to the trash (they can be restored until the trash is emptied)."""
    ask_confirmation("trash", origin, run_ids, names)


def confirm_cancel(run_id: str, name: str, origin: str = "run") -> None:
    """Asks before cancelling a queued or running run (it ends now, without a last checkpoint)."""
    ask_confirmation("cancel", origin, [run_id], [name])


def confirmation_dialogs(origin: str) -> None:
    """Draws the open confirmation dialog when ``origin`` asked it (call once per page run)."""
    ask = st.session_state.get(_ASK_KEY)
    if ask and ask.get("origin") == origin:
        {"trash": _trash_dialog, "empty": _empty_dialog, "cancel": _cancel_dialog}[ask["kind"]](ask)


@st.dialog("Move to the trash?", on_dismiss=_forget_question)
def _trash_dialog(ask: dict[str, Any]) -> None:
    run_ids, names = ask["run_ids"], ask["names"]
    listed = ", ".join(md(n) for n in names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    st.write(f"Move {len(run_ids)} run{'' if len(run_ids) == 1 else 's'} to the trash: {listed}?")
    st.caption("Their folders stay until you empty the trash; restore them from the Trash section "
               "of the Runs page.")
    c1, c2 = st.columns(2)
    if c1.button("Move to trash", type="primary", key="confirm-trash", icon=":material/delete:"):
        _forget_question()
        outcome = run_actions.trash_runs(get_registry(), run_ids, current_actor())
        st.session_state["_runs_notice"] = ("warning" if outcome.refused else "success",
                                            "Moved to the trash: " + outcome.message())
        if st.session_state.get("selected_run") in outcome.done:
            set_selected_run(None)
        st.rerun()
    if c2.button("Keep", key="cancel-trash"):
        _forget_question()
        st.rerun()


@st.dialog("Cancel the run?", on_dismiss=_forget_question)
def _cancel_dialog(ask: dict[str, Any]) -> None:
    [run_id], [name] = ask["run_ids"], ask["names"]
    st.write(f"Cancel run {run_id} ({md(name)}) now? Its processes get SIGTERM, then SIGKILL after a "
             "grace period; it keeps the checkpoints written so far. **Stop** instead ends it after a "
             "last checkpoint, and it can be resumed.")
    c1, c2 = st.columns(2)
    if c1.button("Cancel the run", type="primary", key="confirm-cancel", icon=":material/cancel:"):
        _forget_question()
        try:  # SIGKILL later, in the background; checked and logged as any run action
            run_actions.cancel(get_launcher(), run_id, current_actor(), grace=5.0, wait=False)
        except (ValueError, RunNotFoundError, NotAllowedError) as exc:
            st.session_state["_runs_notice"] = ("warning", f"Run {run_id} was not cancelled: {exc}")
        else:
            st.session_state["_runs_notice"] = ("success", f"Cancel sent to {run_id} ({name}): it ends once "
                                                           "its processes are gone.")
        st.rerun()
    if c2.button("Keep it running", key="keep-running"):
        _forget_question()
        st.rerun()


@st.dialog("Empty the trash?", on_dismiss=_forget_question)
def _empty_dialog(ask: dict[str, Any]) -> None:
    count = len(ask["run_ids"])
    st.write(f"Delete the {count} run{'' if count == 1 else 's'} in the trash for good, with "
             "their folders (checkpoints, metrics, logs)? This cannot be undone.")
    c1, c2 = st.columns(2)
    if c1.button("Delete for good", type="primary", key="confirm-empty", icon=":material/delete_forever:"):
        _forget_question()
        outcome = run_actions.empty_trash(get_registry(), current_actor(), ask["run_ids"])
        st.session_state["_runs_notice"] = ("warning" if outcome.refused else "success",
                                            "Trash emptied: " + outcome.message())
        st.rerun()
    if c2.button("Keep", key="cancel-empty"):
        _forget_question()
        st.rerun()


def show_notice() -> None:
    """The outcome of the last dialog action (kept across its rerun)."""
    notice = st.session_state.pop("_runs_notice", None)
    if notice:
        level, text = notice
        (st.warning if level == "warning" else st.success)(md(text))


def bulk_actions(selected: Sequence[RunRecord]) -> None:
    """Compare, tag and delete (to the trash, confirmed) the selected runs."""
    n = len(selected)
    st.caption(f"{n} selected · tick rows in the table to act on several runs" if n else
               "Tick rows in the table to compare, tag or delete several runs at once.")
    c1, c2, c3, c4 = st.columns([1, 2, 1, 1], vertical_alignment="bottom")
    if c1.button(f"Compare ({n})", key="bulk-compare", disabled=n < 1, icon=":material/compare_arrows:"):
        open_compare([r.run_id for r in selected])
    tag = c2.text_input("Tag to add", key="bulk-tag-text", placeholder="e.g. baseline")
    if c3.button("Add tag", key="bulk-tag", disabled=n < 1, icon=":material/sell:"):
        if not tag.strip():
            st.warning("Type a tag to add first.")
        else:
            registry = get_registry()
            for record in selected:
                registry.set_tags(record.run_id, [*record.tags, tag.strip()])
            st.session_state["_runs_notice"] = ("success", f"Tag {tag.strip()!r} added to {n} run{'' if n == 1 else 's'}.")
            st.rerun()
    active = [r for r in selected if r.is_active]
    actor = current_actor()
    others = [r for r in selected if refusal(r, actor, "trash")]
    if c4.button(f"Delete ({n})", key="bulk-delete", disabled=n < 1 or bool(others), icon=":material/delete:",
                 help=(f"{len(others)} of the selected runs belong to someone else ({md(', '.join(sorted({str(r.owner) for r in others})))}): "
                       "only their owner or an admin can delete them." if others else
                       "Moves the runs to the trash (after a confirmation); queued and running runs must be cancelled first.")):
        if active:
            st.error(f"{len(active)} of the selected runs are queued or running "
                     f"({md(', '.join(r.name for r in active[:5]))}): cancel them first, then delete.")
        else:
            confirm_trash([r.run_id for r in selected], [r.name for r in selected], origin="bulk")
    else:
        confirmation_dialogs("bulk")


def trash_section() -> None:
    """The runs in the trash, with Restore (selected rows) and Empty trash (confirmed)."""
    registry = get_registry()
    items = trash.trashed_runs(registry)
    # keyed: it stays open when elements above it come and go (a notice, the runs table)
    with st.expander("Trash", icon=":material/delete:", expanded=False, key="runs-trash"):
        st.caption(f"{len(items)} run{'' if len(items) == 1 else 's'} in the trash · restore them, or "
                   "empty the trash to delete them for good.")
        if not items:
            st.caption("The trash is empty. Deleted runs land here and can be restored until it is emptied.")
            return
        frame = tables.hub_frame([t.record for t in items], workspace())[
            ["name", "status", "action", "dataset", "template", "steps", "created", "run"]]
        frame.insert(1, "trashed", [_dt.datetime.fromtimestamp(t.trashed_at) for t in items])
        event = st.dataframe(frame, hide_index=True, key=table_key([t.record for t in items], "trash-table"), placeholder="",
                             on_select="rerun",
                             selection_mode="multi-row",
                             column_config={"trashed": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss"),
                                            "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss")})
        rows = list(getattr(getattr(event, "selection", None), "rows", None) or [])
        chosen = [items[i].record.run_id for i in rows if 0 <= i < len(items)]
        c1, c2 = st.columns(2)
        actor = current_actor()
        others = sorted({str(items[i].record.owner) for i in rows if 0 <= i < len(items)
                         and refusal(items[i].record, actor, "restore")})
        if c1.button(f"Restore ({len(chosen)})", key="trash-restore", disabled=not chosen or bool(others),
                     icon=":material/restore_from_trash:",
                     help=f"Some of the selected runs belong to {', '.join(others)}: only their owner or an "
                          "admin can restore them." if others else None):
            outcome = run_actions.restore_runs(registry, chosen, current_actor())
            st.session_state["_runs_notice"] = ("warning" if outcome.refused else "success",
                                                "Restored: " + outcome.message())
            st.rerun()
        if c2.button("Empty trash", key="trash-empty", icon=":material/delete_forever:"):
            ask_confirmation("empty", "trash", [t.record.run_id for t in items])
        else:
            confirmation_dialogs("trash")


def audit_section() -> None:
    """The audit log (issue 26.4): who stopped, cancelled, resumed, deleted or restored which
    run, when, and whether it was done or refused (newest first, the last 200)."""
    entries = audit.audit_entries(get_registry())
    with st.expander("Audit log", icon=":material/policy:", expanded=False, key="runs-audit"):
        if not entries:
            st.caption("Nothing yet: stops, cancels, resumes, deletes and restores are listed here with "
                       "who did them and when.")
            return
        st.dataframe(pd.DataFrame([{"when": _dt.datetime.fromtimestamp(e.at), "who": e.actor,
                                    "action": e.action, "run": e.run_id, "outcome": e.outcome,
                                    "detail": e.detail} for e in entries]),
                     hide_index=True, key="audit-table",
                     column_config={"when": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss")})


def trashed_notice(run_id: str | None) -> bool:
    """On the run page: when the URL names a run in the trash, say so and offer Restore. Returns
    whether it did."""
    if not run_id:
        return False
    registry = get_registry()
    try:
        when = trash.trashed_times(registry).get(run_id)
        if when is None:
            return False
        record = registry.get(run_id)
    except (RunNotFoundError, ValueError):
        return False
    st.warning(f"Run {md(record.name)} ({run_id}) is in the trash.", icon=":material/delete:")
    why = refusal(record, current_actor(), "restore")
    if st.button("Restore it", key=f"restore-{run_id}", icon=":material/restore_from_trash:",
                 disabled=bool(why), help=why):
        outcome = run_actions.restore_runs(registry, [run_id], current_actor())
        if outcome.refused:
            show_error(outcome.message())
        else:
            st.rerun()
    page_link("runs", "Other runs: the Runs page →", icon=":material/list:")
    return True


def progress_line(record: RunRecord) -> None:
    """The run's progress with its ETA (running) or its place in the queue (queued), refreshed
    every few seconds while it is active."""
    every = _PROGRESS_INTERVAL_S if record.is_active else None

    @st.fragment(run_every=every)
    def _line() -> None:
        registry = get_registry()
        try:
            current = registry.get(record.run_id)
        except RunNotFoundError:
            return
        positions = tables.queue_positions(registry.list_runs("queued", trashed=None)) \
            if current.status == "queued" else {}
        progress = tables.run_progress(current, workspace(), positions)
        text = progress.text()
        if text and current.is_active:
            st.caption(text, help="ETA: time left at the step rate of the last minute. Queue: 1 = next to start.")

    _line()


def run_header(record: RunRecord) -> None:
    """The run page's header: what the run is, its progress (ETA / queue place), and the rename
    and note editors."""
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_at))
    st.caption(f"**{md(record.name)}** · {record.action} · template {md(record.template_name)} · "
               f"dataset {md(tables.dataset_name(record))} · created {created}"
               + (f" by {md(record.owner)}" if record.owner else "")
               + f" · tags: {md(', '.join(record.tags)) or '—'}")
    imported = describe_import(record, get_registry().run_dir(record.run_id))
    if imported:
        st.caption(md(imported), help="A TensorFlow Estimator's checkpoint, copied into this run's model "
                   "folder (estimator-workbench import-tf); evaluate, predict and continue it like any run.")
    progress_line(record)
    with st.expander("Name and notes", icon=":material/edit_note:", expanded=bool(record.note),
                     key=f"name-note-open-{record.run_id}"):
        _rename_and_note(record)


def _rename_and_note(record: RunRecord) -> None:
    registry = get_registry()
    with st.form(f"name-note-{record.run_id}", border=False):
        name = st.text_input("Name", value=record.name, key=f"rename-{record.run_id}")
        note = st.text_area("Notes", value=record.note, key=f"note-{record.run_id}",
                            placeholder="What this run tried, what you saw…", height=100)
        if st.form_submit_button("Save name and notes", icon=":material/save:"):
            try:
                if name.strip() != record.name:
                    registry.rename(record.run_id, name)
                if note != record.note:
                    registry.set_note(record.run_id, note)
            except (ValueError, TypeError, RunNotFoundError) as exc:
                show_error(exc)
            else:
                st.toast("Saved.")
                st.rerun()
