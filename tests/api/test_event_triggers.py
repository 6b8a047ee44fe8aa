"""Event triggers: a run per matching engine event with the event as input, the loop guard, disabled flows."""

from __future__ import annotations

import time
from typing import Any

from engine.triggers.events import MAX_EVENT_CHAIN
from engine.triggers.settings import counters
from tests.api.conftest import Api, flow_doc

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
