"""Resumes are fenced: duplicate or stale resume jobs never run a step twice; the due set is rebuilt at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import engine.runtime.body_table  # noqa: F401  (every body registered before one is replaced)
from engine.clock import ManualClock
from engine.flow import FlowSettings, flow_from_data
from engine.parking.limits import WaitLimits, park_record
from engine.runtime.bodies import _REGISTRY, Park, StepCall, StepResult, register_body
from engine.runtime.jobs import encode_job, resume_job
from tests.engine.conftest import Site, make_flow, start_engine, wait_until
from tests.parking.conftest import HOUR, START, TRIGGER, Parked

MS = 0.001


def _counting_flow(site: Site) -> dict[str, Any]:
    return make_flow("fenced", [TRIGGER, {"id": "pause", "type": "queue", "config": {"delay": "1h"}},
                                {"id": "call", "type": "http.request",
                                 "config": {"method": "GET", "url": site.url + "/once"}},
                                {"id": "done", "type": "terminal"}],
                     [("start", "pause"), ("pause", "call"), ("call", "done")])


def test_duplicate_resume_jobs_run_the_resumed_steps_once(parked: Parked, site: Site) -> None:
    parked.publish(_counting_flow(site))
    run_id = parked.start("fenced")
    parked.waiting_on(run_id, "pause")
    parked.clock.advance(HOUR)
    handles = parked.handles
    pipe = handles.client.pipeline(transaction=False)
    for _ in range(4):  # the waker's job, a rebuild's, a redelivery's...
        pipe.xadd(handles.keys.jobs, encode_job(resume_job(run_id)))
    pipe.execute()
    parked.services.waker.due.nudge()  # type: ignore[union-attr]
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "succeeded"
    wait_until(lambda: handles.client.xlen(handles.keys.jobs) == 0, what="every duplicate job to be consumed")
    assert site.hits == {"/once": 1}
    assert [s["step"] for s in run["steps"]] == ["start", "pause", "call", "done"]


def test_a_resume_for_an_earlier_park_does_not_wake_the_next_one(parked: Parked) -> None:
    parked.publish(make_flow("two", [TRIGGER, {"id": "first", "type": "queue", "config": {"delay": "1h"}},
                                     {"id": "second", "type": "queue", "config": {"delay": "1h"}},
                                     {"id": "done", "type": "terminal"}],
                             [("start", "first"), ("first", "second"), ("second", "done")]))
    run_id = parked.start("two")
    parked.waiting_on(run_id, "first")
    parked.advance(HOUR)
    parked.waiting_on(run_id, "second")
    handles = parked.handles
    handles.client.xadd(handles.keys.jobs, encode_job(resume_job(run_id)))  # a late duplicate of the first wake
    handles.client.xadd(handles.keys.jobs, encode_job(resume_job(run_id, "first#3")))  # names the first park
    wait_until(lambda: handles.client.xlen(handles.keys.jobs) == 0, what="the stale jobs to be dropped")
    assert parked.services.get_run(run_id, with_steps=False)["status"] == "waiting"  # type: ignore[index]
    assert parked.services.due.due_at(run_id) == START + 2 * HOUR  # type: ignore[union-attr]
    parked.advance(HOUR - MS)
    parked.still_waiting(run_id, "second")
    parked.advance(MS)
    assert parked.wait_status(run_id, "succeeded", "failed")["status"] == "succeeded"


def test_a_lost_due_member_is_rebuilt_from_the_store_at_start(tmp_path: Path, redis_url: str, sqlite_url: str,
                                                             key_prefix: str) -> None:
    clock = ManualClock(START)
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock)
    try:
        services.publish_flow(flow_from_data(make_flow("lost", [TRIGGER, {"id": "pause", "type": "queue",
                                                                          "config": {"delay": "3h"}},
                                                               {"id": "done", "type": "terminal"}],
                                                      [("start", "pause"), ("pause", "done")])))
        run_id = services.create_run("lost").run_id
        services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
    finally:
        services.stop()
    keys = services.keys
    assert services.redis is None
    import redis as redis_lib

    client: Any = redis_lib.Redis.from_url(redis_url)
    assert client.zscore(keys.due, run_id) == START + 3 * HOUR
    client.zrem(keys.due, run_id)  # lost with Redis' data
    clock.advance(5 * HOUR)  # the engine was down past the due time
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock)
    try:
        run = services.wait_for_run(run_id, timeout=10)
        assert run["status"] == "succeeded"
    finally:
        services.stop()


@pytest.fixture
def suspending_model() -> Any:
    """`ai.model` replaced by a body that suspends until resumed (what a background call does)."""
    previous = _REGISTRY.get("ai.model")

    @register_body("ai.model")
    def suspend(call: StepCall) -> StepResult | Park:
        if call.resumed:
            return StepResult(ports=("out",), writes={"answer": "late"})
        return Park("provider_response", due_at=None)

    yield suspend
    if previous is None:
        _REGISTRY.pop("ai.model", None)
    else:
        _REGISTRY["ai.model"] = previous


def test_a_suspended_step_fails_the_run_at_24h(parked: Parked, suspending_model: Any) -> None:
    parked.publish(make_flow("suspended", [TRIGGER, {"id": "ask", "type": "ai.model", "config": {
        "provider": "sim", "model": "m", "prompt": "hi", "output_key": "answer"}},
        {"id": "done", "type": "terminal"}], [("start", "ask"), ("ask", "done")]))
    run_id = parked.start("suspended")
    run = parked.waiting_on(run_id, "ask")
    assert run["waiting_on"] == {"node": "ask", "reason": "provider_response", "due_at": None}
    parked.advance(24 * HOUR - MS)
    parked.still_waiting(run_id, "ask")
    parked.advance(MS)
    run = parked.wait_status(run_id, "failed", "succeeded")
    assert run["error_type"] == "suspended_step_timeout" and "suspended_step_timeout (1d)" in run["error"]


def test_wake_times_at_the_boundaries() -> None:
    limits = WaitLimits.of(FlowSettings())
    assert (limits.max_wait, limits.suspended_step_timeout) == (72 * HOUR, 24 * HOUR)
    first = park_record(None, "queue_delay", START + 24 * HOUR, START, limits)
    assert (first["wake_at"], first["wake_kind"]) == (START + 24 * HOUR, "due")
    # A second park 71h after the first, due 2h later: max_wait (72h from the first park) wins.
    second = park_record(first, "approval", START + 73 * HOUR, START + 71 * HOUR, limits)
    assert (second["first_parked_at"], second["wake_at"], second["wake_kind"]) == (
        START, START + 72 * HOUR, "parked_expired")
    # Due exactly at the deadline: the park's own due time wins the tie.
    tie = park_record(first, "queue_delay", START + 72 * HOUR, START + HOUR, limits)
    assert tie["wake_kind"] == "due"
    suspended = park_record(None, "provider_response", None, START, limits)
    assert (suspended["wake_at"], suspended["wake_kind"]) == (START + 24 * HOUR, "suspended_step_timeout")
    short = WaitLimits.of(FlowSettings(max_wait="10h", suspended_step_timeout="1h"))
    assert park_record(None, "pool_capacity", START + 5 * HOUR, START, short)["wake_kind"] == "suspended_step_timeout"


def test_an_approval_decided_before_its_park_is_sealed_wakes_at_once(redis_url: str, key_prefix: str) -> None:
    import redis as redis_lib

    from engine.approvals.claims import Claim, claim_decision
    from engine.parking.resume import seal_park
    from engine.transport.keys import Keyspace

    client: Any = redis_lib.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    park = Park("approval", due_at=START + 2 * HOUR, detail={"approval_id": "ap_early"})
    assert seal_park(client, keys, None, park, START, FlowSettings())["wake_at"] == START + 2 * HOUR
    assert claim_decision(client, keys, "ap_early", Claim("approved", "user:ada", "", START))
    assert not claim_decision(client, keys, "ap_early", Claim("rejected", "user:bob", "", START))
    sealed = seal_park(client, keys, None, park, START + 1, FlowSettings())
    assert (sealed["wake_at"], sealed["wake_kind"]) == (START + 1, "due")
