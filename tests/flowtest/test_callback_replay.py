"""A `wait.callback` run on the real engine and its manual clock: the callback's body after 3 h is recorded and
replayed with its wait; a flow whose timeout is now shorter than that wait times out instead. A flow that hands
its `callback_url()` out records the run's URLs as the fixed URL replay renders, and replays."""

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
from engine.flowtest.callbacks import placeholder_url
from engine.flowtest.model import dump_test
from engine.flowtest.record import record_test
from engine.flowtest.suite import run_test
from engine.host import EngineServices
from engine.parking.callback_links import callback_token
from engine.parking.callback_resume import resume_callback
from tests.engine.conftest import Site, make_flow, start_engine

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


def _telling_flow(site_url: str) -> dict[str, Any]:
    """A flow that hands its callback URL out before waiting: in state (whole, percent-encoded, its last part),
    to an outside system (in the query string and the body), and gets it echoed back in the callback's body."""
    tell = {"id": "tell", "type": "set", "config": {"values": {
        "url": "{{ callback_url('wait') }}",
        "quoted": "{{ callback_url('wait') | urlencode }}",
        "token": "{{ callback_url('wait').split('/')[-1] }}",
    }}}
    notify = {"id": "notify", "type": "http.request", "config": {
        "method": "POST",
        "url": site_url + "/notify?cb={{ callback_url('wait') | urlencode }}",
        "body": '{"resume": "{{ callback_url(\'wait\') }}"}',
        "output_key": "notified",
    }}
    wait = {"id": "wait", "type": "wait.callback", "config": {"timeout": "6h"}}
    done = {"id": "done", "type": "terminal", "config": {"output": "{{ state.wait.echo }}"}}
    late = {"id": "late", "type": "terminal", "config": {"output": "late"}}
    return make_flow(
        "telling",
        [{"id": "start", "type": "trigger.manual"}, tell, notify, wait, done, late],
        [("start", "tell"), ("tell", "notify"), ("notify", "wait"), ("wait", "received", "done"),
         ("wait", "timed_out", "late")],
    )


def _answer_callback(services: EngineServices, run_id: str) -> str:
    """POST the run's callback URL (as its state holds it) back to it, as the outside system would; the URL."""
    assert services.handles is not None
    services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
    run = services.get_run(run_id)
    assert run is not None
    url = run["state"]["url"]
    token = callback_token(services.box, run_id, "wait")
    assert url.endswith("/callbacks/" + token)
    outcome = resume_callback(services.handles, token, orjson.dumps({"echo": url}))
    assert outcome.status == 200, outcome
    deadline = time.monotonic() + 15
    while (run := services.get_run(run_id)) is None or run["status"] != "succeeded":
        assert time.monotonic() < deadline, run
        time.sleep(0.02)
    return url


def test_a_flow_that_hands_out_its_callback_url_replays_with_the_recorded_placeholder(
    clocked: EngineServices, site: Site
) -> None:
    document = _telling_flow(site.url)
    clocked.publish_flow(flow_from_data(document))
    run_id = clocked.create_run("telling", {}).run_id
    url = _answer_callback(clocked, run_id)
    assert clocked.sql is not None
    test = record_test(clocked.sql, run_id, "told", box=clocked.box)

    text = dump_test(test)
    token = url.rsplit("/", 1)[1]
    assert token not in text and "/callbacks/" + run_id not in text  # no resume URL of the run is kept
    assert test.expected.state["url"] == placeholder_url("wait") == "https://lockgate.test/callbacks/wait"
    assert test.expected.state["quoted"] == "https%3A//lockgate.test/callbacks/wait"
    assert test.expected.state["token"] == "wait"
    assert test.expected.result == "https://lockgate.test/callbacks/wait"  # echoed in the callback's body
    notify = next(answer for answer in test.answers if answer.node == "notify")
    echoed = notify.writes["notified"]["body"]  # the site answers the path and body it was sent
    assert echoed["path"] == "/notify?cb=https%3A//lockgate.test/callbacks/wait"
    assert echoed["body"] == '{"resume": "https://lockgate.test/callbacks/wait"}'
    assert notify.given is not None and notify.given["url"].endswith("?cb=https%3A//lockgate.test/callbacks/wait")
    wait = next(answer for answer in test.answers if answer.node == "wait")
    assert wait.writes == {"wait": {"echo": "https://lockgate.test/callbacks/wait"}}

    site.close()  # replay never calls out
    report = run_test(test, flow_from_data(document), "told")
    assert report.verdict == "passed", report.differences
    assert report.actual is not None and report.actual.path == ["start", "tell", "notify", "wait", "done"]
    # Recorded again from the same run: the same bytes.
    assert dump_test(record_test(clocked.sql, run_id, "told", box=clocked.box)) == text


def test_a_rerun_that_reuses_the_handed_out_callback_url_replays(clocked: EngineServices, site: Site) -> None:
    document = _telling_flow(site.url)
    clocked.publish_flow(flow_from_data(document))
    first = clocked.create_run("telling", {}).run_id
    _answer_callback(clocked, first)
    created, _plan = clocked.rerun_run(first, "done")
    rerun = clocked.wait_for_run(created.run_id)
    assert rerun["status"] == "succeeded", rerun
    assert first in rerun["state"]["url"]  # the reused steps' state: the first run's URL
    assert clocked.sql is not None
    test = record_test(clocked.sql, created.run_id, "rerun", box=clocked.box)
    assert callback_token(clocked.box, first, "wait") not in dump_test(test)
    assert test.expected.state["url"] == test.expected.result == "https://lockgate.test/callbacks/wait"

    site.close()
    report = run_test(test, flow_from_data(document), "rerun")
    assert report.verdict == "passed", report.differences
