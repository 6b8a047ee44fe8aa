"""The event set made whole: each type a `trigger.event` may name is published, and a listener flow starts."""

from __future__ import annotations

import time
from typing import Any

from engine.catalog import EVENT_TYPES
from engine.event_set import PUBLISHED_EVENT_TYPES
from engine.validation import never_published_message
from tests.api.conftest import APPROVAL, Api, flow_doc


def _listening(flow_id: str, event_type: str) -> dict[str, Any]:
    return flow_doc(flow_id, [
        {"id": "on", "type": "trigger.event", "config": {"event_type": event_type}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.type }}"}},
    ], [("on", "done")], {"event": {"type": "object"}})


def _runs_of(api: Api, flow_id: str, expected: int = 1, timeout: float = 15.0) -> list[dict[str, Any]]:
    """The runs of `flow_id` once `expected` of them succeeded, after a pause in which no more started."""
    deadline = time.monotonic() + timeout
    runs: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        runs = api.services.list_runs(flow_id=flow_id)
        if len(runs) >= expected and all(run["status"] == "succeeded" for run in runs):
            break
        time.sleep(0.05)
    time.sleep(0.5)
    found = [api.services.get_run(run["id"]) for run in api.services.list_runs(flow_id=flow_id)]
    return [run for run in found if run is not None]


def test_every_listed_event_type_is_published() -> None:
    assert set(EVENT_TYPES) == PUBLISHED_EVENT_TYPES


def test_a_listed_type_never_published_is_refused_with_the_published_ones() -> None:
    message = never_published_message("on", "flow.archived")
    assert '"flow.archived" but never publishes it' in message
    assert "run.succeeded" in message and "flow.published" in message


def test_run_failed_starts_its_listener(api: Api) -> None:
    api.publish(flow_doc("breaks", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "bad", "type": "set", "config": {"values": {"x": "{{ state.nope.deeper }}"}}},
        {"id": "done", "type": "terminal"},
    ], [("start", "bad"), ("bad", "done")]))
    api.publish(_listening("on-failed", "run.failed"))
    run_id = api.services.create_run("breaks", {}).run_id
    assert api.services.wait_for_run(run_id, timeout=10)["status"] == "failed"
    [listener] = _runs_of(api, "on-failed")
    assert listener["result"] == "run.failed"
    assert listener["inputs"]["event"]["run_id"] == run_id


def test_run_parked_and_run_cancelled_start_their_listeners(api: Api) -> None:
    api.publish(flow_doc("later", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "wait", "type": "queue", "config": {"delay": "1h"}},
        {"id": "done", "type": "terminal"},
    ], [("start", "wait"), ("wait", "done")]))
    api.publish(_listening("on-parked", "run.parked"))
    api.publish(_listening("on-cancelled", "run.cancelled"))
    run_id = api.services.create_run("later", {}).run_id
    api.services.wait_for_run(run_id, timeout=10, statuses=frozenset({"waiting"}))
    [parked] = _runs_of(api, "on-parked")
    assert parked["result"] == "run.parked"
    assert parked["inputs"]["event"]["run_id"] == run_id
    assert parked["inputs"]["event"]["waiting_on"]["node"] == "wait"
    api.services.cancel_run(run_id)
    assert api.services.wait_for_run(run_id, timeout=10)["status"] == "cancelled"
    [cancelled] = _runs_of(api, "on-cancelled")
    assert cancelled["result"] == "run.cancelled"
    assert cancelled["inputs"]["event"]["run_id"] == run_id


def test_approval_requested_starts_its_listener(api: Api) -> None:
    api.publish(APPROVAL)
    api.publish(_listening("on-asked", "approval.requested"))
    run_id = api.services.create_run("ask", {}).run_id
    [asked] = _runs_of(api, "on-asked")
    assert asked["result"] == "approval.requested"
    assert asked["inputs"]["event"]["run_id"] == run_id
    assert asked["inputs"]["event"]["node"] == "ok"


def test_flow_published_starts_its_listener_once_per_version(api: Api) -> None:
    api.publish(_listening("on-published", "flow.published"))
    # The listener's own publishing is a publish too.
    [own] = _runs_of(api, "on-published")
    assert own["inputs"]["event"] == {"type": "flow.published", "flow_id": "on-published", "version": 1}
    source = flow_doc("source", [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}],
                      [("start", "done")])
    api.publish(source)
    api.publish(source)  # the same content: the same version, no second run
    runs = _runs_of(api, "on-published", expected=2)
    assert sorted((r["inputs"]["event"]["flow_id"], r["inputs"]["event"]["version"]) for r in runs) == [
        ("on-published", 1), ("source", 1)]
    api.publish({**source, "name": "source, renamed"})
    runs = _runs_of(api, "on-published", expected=3)
    assert ("source", 2) in {(r["inputs"]["event"]["flow_id"], r["inputs"]["event"]["version"]) for r in runs}
    assert all(r["result"] == "flow.published" for r in runs)
