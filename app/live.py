"""What live mode draws, folded from the projector's live changes (no Qt here).

Each run's latest known place (node, status, what it waits on) is kept; the canvas
asks for per-node counts of one flow and the path of one selected run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from app.panels.rows import RunRow
from app.readable import short_run_id
from app.waiting import Waiting, run_waiting, waiting_of
from engine.approvals.claims import TIMEOUT_ACTOR
from engine.durations import format_duration
from engine.read_models import Run, RunSummary, Step
from engine.runtime.live_change import LiveChange

ACTIVE_STATUSES = frozenset({"queued", "running", "waiting"})
REASON_TEXT = {
    "queue_delay": "delay",
    "approval": "approval",
    "pool_capacity": "provider pool",
    "provider_response": "provider answer",
    "overspend_approval": "overspend approval",
    "retry_backoff": "retry backoff",
    "child_run": "child run",
    "callback": "waiting for callback",
}


@dataclass
class RunPlace:
    run_id: str
    flow_id: str
    version: int
    status: str
    seq: int = -1
    node: str | None = None
    waiting_on: Waiting | None = None


@dataclass
class LiveState:
    """Every run's latest place; changes older than what is known (by seq) are ignored."""

    runs: dict[str, RunPlace] = field(default_factory=dict)

    def apply_change(self, change: LiveChange) -> bool:
        """Fold one live-channel change in; False when it was stale."""
        place = self.runs.get(change.run_id)
        if place is not None and change.seq <= place.seq:
            return False
        if place is None:
            place = RunPlace(change.run_id, change.flow_id, change.version, "queued")
            self.runs[change.run_id] = place
        place.seq = change.seq
        place.status = change.status
        place.waiting_on = waiting_of(change.waiting_on) if place.status == "waiting" else None
        node = change.node or (place.waiting_on.node if place.waiting_on else None)
        if node:
            place.node = node
        return True

    def seed_from_run(self, run: RunSummary) -> None:
        """Start from a stored run (runs that were running or parked before live mode started)."""
        if run.id in self.runs:
            return
        waiting = run_waiting(run)
        self.runs[run.id] = RunPlace(run.id, run.flow_id, run.version, run.status, -1,
                                     run.current_node or (waiting.node if waiting else None), waiting)

    def node_counts(self, flow_id: str, now: float, version: int | None = None) -> dict[str, tuple[int, int, str]]:
        """Per node of `flow_id` (of one version, or all): (running there, waiting there, what they wait on)."""
        counts: dict[str, list[Any]] = {}
        for place in self.runs.values():
            if place.flow_id != flow_id or place.status not in ACTIVE_STATUSES or not place.node:
                continue
            if version is not None and place.version != version:
                continue
            entry = counts.setdefault(place.node, [0, 0, ""])
            if place.status == "waiting":
                entry[1] += 1
                entry[2] = waiting_text(place.waiting_on, now)
            else:
                entry[0] += 1
        return {node: (running, waiting, text) for node, (running, waiting, text) in counts.items()}


def waiting_text(waiting_on: Waiting | None, now: float) -> str:
    """`approval · 23h 59m left`: the reason, with time left when the wait has a due time; a retry's
    backoff names the attempt it waits for (`retry backoff, attempt 3 · 10m left`), a `flow.call` the run it
    waits for (`waiting on child run 1a2b3c4d`)."""
    if waiting_on is None:
        return ""
    reason = waiting_on.reason if waiting_on.reason is not None else "waiting"
    text = REASON_TEXT.get(reason, reason)
    child = waiting_on.child_run_id
    if reason == "child_run" and child:
        text = f"waiting on child run {short_run_id(child)}"
    if waiting_on.attempt is not None:
        text += f", attempt {waiting_on.attempt}"
    due_at = waiting_on.due_at
    if due_at is not None:
        left = due_at - now
        # Past an hour, seconds are noise (and make the label under the node too long to read).
        shown = int(left // 60) * 60 if left >= 3600 else round(left)
        text += f" · {format_duration(shown)} left" if left > 0 else " · due"
    return text


def _moment(value: str | None) -> datetime | None:
    if not value:
        return None
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_row(run: RunSummary) -> RunRow:
    """A Runs panel row from the engine's run record (a `RunSummary` of the facade, or a `Run`)."""
    waiting = run_waiting(run)
    return RunRow(
        run_id=run.id, flow_id=run.flow_id, version=run.version, status=run.status,
        started_at=_moment(run.started_at or run.created_at), finished_at=_moment(run.finished_at),
        cost_usd=run.cost_micros / 1_000_000 if run.cost_micros is not None else None,
        current_node=run.current_node or (waiting.node if waiting else None),
        waiting_reason=_reason_text(waiting), waiting_until=_until(waiting),
        tokens_in=run.tokens_in, tokens_out=run.tokens_out,
    )


def _reason_text(waiting: Waiting | None) -> str | None:
    reason = waiting.reason if waiting else None
    return REASON_TEXT.get(reason, reason) if reason is not None else None


def _until(waiting: Waiting | None) -> datetime | None:
    return datetime.fromtimestamp(waiting.due_at, UTC) if waiting and waiting.due_at is not None else None


def row_of_place(place: RunPlace, seen_at: datetime) -> RunRow:
    """A row for a run first heard of on the live channel; `seen_at` stands in for its start until the
    next list of runs brings the stored one."""
    return row_at_place(RunRow(place.run_id, place.flow_id, place.version, place.status, seen_at, None, None),
                        place)


def row_at_place(row: RunRow, place: RunPlace) -> RunRow:
    """`row` moved to where the live channel last saw its run (status, node, what it waits on).

    Cost and finish time are not in live changes: the next list of runs brings them."""
    waiting = place.waiting_on if place.status == "waiting" else None
    return replace(row, status=place.status, current_node=place.node or row.current_node,
                   waiting_reason=_reason_text(waiting), waiting_until=_until(waiting))


def run_path(run: Run) -> list[str]:
    """The nodes a run has passed, in step order (from `get_run`, with its steps); skipped branches are not
    part of it."""
    path: list[str] = []
    for step in run.steps:
        if step.status in ("skipped", "pending"):
            continue
        if step.node and (not path or path[-1] != step.node):
            path.append(step.node)
    return path


def step_ports(step: Step) -> list[str]:
    """The ports a step left through (stored JSON: a list of port names)."""
    return [str(port) for port in step.ports] if isinstance(step.ports, list) else []


def step_status_text(step: Step) -> str:
    """A step's status as the user reads it: an approval that ran out of time "timed out", not "succeeded"; a
    rerun's step taken from the run it reruns "reused" (or "reused (failed)" for a failure gone past)."""
    text = "timed out" if timed_out(step) else step.status
    if step.reused_from:
        return "reused" if text == "succeeded" else f"reused ({text})"
    return text


def timed_out(step: Step) -> bool:
    """An approval nobody decided before its timeout (the engine rejects it as the `timeout` actor), or a
    callback that left through `timed_out`."""
    if "timed_out" in step_ports(step):
        return True
    if step.type != "approval":
        return False
    output = step.output
    records = [output, *(output.values() if isinstance(output, dict) else ())]
    return any(isinstance(r, dict) and r.get("decided_by") == TIMEOUT_ACTOR for r in records)


def run_marks(run: Run) -> dict[str, tuple[str, str]]:
    """Nodes to flag on a run's path: ("failed", its error) or ("timed_out", "timed out")."""
    marks: dict[str, tuple[str, str]] = {}
    for step in run.steps:
        if not step.node:
            continue
        if step.status == "failed":
            error = str(step.error or "")
            kind = step.error_type
            marks[step.node] = ("failed", f"{kind}: {error}" if kind and error else error or str(kind or ""))
        elif timed_out(step):
            marks[step.node] = ("timed_out", "timed out")
    return marks


ERROR_TEXT_LIMIT = 140
_NODE_PREFIX = re.compile(r'^node "[^"]*"(?: \([^)]*\))?: ')


def short_error(error: object, kind: str | None = None, limit: int = ERROR_TEXT_LIMIT) -> str:
    """An error as one short line: its first line without the engine's `node "x" (type): ` prefix (the
    message names the node already), whitespace folded, cut at `limit` characters."""
    lines = str(error).strip().splitlines() if error else []
    text = _NODE_PREFIX.sub("", " ".join(lines[0].split())) if lines else ""
    if not text:
        text = kind or "no error was recorded"
    if len(text) > limit:
        text = text[:limit - 1].rstrip() + "…"
    return text


def run_end_text(run: Run) -> str:
    """What the status bar says when a run started from the window ends: `Run 5c6d7e8f of refund-desk failed
    at http_request: <short error>`, `… succeeded`, `… was cancelled at wait`."""
    head = f"Run {short_run_id(run.id)} of {run.flow_id}"
    if run.status == "succeeded":
        return f"{head} succeeded."
    failed = [step for step in run.steps if step.status == "failed" and not step.reused_from]
    step = failed[-1] if failed else None
    node = step.node if step is not None else run.current_node
    where = f" at {node}" if node else ""
    if run.status == "failed":
        error, kind = (step.error, step.error_type) if step is not None and step.error else (run.error, run.error_type)
        return f"{head} failed{where}: {short_error(error, kind).rstrip('.')} — double-click it in Runs for details"
    if run.status == "cancelled":
        return f"{head} was cancelled{where}."
    reason = f": {short_error(run.error, run.error_type).rstrip('.')}" if run.error or run.error_type else ""
    return f"{head} was {run.status}{where}{reason}."
