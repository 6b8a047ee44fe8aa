"""flow.call end to end on the real engine (Redis, SQLite and PostgreSQL): a child run through create_run(),
the parent parked on it and resumed by its end."""

from __future__ import annotations

import threading

import pytest

from engine.calls.body import child_idempotency_key
from engine.flow import flow_from_data
from tests.catalog_flow_call.flows import child_flow, parent_flow
from tests.engine.conftest import Engine, start_engine, wait_until


def _publish(engine: Engine, *documents: dict) -> None:
    for document in documents:
        engine.services.publish_flow(flow_from_data(document))


@pytest.mark.postgres
def test_child_success_puts_its_result_under_output_key(any_db_engine: Engine) -> None:
    _publish(any_db_engine, child_flow())
    run = any_db_engine.run(parent_flow(), {"n": 4})
    assert run["status"] == "succeeded", run
    assert run["result"] == {"doubled": 10}
    assert run["state"]["sub"] == {"doubled": 10}
    assert run["parent_run_id"] is None
    [child_id] = run["child_run_ids"]
    child = any_db_engine.services.get_run(child_id)
    assert child is not None
    assert child["status"] == "succeeded"
    assert child["parent_run_id"] == run["id"]
    assert child["inputs"] == {"n": 5}
    step = any_db_engine.step(run, "call")
    assert step["status"] == "succeeded"
    assert step["given"] == {"flow": "child", "version": None, "inputs": {"n": 5}}


def _start(engine: Engine, document: dict, inputs: dict | None = None) -> str:
    engine.services.publish_flow(flow_from_data(document))
    return engine.services.create_run(document["id"], inputs or {"n": 1}).run_id


def _waiting_on_child(engine: Engine, run_id: str) -> dict:
    return wait_until(lambda: (r := engine.services.get_run(run_id)) and r["status"] == "waiting"
                      and r["child_run_ids"] and r, what="the parent parked on its child")


@pytest.mark.postgres
def test_child_failure_fails_the_step_with_the_childs_error(any_db_engine: Engine) -> None:
    _publish(any_db_engine, child_flow(fail=True))
    run = any_db_engine.run(parent_flow(), {"n": 1})
    assert run["status"] == "failed"
    assert run["error_type"] == "child_run_failed"
    [child_id] = run["child_run_ids"]
    child = any_db_engine.services.get_run(child_id)
    assert child is not None and child["status"] == "failed"
    step = any_db_engine.step(run, "call")
    assert step["status"] == "failed"
    assert step["error_type"] == "child_run_failed"
    assert child_id in step["error"] and child["error_type"] in step["error"]


def test_child_failure_with_continue_on_fail_goes_on(engine: Engine) -> None:
    _publish(engine, child_flow(fail=True))
    document = parent_flow(continue_on_fail=True)
    document["nodes"][-1]["config"]["output"] = "{{ 'went on' }}"
    run = engine.run(document, {"n": 1})
    assert run["status"] == "succeeded", run
    assert run["result"] == "went on"
    assert run["errors"]["call"]["type"] == "child_run_failed"


def test_retry_starts_a_fresh_child_per_attempt(engine: Engine) -> None:
    _publish(engine, child_flow(fail=True))
    run = engine.run(parent_flow(retry={"max_attempts": 2, "backoff": "linear", "base_delay": 0}), {"n": 1})
    assert run["status"] == "failed"
    assert len(run["child_run_ids"]) == 2
    assert engine.step(run, "call")["attempts"] == 2
    keys = {child_idempotency_key(run["id"], "call", attempt) for attempt in (1, 2)}
    with engine.services.require_handles().sql.connect() as conn:
        import sqlalchemy as sa

        from engine.store.models import Run
        stored = set(conn.execute(sa.select(Run.idempotency_key).where(Run.parent_run_id == run["id"])).scalars())
    assert stored == keys


@pytest.mark.postgres
def test_parent_waits_on_child_and_a_cancelled_child_fails_the_step(any_db_engine: Engine) -> None:
    _publish(any_db_engine, child_flow(wait="1h"))
    parent_id = _start(any_db_engine, parent_flow())
    parent = _waiting_on_child(any_db_engine, parent_id)
    [child_id] = parent["child_run_ids"]
    assert parent["waiting_on"] == {"node": "call", "reason": "child_run", "due_at": None, "child_run_id": child_id}
    assert parent["current_node"] == "call"
    assert any_db_engine.step(parent, "call")["status"] == "suspended"
    # The parent parks once the child exists; the child reaches its own park (the 1 h delay) on its own time.
    any_db_engine.services.wait_for_run(child_id, statuses=frozenset({"waiting"}))
    assert any_db_engine.services.cancel_run(child_id) == "cancelled"
    ended = any_db_engine.services.wait_for_run(parent_id)
    assert ended["status"] == "failed"
    assert ended["error_type"] == "child_run_cancelled"
    assert any_db_engine.step(ended, "call")["error_type"] == "child_run_cancelled"


@pytest.mark.postgres
def test_cancelling_the_parent_cancels_its_child(any_db_engine: Engine) -> None:
    _publish(any_db_engine, child_flow(wait="1h"))
    parent_id = _start(any_db_engine, parent_flow())
    [child_id] = _waiting_on_child(any_db_engine, parent_id)["child_run_ids"]
    wait_until(lambda: (r := any_db_engine.services.get_run(child_id)) and r["status"] == "waiting",
               what="the child parked on its queue")
    assert any_db_engine.services.cancel_run(parent_id) == "cancelled"
    child = any_db_engine.services.wait_for_run(child_id)
    assert child["status"] == "cancelled"
    assert parent_id in child["error"]
    assert any_db_engine.services.wait_for_run(parent_id)["status"] == "cancelled"


@pytest.mark.postgres
def test_a_disabled_target_fails_the_step_and_starts_nothing(any_db_engine: Engine) -> None:
    _publish(any_db_engine, child_flow(enabled=False))
    run = any_db_engine.run(parent_flow(), {"n": 1})
    assert run["status"] == "failed"
    assert run["error_type"] == "call_target_disabled"
    assert run["child_run_ids"] == []
    step = any_db_engine.step(run, "call")
    assert step["error_type"] == "call_target_disabled"
    assert "disabled" in step["error"] and '"child"' in step["error"]
    assert [r["id"] for r in any_db_engine.services.list_runs(flow_id="child")] == []


def test_the_depth_limit_is_refused_at_run_time(tmp_path, redis_url: str, sqlite_url: str, key_prefix: str) -> None:
    services, _sleeps = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, max_call_depth=1)
    try:
        engine = Engine(services, _sleeps)
        _publish(engine, child_flow("leaf"), parent_flow("middle", target="leaf"))
        run = engine.run(parent_flow("top", target="middle"), {"n": 1})
        assert run["status"] == "failed"
        assert run["error_type"] == "child_run_failed"
        [middle_id] = run["child_run_ids"]
        middle = services.get_run(middle_id)
        assert middle is not None
        assert middle["status"] == "failed" and middle["error_type"] == "call_depth_exceeded"
        step = engine.step(middle, "call")
        assert step["error_type"] == "call_depth_exceeded"
        assert "LOCKGATE_MAX_CALL_DEPTH" in step["error"]
        assert middle["child_run_ids"] == []
        assert services.list_runs(flow_id="leaf") == []
    finally:
        services.stop()


def test_a_parent_cancelled_while_it_starts_its_child_ends_cancelled_with_its_child(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cancel lands between the child's creation and the park: the parent never parks, the child is
    cancelled with it."""
    from engine.runtime import crashpoints

    _publish(engine, child_flow(wait="1h"))
    engine.services.publish_flow(flow_from_data(parent_flow()))
    cancelled: list[str] = []
    real_reached = crashpoints.reached
    lock = threading.Lock()

    def cancel_after_the_call(point: str) -> None:
        # Only the flow.call step's body creates a child run: the first pass that finds one is right after it.
        if point != "step.after_effect":
            real_reached(point)
            return
        with lock:
            children = engine.services.list_runs(flow_id="child") if not cancelled else []
            if children:
                child = engine.services.get_run(children[0]["id"], with_steps=False)
                assert child is not None and child["parent_run_id"]
                cancelled.append(child["parent_run_id"])
                assert engine.services.cancel_run(child["parent_run_id"]) in ("cancelling", "cancelled")
        real_reached(point)

    monkeypatch.setattr(crashpoints, "reached", cancel_after_the_call)
    parent_id = engine.services.create_run("parent", {"n": 1}).run_id
    parent = engine.services.wait_for_run(parent_id)
    assert cancelled == [parent_id]
    assert parent["status"] == "cancelled" and parent["waiting_on"] is None
    [child_id] = parent["child_run_ids"]
    assert engine.services.wait_for_run(child_id)["status"] == "cancelled"
