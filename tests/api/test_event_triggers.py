"""Event triggers: a run per matching engine event with the event as input, the loop guard, disabled flows."""

from __future__ import annotations

import time
from typing import Any

from engine.approvals.decide import decide
from engine.approvals.pending import list_pending
from engine.triggers.events import MAX_EVENT_CHAIN
from engine.triggers.settings import counters
from tests.api.conftest import APPROVAL, Api, flow_doc

SOURCE = flow_doc("source", [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}],
                  [("start", "done")])


def _listener(flow_id: str, enabled: bool = True) -> dict[str, Any]:
    return flow_doc(flow_id, [
        {"id": "on", "type": "trigger.event", "config": {"event_type": "run.succeeded"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.flow_id }}"}},
    ], [("on", "done")], {"event": {"type": "object"}}, enabled=enabled)


def _settled_runs(api: Api, flow_ids: tuple[str, ...], expected: int, timeout: float = 20.0) -> list[dict[str, Any]]:
    """Runs of `flow_ids` once `expected` of them ended, after a pause in which no more started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = [run for flow_id in flow_ids for run in api.services.list_runs(flow_id=flow_id, limit=100)]
        if len(runs) >= expected and all(run["status"] == "succeeded" for run in runs):
            break
        time.sleep(0.05)
    time.sleep(0.8)
    return [run for flow_id in flow_ids for run in api.services.list_runs(flow_id=flow_id, limit=100)]


def test_a_run_succeeded_event_starts_the_listening_flow_once(api: Api) -> None:
    api.publish(SOURCE)
    api.publish(_listener("follow"))
    created = api.services.create_run("source", {})
    api.services.wait_for_run(created.run_id, timeout=10)
    runs = _settled_runs(api, ("follow",), 1)
    assert len(runs) == 1
    follow = api.services.get_run(runs[0]["id"])
    assert follow is not None
    assert follow["result"] == "source"
    assert follow["inputs"]["event"]["run_id"] == created.run_id
    assert follow["inputs"]["event"]["type"] == "run.succeeded"
    # The follow run's own success does not start it again: the loop guard counted it instead.
    assert api.services.handles is not None
    assert counters(api.services.handles.client, api.services.keys) == {"follow/on:loop_guard": 1}


def test_event_chains_across_flows_stop_at_the_chain_limit(api: Api) -> None:
    api.publish(SOURCE)
    api.publish(_listener("ping"))
    api.publish(_listener("pong"))
    api.services.create_run("source", {})
    # Each depth 1..MAX holds one ping and one pong run; runs at the limit start nothing more.
    runs = _settled_runs(api, ("ping", "pong"), 2 * MAX_EVENT_CHAIN, timeout=30)
    assert len(runs) == 2 * MAX_EVENT_CHAIN
    assert {run["flow_id"] for run in runs} == {"ping", "pong"}


def test_a_disabled_flow_event_trigger_starts_nothing_and_is_counted(api: Api) -> None:
    api.publish(SOURCE)
    api.publish(_listener("follow", enabled=False))
    api.services.wait_for_run(api.services.create_run("source", {}).run_id, timeout=10)
    assert api.services.handles is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not counters(api.services.handles.client, api.services.keys):
        time.sleep(0.05)
    assert counters(api.services.handles.client, api.services.keys) == {"follow/on:disabled": 1}
    assert api.services.list_runs(flow_id="follow") == []


def _listening(flow_id: str, event_type: str) -> dict[str, Any]:
    return flow_doc(flow_id, [
        {"id": "on", "type": "trigger.event", "config": {"event_type": event_type}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.type }}"}},
    ], [("on", "done")], {"event": {"type": "object"}})


def _one_run(api: Api, flow_id: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    runs: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not (runs and runs[0]["status"] == "succeeded"):
        runs = api.services.list_runs(flow_id=flow_id)
        time.sleep(0.05)
    time.sleep(0.3)
    runs = api.services.list_runs(flow_id=flow_id)
    assert len(runs) == 1, runs
    full = api.services.get_run(runs[0]["id"])
    assert full is not None
    return full


def test_approval_decided_and_expired_are_told_apart(api: Api) -> None:
    api.publish(APPROVAL)
    api.publish(_listening("on-decided", "approval.decided"))
    api.publish(_listening("on-expired", "approval.expired"))
    decided_run = api.services.create_run("ask", {}).run_id
    expiring_run = api.services.create_run("ask", {}).run_id
    for run_id in (decided_run, expiring_run):
        api.services.wait_for_run(run_id, timeout=10, statuses=frozenset({"waiting"}))
    assert api.services.handles is not None
    deadline = time.monotonic() + 10
    pending: list[Any] = []
    while len(pending) < 2 and time.monotonic() < deadline:
        pending = list_pending(api.services.handles)
        time.sleep(0.02)
    approval_id = next(item.id for item in pending if item.run_id == decided_run)
    assert decide(api.services.handles, approval_id, "approve", "user:ada").accepted
    decided = _one_run(api, "on-decided")
    assert decided["inputs"]["event"]["decision"] == "approved"
    assert decided["inputs"]["event"]["decided_by"] == "user:ada"
    assert decided["inputs"]["event"]["run_id"] == decided_run

    api.clock.advance(2 * 3600)
    assert api.services.waker is not None
    api.services.waker.due.nudge()
    assert api.services.wait_for_run(expiring_run, timeout=10)["status"] in ("succeeded", "failed")
    expired = _one_run(api, "on-expired")
    assert expired["inputs"]["event"]["run_id"] == expiring_run
    assert expired["inputs"]["event"]["decision"] == "expired"
    assert len(api.services.list_runs(flow_id="on-decided")) == 1


def test_a_budget_reserve_refused_for_an_empty_budget_fires_budget_exhausted(api: Api) -> None:
    ledger = api.services.money.services.ledger
    ledger.set_budget("team", "1", "day")
    api.publish(flow_doc("spend-later", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "wait", "type": "queue", "config": {"delay": "1m"}},
        {"id": "reserve", "type": "budget.reserve", "config": {"for": "model", "amount": 0.1, "budget": "team"}},
        {"id": "model", "type": "ai.model", "config": {"provider": "local", "model": "sim-small", "prompt": "hi",
                                                        "output_key": "answer"}},
        {"id": "done", "type": "terminal"},
    ], [("start", "wait"), ("wait", "reserve"), ("reserve", "model"), ("model", "done")]))
    api.publish(_listening("on-budget", "budget.exhausted"))
    run_id = api.services.create_run("spend-later", {}).run_id
    api.services.wait_for_run(run_id, timeout=10, statuses=frozenset({"waiting"}))
    ledger.set_budget("team", "0", "day")
    api.clock.advance(120)
    assert api.services.waker is not None
    api.services.waker.due.nudge()
    failed = api.services.wait_for_run(run_id, timeout=10)
    assert failed["status"] == "failed"
    notified = _one_run(api, "on-budget")
    assert notified["result"] == "budget.exhausted"
    assert notified["inputs"]["event"]["run_id"] == run_id
    assert 'budget' in notified["inputs"]["event"]["error"]
