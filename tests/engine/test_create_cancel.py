"""create_run refusals and guards, version pinning, cancel at once and at the step boundary."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from engine.facade import EngineApi
from engine.flow import Flow, flow_from_data
from engine.runtime.create import IdempotencyKeyReused
from engine.runtime.inputs import InputError
from engine.store.models import DeadLetter
from tests.engine.conftest import Engine, Site, make_flow, start_engine, wait_until

T = {"id": "start", "type": "trigger.manual"}


def _typed() -> dict:
    return make_flow("typed", [T, {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.n + 1 }}"}}],
                     [("start", "done")],
                     {"n": {"type": "integer", "required": True}, "tags": {"type": "array", "default": []}})


def test_bad_inputs_are_refused_before_any_run_exists(engine: Engine) -> None:
    services = engine.services
    services.publish_flow(flow_from_data(_typed()))
    with pytest.raises(InputError, match='required input "n" \\(integer\\) is missing'):
        services.create_run("typed", {})
    with pytest.raises(InputError, match='"n" must be of JSON type integer, got string'):
        services.create_run("typed", {"n": "3"})
    with pytest.raises(InputError, match='"colour" is not a declared input'):
        services.create_run("typed", {"n": 3, "colour": "red"})
    assert services.list_runs() == []
    handles = services.handles
    assert handles is not None and handles.client.xlen(handles.keys.jobs) == 0
    run = services.wait_for_run(services.create_run("typed", {"n": 41}).run_id)
    assert run["result"] == 42 and run["inputs"] == {"n": 41, "tags": []}


def test_idempotency_key_creates_one_run(engine: Engine) -> None:
    services = engine.services
    services.publish_flow(flow_from_data(_typed()))
    first = services.create_run("typed", {"n": 1}, idempotency_key="order-77")
    again = services.create_run("typed", {"n": 1}, idempotency_key="order-77")
    assert again.run_id == first.run_id and again.duplicate and not first.duplicate
    assert len(services.list_runs()) == 1


def test_a_key_that_started_a_run_of_one_flow_refuses_a_start_of_another(engine: Engine) -> None:
    services = engine.services
    handles = services.handles
    assert handles is not None
    services.publish_flow(flow_from_data(_typed()))
    services.publish_flow(flow_from_data({**_typed(), "id": "other"}))
    first = services.create_run("typed", {"n": 1}, idempotency_key="order-79")
    with pytest.raises(IdempotencyKeyReused) as refused:
        services.create_run("other", {"n": 1}, idempotency_key="order-79")
    assert refused.value.reason == "idempotency_key_reused"
    assert f'run {first.run_id} of flow "typed", not of flow "other"' in str(refused.value)
    handles.client.delete(handles.keys.idempotency("order-79"))  # the stored key answers without Redis's guard too
    with pytest.raises(IdempotencyKeyReused):
        services.create_run("other", {"n": 1}, idempotency_key="order-79")
    assert [run["id"] for run in services.list_runs()] == [first.run_id]
    assert services.create_run("typed", {"n": 1}, idempotency_key="order-79").run_id == first.run_id


def test_the_stored_key_answers_a_repeat_when_redis_lost_its_guard_or_the_flow_was_disabled(engine: Engine) -> None:
    services = engine.services
    handles = services.handles
    assert handles is not None
    services.publish_flow(flow_from_data(_typed()))
    first = services.create_run("typed", {"n": 1}, idempotency_key="order-78")
    handles.client.delete(handles.keys.idempotency("order-78"))  # expired, or a Redis without its data
    again = services.create_run("typed", {"n": 1}, idempotency_key="order-78")
    assert (again.run_id, again.duplicate) == (first.run_id, True)
    services.publish_flow(flow_from_data({**_typed(), "enabled": False}))
    late = services.create_run("typed", {"n": 1}, idempotency_key="order-78")  # a retry of the same request
    assert (late.run_id, late.duplicate) == (first.run_id, True)
    assert [run["id"] for run in services.list_runs()] == [first.run_id]


def test_concurrent_creates_with_one_key_make_one_run(any_db_engine: Engine) -> None:
    """Losers of the Redis guard that look before the winner's row is written insert too; the unique key column
    refuses them and they answer with the winner's run. Several rounds, so that race happens in some."""
    services = any_db_engine.services
    services.publish_flow(flow_from_data(_typed()))
    callers, rounds = 8, 6
    start = threading.Barrier(callers)

    def create(key: str) -> tuple[str, bool]:
        start.wait(10)
        created = services.create_run("typed", {"n": 1}, idempotency_key=key)
        return created.run_id, created.duplicate

    made = []
    with ThreadPoolExecutor(max_workers=callers) as pool:
        for round_number in range(rounds):
            results = list(pool.map(create, [f"order-79-{round_number}"] * callers))
            assert len({run_id for run_id, _ in results}) == 1, results
            assert sorted(duplicate for _, duplicate in results) == [False] + [True] * (callers - 1)
            made.append(results[0][0])
    assert sorted(run["id"] for run in services.list_runs()) == sorted(made)
    assert all(services.wait_for_run(run_id)["result"] == 2 for run_id in made)


def test_budget_preflight_hook_can_refuse(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> None:
    def exhausted(flow: Flow, inputs: dict[str, Any]) -> None:
        raise RuntimeError("budget_exhausted: budget \"default\" has $0.00 left")

    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, budget_preflight=exhausted)
    try:
        services.publish_flow(flow_from_data(_typed()))
        with pytest.raises(RuntimeError, match="budget_exhausted"):
            services.create_run("typed", {"n": 1})
        assert services.list_runs() == []
    finally:
        services.stop()


def test_a_queued_run_cancels_at_once(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> None:
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=0)
    try:
        services.publish_flow(flow_from_data(_typed()))
        created = services.create_run("typed", {"n": 1})
        assert services.cancel_run(created.run_id) == "cancelled"
        run = services.wait_for_run(created.run_id, timeout=30)
        assert run["status"] == "cancelled" and run["steps"] == []
        assert services.cancel_run(created.run_id) == "cancelled"  # again: nothing changes
    finally:
        services.stop()
    # a worker that meets the job later drops it without starting the run
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=1)
    try:
        handles = services.handles
        assert handles is not None
        wait_until(lambda: handles.client.xlen(handles.keys.jobs) == 0, what="the cancelled job to be dropped")
        assert services.get_run(created.run_id)["status"] == "cancelled"  # type: ignore[index]
    finally:
        services.stop()


def test_a_running_run_stops_at_the_next_step_boundary(engine: Engine, site: Site) -> None:
    site.release.clear()
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/hold"}}
    doc = make_flow("long", [T, call, {"id": "next", "type": "set", "config": {"values": {"x": "1"}}},
                             {"id": "done", "type": "terminal"}],
                    [("start", "call"), ("call", "next"), ("next", "done")])
    services = engine.services
    services.publish_flow(flow_from_data(doc))
    created = services.create_run("long")
    wait_until(lambda: site.hits.get("/hold"), what="the http step to be in flight")
    api = EngineApi(services)
    assert api.get_run(created.run_id).cancel_requested is False  # type: ignore[union-attr]
    assert services.cancel_run(created.run_id) == "cancelling"
    shown = api.get_run(created.run_id)
    assert shown is not None and (shown.status, shown.cancel_requested) == ("running", True)
    site.release.set()
    run = services.wait_for_run(created.run_id)
    assert run["status"] == "cancelled"
    assert run["error_type"] == "cancelled"
    assert api.get_run(created.run_id).cancel_requested is False  # type: ignore[union-attr]
    steps = {s["step"]: s["status"] for s in run["steps"]}
    assert steps == {"start": "succeeded", "call": "succeeded"}  # `next` never started


def test_a_run_sql_still_calls_queued_but_a_worker_holds_is_cancelled_by_that_worker(
        tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str, site: Site) -> None:
    # No projector yet: SQL says `queued` while the worker is inside the http step. The cancel must see the
    # worker's hold in Redis, not SQL's stale status, or its `run_cancelled` lands before the worker's events.
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=1, projector=False)
    site.release.clear()
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/hold"}}
    doc = make_flow("lag", [T, call, {"id": "next", "type": "set", "config": {"values": {"x": "1"}}}],
                    [("start", "call"), ("call", "next")])
    try:
        services.publish_flow(flow_from_data(doc))
        run_id = services.create_run("lag").run_id
        wait_until(lambda: site.hits.get("/hold"), what="the http step to be in flight")
        assert services.get_run(run_id, with_steps=False)["status"] == "queued"  # type: ignore[index]
        assert services.cancel_run(run_id) == "cancelling"
        site.release.set()
        handles = services.handles
        assert handles is not None
        wait_until(lambda: handles.client.xlen(handles.keys.jobs) == 0, what="the worker to end the job")
    finally:
        services.stop()
    projector, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=0)
    try:
        run = projector.wait_for_run(run_id)
        assert (run["status"], run["error_type"]) == ("cancelled", "cancelled")
        assert {s["step"]: s["status"] for s in run["steps"]} == {"start": "succeeded", "call": "succeeded"}
        assert projector.sql is not None
        with projector.sql.connect() as conn:
            assert list(conn.execute(sa.select(DeadLetter.error)).scalars()) == []
    finally:
        projector.stop()


def test_a_run_keeps_the_version_it_started_on(engine: Engine, site: Site) -> None:
    site.release.clear()
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/hold"}}
    doc = make_flow("pin", [T, call,
                            {"id": "done", "type": "terminal", "config": {"output": "v1"}}],
                    [("start", "call"), ("call", "done")])
    services = engine.services
    services.publish_flow(flow_from_data(doc))
    created = services.create_run("pin")
    wait_until(lambda: site.hits.get("/hold"), what="v1 to be running")
    doc["nodes"][2]["config"]["output"] = "v2"
    assert services.publish_flow(flow_from_data(doc)).version == 2
    site.release.set()
    run = services.wait_for_run(created.run_id)
    assert (run["version"], run["result"]) == (1, "v1")
    newer = services.wait_for_run(services.create_run("pin").run_id)
    assert (newer["version"], newer["result"]) == (2, "v2")


def test_running_runs_heartbeat_until_they_end(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str,
                                                site: Site) -> None:
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, heartbeat_seconds=0.05)
    try:
        site.release.clear()
        call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/hold"}}
        services.publish_flow(flow_from_data(make_flow("beat", [T, call], [("start", "call")])))
        run_id = services.create_run("beat").run_id
        handles = services.handles
        assert handles is not None
        def origin() -> str | None:
            entries: dict[bytes, bytes] = handles.client.hgetall(handles.keys.running_jobs)  # type: ignore[assignment]
            return next((job.decode() for job, raw in entries.items() if orjson.loads(raw)["run"] == run_id), None)

        job = wait_until(origin, what="the run's job to be running")

        def beat() -> float:
            return float(handles.client.hget(handles.keys.heartbeats, job) or 0)

        first = wait_until(beat, what="a heartbeat")
        wait_until(lambda: beat() > first, what="the heartbeat to advance")
        site.release.set()
        assert services.wait_for_run(run_id)["status"] == "succeeded"
        assert handles.client.hget(handles.keys.heartbeats, job) is None
        assert handles.client.hget(handles.keys.running_jobs, job) is None
    finally:
        services.stop()


def test_a_disabled_flow_starts_nothing_and_unknown_triggers_are_refused(engine: Engine) -> None:
    from engine.runtime.create import RunRefused

    services = engine.services
    doc = _typed()
    services.publish_flow(flow_from_data(doc))
    with pytest.raises(RunRefused, match='has no trigger node "webhook"'):
        services.create_run("typed", {"n": 1}, trigger="webhook")
    doc["enabled"] = False
    services.publish_flow(flow_from_data(doc))
    with pytest.raises(RunRefused, match="is disabled, so its triggers start nothing"):
        services.create_run("typed", {"n": 1})
    assert services.list_runs() == []
