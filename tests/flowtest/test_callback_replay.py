"""A `wait.callback` run on the real engine and its manual clock: the callback's body after 3 h is recorded and
replayed with its wait; a flow whose timeout is now shorter than that wait times out instead."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.clock import ManualClock
from engine.flow import flow_from_data
from engine.flowtest.record import record_test
from engine.flowtest.suite import run_test
from engine.host import EngineServices
from engine.parking.callback_links import callback_token
from engine.parking.callback_resume import resume_callback
from tests.engine.conftest import make_flow, start_engine

START = 1_800_000_000.0


def _callback_flow() -> dict[str, Any]:
    wait = {"id": "wait", "type": "wait.callback", "config": {"timeout": "6h", "output_key": "reply"}}
    done = {"id": "done", "type": "terminal", "config": {"output": "{{ state.reply.n }}"}}
    late = {"id": "late", "type": "terminal", "config": {"output": "late"}}
    return make_flow(
        "callback",
        [{"id": "start", "type": "trigger.manual"}, wait, done, late],
        [("start", "wait"), ("wait", "received", "done"), ("wait", "timed_out", "late")],
    )


@pytest.fixture
def clocked(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> Iterator[EngineServices]:
    services, _sleeps = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=ManualClock(START))
    try:
        yield services
    finally:
        services.stop()


def test_a_callback_after_three_hours_replays_and_a_shorter_timeout_times_it_out(clocked: EngineServices) -> None:
    document = _callback_flow()
    clocked.publish_flow(flow_from_data(document))
    run_id = clocked.create_run("callback", {}).run_id
    clocked.wait_for_run(run_id, statuses=frozenset({"waiting"}))
    assert isinstance(clocked.clock, ManualClock) and clocked.handles is not None
    clocked.clock.advance(3 * 3600)
    outcome = resume_callback(clocked.handles, callback_token(clocked.box, run_id, "wait"), orjson.dumps({"n": 7}))
    assert outcome.status == 200, outcome
    deadline = time.monotonic() + 15
    while (run := clocked.get_run(run_id)) is None or run["status"] != "succeeded":
        assert time.monotonic() < deadline, run
        time.sleep(0.02)
    assert clocked.sql is not None
    test = record_test(clocked.sql, run_id, "reply")
    [answer] = test.answers
    assert (answer.type, answer.ports, answer.writes, answer.waited_seconds) == (
        "wait.callback",
        ["received"],
        {"reply": {"n": 7}},
        3 * 3600,
    )
    assert test.expected.result == 7

    report = run_test(test, flow_from_data(document), "reply")
    assert report.verdict == "passed", report.differences
    assert report.actual is not None and report.actual.simulated_seconds == 3 * 3600

    shorter = copy.deepcopy(document)
    shorter["nodes"][1]["config"]["timeout"] = "2h"
    report = run_test(test, flow_from_data(shorter), "reply")
    assert report.verdict == "failed"
    assert report.actual is not None
    assert (report.actual.path, report.actual.result, report.actual.simulated_seconds) == (
        ["start", "wait", "late"],
        "late",
        2 * 3600,
    )
