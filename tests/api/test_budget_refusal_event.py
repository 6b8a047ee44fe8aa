"""`budget.exhausted` fires for every reserve its budget could not cover, and says which refusal it was."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Api, flow_doc

SPENDER = flow_doc("spend-later", [
    {"id": "start", "type": "trigger.manual"},
    {"id": "wait", "type": "queue", "config": {"delay": "1m"}},
    {"id": "reserve", "type": "budget.reserve", "config": {"for": "model", "amount": 0.5, "budget": "team"}},
    {"id": "model", "type": "ai.model", "config": {"provider": "local", "model": "sim-small", "prompt": "hi",
                                                    "output_key": "answer"}},
    {"id": "done", "type": "terminal"},
], [("start", "wait"), ("wait", "reserve"), ("reserve", "model"), ("model", "done")])

LISTENER = flow_doc("on-budget", [
    {"id": "on", "type": "trigger.event", "config": {"event_type": "budget.exhausted"}},
    {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.error_type }}"}},
], [("on", "done")], {"event": {"type": "object"}})


def _reserve_after_the_wait(api: Api, limit_at_reserve: str) -> dict[str, Any]:
    """Start a run while the budget has $0.30 left, set `limit_at_reserve` while it waits, then let it reserve."""
    api.services.money.services.ledger.set_budget("team", "0.3", "day")
    run_id = api.services.create_run("spend-later", {}).run_id
    api.services.wait_for_run(run_id, timeout=10, statuses=frozenset({"waiting"}))
    api.services.money.services.ledger.set_budget("team", limit_at_reserve, "day")
    api.clock.advance(120)
    assert api.services.waker is not None
    api.services.waker.due.nudge()
    return api.services.wait_for_run(run_id, timeout=10)


def test_a_reserve_above_what_is_left_fires_budget_exhausted_told_apart_from_an_empty_budget(api: Api) -> None:
    api.publish(SPENDER)
    api.publish(LISTENER)
    short = _reserve_after_the_wait(api, "0.3")
    empty = _reserve_after_the_wait(api, "0")
    assert (short["status"], short["error_type"]) == ("failed", "insufficient_budget")
    assert (empty["status"], empty["error_type"]) == ("failed", "budget_exhausted")

    api.idle.wait(timeout=30)
    heard = {}
    for listed in api.services.list_runs(flow_id="on-budget", limit=10):
        run = api.services.get_run(listed["id"])
        assert run is not None and run["status"] == "succeeded", run
        event = run["inputs"]["event"]
        assert event["type"] == "budget.exhausted"
        assert run["result"] == event["error_type"]
        heard[event["run_id"]] = event
    assert {run_id: event["error_type"] for run_id, event in heard.items()} == {
        short["id"]: "insufficient_budget", empty["id"]: "budget_exhausted"}
    assert "$0.30" in heard[short["id"]]["error"], heard[short["id"]]["error"]
