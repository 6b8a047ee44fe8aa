"""Event triggers: a run of each flow whose `trigger.event` matches an event the engine applied.

Event names come from the projector's applied changes (`run_succeeded` -> `run.succeeded`, and so on
for run events); `approval.decided` / `approval.expired` (a timeout) and `budget.exhausted` (a step
refused because its budget could not cover it: empty, or less left than the hold) are told apart by
reading the approval or step row, only when some flow listens to them; `hold.expired` is a hold the
expiry sweep returned.
`flow.published` comes from publishing a version (`flow_published`), in the publishing process. The
run's inputs: `{"event": {...}}` when the flow declares an input named `event` (type object), else none.

Loop guard: a run started by an event trigger never fires its own flow's event triggers (a flow
listening to its own `run.succeeded` runs once more, not forever), and a chain of event-started runs
across flows stops after `MAX_EVENT_CHAIN` hops. Each guarded or refused firing is logged and counted
(`<flow>/<node>:loop_guard`, `:disabled`, `:refused` in `Keyspace.trigger_counters`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

import redis
import sqlalchemy as sa

from engine.approvals.projection import occurrence
from engine.catalog import EVENT_TYPES
from engine.runtime.change_outbox import CLAIM_SECONDS, ChangeOutbox
from engine.runtime.create import RunRefused, StartsRuns
from engine.runtime.handles import EngineHandles
from engine.runtime.inputs import InputError
from engine.runtime.live_change import LiveChange
from engine.runtime.projection import BatchResult
from engine.store.db import reading
from engine.store.models import Approval, Step
from engine.triggers.catalog_index import LatestFlows
from engine.triggers.settings import count, trigger_idempotency_key

log = logging.getLogger("lockgate.event_triggers")
MAX_EVENT_CHAIN = 5
CHAIN_TTL_SECONDS = 7 * 24 * 3600
INDEX_TTL_SECONDS = 2.0
STEPS = cast(sa.Table, Step.__table__)
APPROVALS = cast(sa.Table, Approval.__table__)
BUDGET_REFUSALS = frozenset({"budget_exhausted", "insufficient_budget"})
"""Step error types that fire `budget.exhausted`; its `error_type` detail tells them apart."""


def _may_match(internal: str, index: dict[str, list[EventTarget]]) -> bool:
    if internal == "step_failed":
        return "budget.exhausted" in index
    if internal == "approval_decided":
        return "approval.decided" in index or "approval.expired" in index
    if internal == "hold_released":
        return "hold.expired" in index
    return public_event_type(internal) in index


def public_event_type(internal: str) -> str | None:
    """`run_succeeded` -> `run.succeeded` when it is one of `EVENT_TYPES`, else None."""
    name = internal.replace("_", ".", 1)
    return name if name in EVENT_TYPES else None


@dataclass(frozen=True)
class EventTarget:
    flow_id: str
    node_id: str
    enabled: bool
    wants_event_input: bool


class EventTriggers:
    """Ack filler plus the outbox whose thread starts the runs (kept off the projector's thread)."""

    def __init__(self, handles: EngineHandles, create_run: StartsRuns, claim_seconds: float = CLAIM_SECONDS) -> None:
        self.handles = handles
        self.create_run = create_run
        keys = handles.keys
        self.changes = ChangeOutbox(handles.client, keys.event_trigger_changes, keys.event_trigger_group,
                                    self._fire_all, "event trigger", log, claim_seconds=claim_seconds)
        """Changes that may fire a trigger, kept until their runs were started (`engine.runtime.change_outbox`)."""
        self.started: list[str] = []
        """Run ids this process started from events (for tests and the log)."""
        self._index: dict[str, list[EventTarget]] = {}
        self._index_at = -INDEX_TTL_SECONDS
        self._lock = threading.Lock()
        self.latest = LatestFlows(handles.sql)

    def invalidate(self) -> None:
        with self._lock:
            self._index_at = -INDEX_TTL_SECONDS

    def _targets(self) -> dict[str, list[EventTarget]]:
        now = time.monotonic()
        with self._lock:
            if now - self._index_at < INDEX_TTL_SECONDS:
                return self._index
        index: dict[str, list[EventTarget]] = {}
        for flow in self.latest.with_trigger("trigger.event"):
            for node in flow.nodes:
                if node.type == "trigger.event":
                    index.setdefault(str(node.config.get("event_type")), []).append(
                        EventTarget(flow.id, node.id, flow.enabled, "event" in flow.inputs))
        with self._lock:
            self._index, self._index_at = index, now
        return index

    def fill_ack(self, result: BatchResult, pipe: redis.client.Pipeline) -> None:
        """Write the batch's changes that may fire a trigger (its replayed ones too: their starts are idempotent),
        each approval request, escalation and decision once."""
        index = self._targets()
        if not index:
            return
        for change in (*result.replayed, *result.changes):
            if _may_match(change.event, index):
                once = occurrence(change)
                self.changes.write(pipe, change, once=None if once is None else
                                   self.handles.keys.event_trigger_written(change.run_id, once))

    def _fire_all(self, change: LiveChange, _stop: threading.Event) -> bool:
        for name, details in self.derive(change):
            self.fire(name, change, details)
        return True

    def derive(self, change: LiveChange) -> list[tuple[str, dict[str, Any]]]:
        """The public events `change` stands for, with their details (a step row or approval row read when
        the applied event alone cannot tell: a budget refusal, a timed-out approval)."""
        if change.event == "step_failed" and change.step is not None:
            with reading(self.handles.sql) as conn:
                row = conn.execute(sa.select(STEPS.c.error_type, STEPS.c.error)
                                   .where(STEPS.c.run_id == change.run_id, STEPS.c.step == change.step)).first()
            if row is not None and row.error_type in BUDGET_REFUSALS:
                return [("budget.exhausted", {"error": row.error, "error_type": row.error_type})]
            return []
        if change.event == "approval_decided":
            with reading(self.handles.sql) as conn:
                approval = conn.execute(
                    sa.select(APPROVALS.c.id, APPROVALS.c.status, APPROVALS.c.decided_by)
                    .where(APPROVALS.c.run_id == change.run_id, APPROVALS.c.node_id == change.node,
                           APPROVALS.c.status != "pending")
                    .order_by(APPROVALS.c.decided_at.desc()).limit(1)).first()
            if approval is None:
                return []
            details = {"approval_id": approval.id, "decision": approval.status, "decided_by": approval.decided_by}
            return [("approval.expired" if approval.status == "expired" else "approval.decided", details)]
        if change.event == "hold_released":
            return [("hold.expired", {})] if change.reason == "expired" else []
        name = public_event_type(change.event)
        return [(name, {})] if name is not None else []

    def _chain_depth(self, run_id: str) -> int:
        """How many event-started runs led to `run_id` (0: it was not started by an event)."""
        raw = self.handles.client.get(self.handles.keys.run_event_chain(run_id))
        if not raw:
            return 0
        return int((raw.decode() if isinstance(raw, bytes) else str(raw)).split(" ", 1)[0])

    def fire(self, name: str, change: LiveChange, details: dict[str, Any] | None = None) -> list[str]:
        """Start the runs event `name` (from `change`) triggers; returns their ids."""
        depth = self._chain_depth(change.run_id)
        payload = {"type": name, **change.to_data(), **(details or {})}
        return self._start(name, payload, (change.run_id, str(change.seq)), f"run {change.run_id}", change.flow_id,
                           depth)

    def flow_published(self, flow_id: str, version: int) -> list[str]:
        """Start the runs `flow.published` triggers for version `version` of `flow_id` (publishing the same
        content again returns the same version, and starts nothing more)."""
        self.invalidate()
        if "flow.published" not in self._targets():
            return []
        payload = {"type": "flow.published", "flow_id": flow_id, "version": version}
        return self._start("flow.published", payload, ("flow", f"{flow_id}@{version}"),
                           f'flow "{flow_id}" version {version}', flow_id, 0)

    def _start(self, name: str, payload: dict[str, Any], source: tuple[str, str], origin: str, source_flow: str,
               depth: int) -> list[str]:
        client, keys = self.handles.client, self.handles.keys
        started: list[str] = []
        for target in self._targets().get(name, []):
            label = f"{target.flow_id}/{target.node_id}"
            if depth and (target.flow_id == source_flow or depth >= MAX_EVENT_CHAIN):
                count(client, keys, f"{label}:loop_guard")
                log.info('event trigger "%s" not fired by %s of %s: that run was itself started by an event '
                         "(depth %d); the loop guard stops here", label, name, origin, depth)
                continue
            if not target.enabled:
                count(client, keys, f"{label}:disabled")
                log.warning('event trigger "%s" matched %s of %s but flow "%s" is disabled: no run started',
                            label, name, origin, target.flow_id)
                continue
            key = trigger_idempotency_key("event", *source, label)
            try:
                created = self.create_run(target.flow_id, {"event": payload} if target.wants_event_input else {},
                                          trigger=target.node_id, idempotency_key=key)
            except (RunRefused, InputError) as exc:
                count(client, keys, f"{label}:refused")
                log.warning('event trigger "%s": run refused: %s', label, exc)
                continue
            # Set for a duplicate too: a start retried after an outage may have created the run and lost this.
            client.set(keys.run_event_chain(created.run_id), f"{depth + 1} {source_flow}", ex=CHAIN_TTL_SECONDS)
            if not created.duplicate:
                started.append(created.run_id)
        self.started.extend(started)
        return started
