"""A retry's backoff as the executor sees it: a park carrying the next attempt, and the resume that runs it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from engine.clock import ManualClock
from engine.events import EventBase, EventStamper
from engine.flow import RetryPolicy, flow_from_data
from engine.retry_plan import retry_delays, total_backoff
from engine.runtime.context import RunContext
from engine.runtime.executor import RunExecutor
from engine.runtime.plan import FlowPlan
from tests.engine.conftest import make_flow

START = 1_800_000_000.0
REFUSED = "http://127.0.0.1:9/nothing"


class Capture:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: EventBase) -> None:
        self.events.append(event)

    def flush(self) -> None:
        pass


def _executor(plan: FlowPlan, clock: ManualClock, capture: Capture, last_seq: int = 0) -> RunExecutor:
    ctx = RunContext("r1", plan.flow.id, 1, "start", {}, set())
    return RunExecutor(plan, ctx, EventStamper("r1", clock, last_seq=last_seq), capture, clock,
                       sleep=lambda seconds: pytest.fail(f"a top-level retry slept {seconds}s in the worker"))


def _plan(retry: dict[str, Any]) -> FlowPlan:
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": REFUSED, "timeout": "2s"},
            "retry": retry}
    return FlowPlan(flow_from_data(make_flow("r", [{"id": "start", "type": "trigger.manual"}, call,
                                                   {"id": "done", "type": "terminal"}],
                                             [("start", "call"), ("call", "done")])))


def test_a_failed_attempt_parks_with_the_next_attempt_and_its_resume_runs_it() -> None:
    plan = _plan({"max_attempts": 3, "base_delay": "10m", "max_interval": "1h"})
    clock = ManualClock(START)
    first = Capture()
    parking = _executor(plan, clock, first)
    outcome = parking.start({})
    assert outcome.status == "parked" and outcome.parked_node == "call"
    assert outcome.park is not None and outcome.park.reason == "retry_backoff"
    assert outcome.park.due_at == START + 600 and outcome.park.detail == {"attempt": 2}
    parked = first.events[-1]
    assert parked.type == "run_parked"
    assert parked.waiting_on.record() == {"node": "call", "reason": "retry_backoff", "due_at": START + 600,
                                          "attempt": 2}
    failed = first.events[-2]
    assert (failed.type, failed.step_attempt, failed.will_retry, failed.retry_in) == ("step_failed", 1, True, 600)
    sealed = orjson.loads(orjson.dumps(parking.checkpoint("call")))
    assert sealed["retry_attempt"] == 2

    clock.advance(600)
    second = Capture()
    resumed = _executor(plan, clock, second, last_seq=sealed["seq"])
    resumed.restore(sealed)
    outcome = resumed.resume("call")
    assert outcome.status == "parked" and outcome.park is not None
    assert outcome.park.due_at == START + 600 + 1200 and outcome.park.detail == {"attempt": 3}
    started = [e for e in second.events if e.type == "step_started"]
    assert [e.step_attempt for e in started] == [2]
    assert second.events[0].type == "run_resumed"

    third = Capture()
    last = _executor(plan, clock, third, last_seq=second.events[-1].seq)
    last.restore(orjson.loads(orjson.dumps(resumed.checkpoint("call"))))
    outcome = last.resume("call")
    assert outcome.status == "failed"  # attempt 3 of 3 failed: no wait after the last attempt
    assert [e.step_attempt for e in third.events if e.type == "step_started"] == [3]
    assert [e.type for e in third.events][-2:] == ["step_failed", "run_failed"]


def test_a_reclaimed_run_continues_at_the_attempt_after_the_failed_one() -> None:
    plan = _plan({"max_attempts": 3, "base_delay": 0})
    clock = ManualClock(START)
    executor = _executor(plan, clock, Capture())
    snapshots: list[dict[str, Any]] = []
    executor.emitter.flush = lambda: snapshots.append(executor.progress())  # type: ignore[method-assign]
    assert executor.start({}).status == "failed"
    # http.request flushes before each attempt, and a failed attempt flushes before its retry.
    assert [snapshot["in_flight_attempt"] for snapshot in snapshots] == [1, 2, 2, 3, 3]
    after_first = snapshots[1]
    assert after_first["in_flight"] == "call"
    again = Capture()
    recovered = _executor(plan, clock, again, last_seq=after_first["seq"])
    assert recovered.recover(after_first, lambda node: True).status == "failed"
    assert [e.step_attempt for e in again.events if e.type == "step_started"] == [2, 3]


def test_waits_grow_until_max_interval() -> None:
    exponential = RetryPolicy(max_attempts=6, backoff="exponential", base_delay="1m", max_interval="5m")
    assert retry_delays(exponential) == [60, 120, 240, 300, 300]
    assert total_backoff(exponential) == 1020
    linear = RetryPolicy(max_attempts=4, backoff="linear", base_delay="2m", max_interval="5m")
    assert retry_delays(linear) == [120, 240, 300]
    assert retry_delays(RetryPolicy(max_attempts=100, base_delay="1s"))[-1] == 300  # the 5m default cap
    assert retry_delays(RetryPolicy(max_attempts=1)) == []
