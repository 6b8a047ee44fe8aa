"""Event triggers: a run per matching engine event with the event as input, the loop guard, disabled flows."""

from __future__ import annotations

from typing import Any

from engine.approvals.decide import decide
from engine.approvals.pending import list_pending
from engine.triggers.events import MAX_EVENT_CHAIN
from engine.triggers.settings import counters
from tests.api.conftest import APPROVAL, Api, flow_doc
from tests.engine.conftest import wait_until

SOURCE = flow_doc("source", [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}],
                  [("start", "done")])


def _listener(flow_id: str, enabled: bool = True) -> dict[str, Any]:
    return flow_doc(flow_id, [
        {"id": "on", "type": "trigger.event", "config": {"event_type": "run.succeeded"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.flow_id }}"}},
    ], [("on", "done")], {"event": {"type": "object"}}, enabled=enabled)


def _settled_runs(api: Api, *flow_ids: str) -> list[dict[str, Any]]:
    """Runs of `flow_ids` once the engine is idle: every event applied and every trigger it fired handled."""
    api.idle.wait(timeout=30)
    return [run for flow_id in flow_ids for run in api.services.list_runs(flow_id=flow_id, limit=100)]


def test_a_run_succeeded_event_starts_the_listening_flow_once(api: Api) -> None:
    api.publish(SOURCE)
    api.publish(_listener("follow"))
    created = api.services.create_run("source", {})
    api.services.wait_for_run(created.run_id, timeout=10)
    runs = _settled_runs(api, "follow")
    assert [run["status"] for run in runs] == ["succeeded"]
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
    runs = _settled_runs(api, "ping", "pong")
    assert len(runs) == 2 * MAX_EVENT_CHAIN
    assert {run["status"] for run in runs} == {"succeeded"}
    assert sorted(run["flow_id"] for run in runs) == ["ping"] * MAX_EVENT_CHAIN + ["pong"] * MAX_EVENT_CHAIN
    # Guarded: each run's own flow (depths 1..MAX), and at depth MAX the other flow too.
    assert api.services.handles is not None
    assert counters(api.services.handles.client, api.services.keys) == {
        "ping/on:loop_guard": MAX_EVENT_CHAIN + 1, "pong/on:loop_guard": MAX_EVENT_CHAIN + 1}


def test_a_disabled_flow_event_trigger_starts_nothing_and_is_counted(api: Api) -> None:
    api.publish(SOURCE)
    api.publish(_listener("follow", enabled=False))
    api.services.wait_for_run(api.services.create_run("source", {}).run_id, timeout=10)
    assert api.services.handles is not None
    api.idle.wait()
    assert counters(api.services.handles.client, api.services.keys) == {"follow/on:disabled": 1}
    assert api.services.list_runs(flow_id="follow") == []


def _listening(flow_id: str, event_type: str) -> dict[str, Any]:
    return flow_doc(flow_id, [
        {"id": "on", "type": "trigger.event", "config": {"event_type": event_type}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.type }}"}},
    ], [("on", "done")], {"event": {"type": "object"}})


def _one_run(api: Api, flow_id: str) -> dict[str, Any]:
    """The one run of `flow_id` once the engine is idle (fails if there are more, or it did not succeed)."""
    runs = _settled_runs(api, flow_id)
    assert [run["status"] for run in runs] == ["succeeded"], runs
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
    handles = api.services.handles
    assert handles is not None
    pending = wait_until(lambda: (found := list_pending(handles)) and len(found) == 2 and found,
                         what="both approvals to be pending")
    approval_id = next(item.id for item in pending if item.run_id == decided_run)
    assert decide(api.services.handles, approval_id, "approve", "user:ada").accepted
    decided = _one_run(api, "on-decided")
    assert decided["inputs"]["event"]["decision"] == "approved"
    assert decided["inputs"]["event"]["decided_by"] == "user:ada"
    assert decided["inputs"]["event"]["run_id"] == decided_run
    assert api.services.wait_for_run(decided_run, timeout=10)["result"] == "approved"

    api.clock.advance(2 * 3600)
    assert api.services.waker is not None
    api.services.waker.due.nudge()
    expired_run = api.services.wait_for_run(expiring_run, timeout=10)
    assert (expired_run["status"], expired_run["result"]) == ("succeeded", "rejected")  # a timeout rejects
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
