"""A run cancelled while parked ends its parked step `cancelled` (it was `suspended` for ever after): applied by
the projector from `run_cancelled`, idempotent, the same applied one event at a time as in one batch, on SQLite
and PostgreSQL. A cancel of a run that is not parked changes no step."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from engine.clock import ManualClock
from engine.events import EventBase, EventStamper, ExternalStamper, encode_event
from engine.runtime.projection import apply_batch
from engine.store.models import Step
from tests.engine.test_projection import _queued, _snapshot, sql  # noqa: F401  (sql: fixture)


def _messages(events: list[EventBase]) -> list[tuple[str, bytes]]:
    return [(f"{i}-0", encode_event(e)) for i, e in enumerate(events)]


def _parked_then_cancelled(run_id: str) -> list[EventBase]:
    clock = ManualClock(1_800_000_000.0)
    s = EventStamper(run_id, clock)
    events: list[EventBase] = [
        s.run_started("proj", 1, "start", {}), s.step_started("start", "start", "trigger.manual"),
        s.step_completed("start", "start", ["out"], {}, 0.1), s.step_started("a", "a", "approval"),
        s.approval_requested("a", f"ap-{run_id}", 1_800_086_400.0), s.run_parked("a", "approval", None)]
    clock.advance(60)
    return [*events, ExternalStamper(run_id, clock, len(events)).run_cancelled("no longer needed")]


def _steps(sql: sa.Engine, run_id: str) -> dict[str, tuple[str, bool]]:  # noqa: F811
    with sql.connect() as conn:
        rows = conn.execute(sa.select(Step.step, Step.status, Step.finished_at).where(Step.run_id == run_id))
        return {row.step: (row.status, row.finished_at is not None) for row in rows}


def test_a_parked_step_ends_cancelled_with_its_run(sql: sa.Engine) -> None:  # noqa: F811
    _queued(sql, "r1")
    events = _parked_then_cancelled("r1")
    result = apply_batch(sql, _messages(events))
    assert result.applied == len(events) and result.dead == 0
    assert _steps(sql, "r1") == {"start": ("succeeded", True), "a": ("cancelled", True)}
    cancelled = result.changes[-1]
    assert (cancelled.event, cancelled.status, cancelled.step, cancelled.step_status) == (
        "run_cancelled", "cancelled", "a", "cancelled")
    after = _snapshot(sql)
    assert apply_batch(sql, _messages(events)).duplicates == len(events)
    assert _snapshot(sql) == after


def test_one_event_at_a_time_equals_one_batch(sql: sa.Engine) -> None:  # noqa: F811
    _queued(sql, "r1")
    _queued(sql, "r2")
    for event in _parked_then_cancelled("r1"):
        apply_batch(sql, _messages([event]))
    apply_batch(sql, _messages(_parked_then_cancelled("r2")))
    assert _steps(sql, "r1") == _steps(sql, "r2") == {"start": ("succeeded", True), "a": ("cancelled", True)}


def test_a_cancel_between_steps_changes_no_step(sql: sa.Engine) -> None:  # noqa: F811
    _queued(sql, "r1")
    clock = ManualClock(1_800_000_000.0)
    s = EventStamper("r1", clock)
    events: list[Any] = [s.run_started("proj", 1, "start", {}), s.step_started("start", "start", "trigger.manual"),
                         s.step_completed("start", "start", ["out"], {}, 0.1), s.run_cancelled("stop", node="a")]
    result = apply_batch(sql, _messages(events))
    assert result.dead == 0
    assert _steps(sql, "r1") == {"start": ("succeeded", True)}
    assert (result.changes[-1].step, result.changes[-1].step_status) == (None, None)
