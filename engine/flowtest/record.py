"""Build a flow test from a finished run as the store recorded it: its steps, its path, its end."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa

from engine.flowtest.callbacks import CallbackUrls, run_tokens
from engine.flowtest.model import (
    PURE_TYPES,
    WAITING_TYPES,
    ExpectedOutcome,
    FlowTest,
    RecordedAnswer,
    RecordedFrom,
    valid_name,
)
from engine.publish import UnknownFlowVersion, get_version
from engine.runtime.queries import changes_after, get_run
from engine.runtime.transitions import TERMINAL
from engine.secret_box import SecretBox

RefusalReason = Literal["unknown_run", "run_not_finished", "run_not_replayable", "bad_name"]
REPLAYABLE = frozenset({"succeeded", "failed"})
"""Ends a replay can reach; a cancel or an interruption came from outside the flow."""
MAX_CHANGES = 1_000_000
MAX_RERUN_CHAIN = 1_000
"""How far back a rerun's `rerun_of` chain is followed for the resume URLs its reused steps hold."""
_BEGINS = frozenset({"step_started", "step_reused"})


class RecordRefused(ValueError):
    """The run cannot be saved as a test; `reason` says why as data."""

    def __init__(self, reason: RefusalReason, message: str) -> None:
        super().__init__(message)
        self.reason: RefusalReason = reason


def _epoch(iso: str | None) -> float | None:
    return datetime.fromisoformat(iso).timestamp() if iso else None


def _answer(step: dict[str, Any]) -> RecordedAnswer:
    waited = None
    started, finished = _epoch(step["started_at"]), _epoch(step["finished_at"])
    if step["type"] in WAITING_TYPES and started is not None and finished is not None:
        waited = round(finished - started, 6)
    failed = step["status"] == "failed"
    return RecordedAnswer(
        step=step["step"],
        node=step["node"],
        type=step["type"],
        status=step["status"],
        attempts=max(int(step["attempts"] or 1), 1),
        ports=None if failed else step["ports"],
        writes={} if failed else dict(step["output"] or {}),
        error=step["error"] if failed else None,
        error_type=step["error_type"] if failed else None,
        waited_seconds=waited,
        given=step["given"] if isinstance(step["given"], dict) else None,
    )


def recorded_path(sql: sa.Engine, run_id: str) -> list[str]:
    """Top-level node ids of the run in the order their steps first started (from its applied sequence); a
    rerun's reused steps are on its path where it took them (a replay executes them)."""
    path: list[str] = []
    for change in changes_after(sql, run_id, 0, limit=MAX_CHANGES):
        step = change.step
        if change.event in _BEGINS and step is not None and "[" not in step and step not in path:
            path.append(step)
    return path


def _callback_urls(sql: sa.Engine, run: dict[str, Any], box: SecretBox | None) -> CallbackUrls:
    """The resume URLs the recording may hold: those of the run's `wait.callback` nodes, and (a rerun's reused
    steps carry them) of the runs it reran, as far back as the chain goes."""
    run_ids: list[str] = []
    nodes: set[str] = set()
    versions: set[tuple[str, int]] = set()
    current: dict[str, Any] | None = run
    while current is not None and current["id"] not in run_ids and len(run_ids) < MAX_RERUN_CHAIN:
        run_ids.append(current["id"])
        version = (current["flow_id"], current["version"])
        if version not in versions:
            versions.add(version)
            try:
                _published, flow = get_version(sql, *version)
            except UnknownFlowVersion:
                pass
            else:
                nodes.update(node.id for node in flow.nodes if node.type == "wait.callback")
        source = current.get("rerun_of")
        current = get_run(sql, source, with_steps=False) if source else None
    return CallbackUrls(run_tokens(box, run_ids, nodes) if nodes else {})


def record_test(sql: sa.Engine, run_id: str, name: str, box: SecretBox | None = None) -> FlowTest:
    """The flow test of finished run `run_id` (RecordRefused: unknown, still going, or a bad name).

    With the deployment's `box` (its data key), the run's `wait.callback` resume URLs are written as the fixed
    URLs replay's `callback_url()` gives (`engine.flowtest.callbacks`); without it they stay as the run had them.
    """
    if not valid_name(name):
        raise RecordRefused(
            "bad_name",
            f"test name {name!r}: use letters, digits, '-' and '_' (at most 64), starting with a letter or digit",
        )
    run = get_run(sql, run_id)
    if run is None:
        raise RecordRefused("unknown_run", f'run "{run_id}" does not exist')  # each surface adds its hint
    if run["status"] not in TERMINAL:
        raise RecordRefused(
            "run_not_finished",
            f'run "{run_id}" is {run["status"]}; a test is recorded from a '
            "finished run: wait for it to end, then save it",
        )
    if run["status"] not in REPLAYABLE:
        raise RecordRefused(
            "run_not_replayable",
            f'run "{run_id}" was {run["status"]} from outside the flow, which a replay cannot repeat; save a run '
            "that succeeded or failed",
        )
    answers = [
        _answer(step)
        for step in run["steps"]
        if step["type"] is not None and step["type"] not in PURE_TYPES and step["status"] in ("succeeded", "failed")
    ]
    expected = ExpectedOutcome(
        status=run["status"],
        error_type=run["error_type"] if run["status"] != "succeeded" else None,
        path=recorded_path(sql, run_id),
        state=dict(run["state"] or {}),
        result=run["result"],
    )
    started = _epoch(run["started_at"]) or _epoch(run["created_at"]) or 0.0
    urls = _callback_urls(sql, run, box)
    return FlowTest(
        name=name,
        flow_id=run["flow_id"],
        recorded_from=RecordedFrom(run_id=run["id"], version=run["version"], started_at=started),
        trigger=run["trigger"] or "",
        inputs=urls.data(dict(run["inputs"] or {})),
        answers=[RecordedAnswer.model_validate(urls.data(answer.model_dump())) for answer in answers],
        expected=ExpectedOutcome.model_validate(urls.data(expected.model_dump())),
    )
