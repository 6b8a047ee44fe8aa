"""`suspended_step_timeout` counts from the step's first park: kept across the same node's re-parks (polls,
restarts: the clock lives in the checkpoint), started again by another node or a wait of its own timer."""

from __future__ import annotations

from engine.flow import FlowSettings
from engine.parking.limits import WaitLimits, park_record, step_suspended_since
from tests.parking.conftest import HOUR, START

LIMITS = WaitLimits.of(FlowSettings())


def _park(previous: dict | None, node: str, reason: str, due_at: float | None, now: float) -> dict:
    record = park_record(previous, reason, due_at, now, LIMITS, node=node)
    return {"parked_node": node, **record}


def test_polls_of_one_step_keep_the_clock_of_its_first_park() -> None:
    first = _park(None, "ask", "provider_response", START + 30, START)
    assert (first["step_parked_at"], first["wake_kind"]) == (START, "due")
    polled = first
    for hours in (6, 12, 23.999):
        polled = _park(polled, "ask", "provider_response", START + hours * HOUR + 30, START + hours * HOUR)
        assert polled["step_parked_at"] == START
    assert (polled["wake_at"], polled["wake_kind"]) == (START + 24 * HOUR, "suspended_step_timeout")
    # A pool wait of the same step after its polls still counts from the first park.
    assert _park(polled, "ask", "pool_capacity", START + 24 * HOUR + 1, START + 23.9995 * HOUR)["wake_kind"] == \
        "suspended_step_timeout"


def test_another_node_or_an_own_timer_wait_starts_a_new_clock() -> None:
    asked = _park(None, "ask", "provider_response", START + 30, START)
    later = START + 20 * HOUR
    other = _park(asked, "summarise", "provider_response", later + 30, later)
    assert other["step_parked_at"] == later and other["wake_kind"] == "due"
    backoff = _park(asked, "ask", "retry_backoff", later + 600, later)
    assert backoff["wake_kind"] == "due" and backoff["wake_at"] == later + 600  # its own timer, no 24h
    retried = _park(backoff, "ask", "provider_response", later + 630, later + 600)
    assert retried["step_parked_at"] == later + 600  # the next attempt is a new call
    assert step_suspended_since(None, "ask", "provider_response", START) == START


def test_a_checkpoint_from_before_step_parked_at_counts_from_its_park() -> None:
    old = {"parked_node": "ask", "reason": "provider_response", "parked_at": START, "first_parked_at": START}
    assert step_suspended_since(old, "ask", "provider_response", START + HOUR) == START
