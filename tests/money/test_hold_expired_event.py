"""`hold.expired`: a hold the expiry sweep returns starts the flows listening to it; other returns do not."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.money.conftest import MoneyEngine, model_flow

LISTENER = {"format": "lockgate.flow/1", "id": "on-expired", "name": "on-expired",
            "inputs": {"event": {"type": "object"}},
            "nodes": [{"id": "on", "type": "trigger.event", "config": {"event_type": "hold.expired"}},
                      {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.node }}"}}],
            "edges": [{"from": "on", "to": "done"}]}


def _listener_runs(engine: MoneyEngine, expected: int, timeout: float = 15.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = engine.services.list_runs(flow_id="on-expired")
        if len(runs) >= expected and all(run["status"] == "succeeded" for run in runs):
            break
        time.sleep(0.05)
    time.sleep(0.5)
    found = [engine.services.get_run(run["id"]) for run in engine.services.list_runs(flow_id="on-expired")]
    return [run for run in found if run is not None]


def test_an_expired_hold_starts_the_hold_expired_listener(start_money_engine: Callable[..., MoneyEngine]) -> None:
    engine = start_money_engine(background_seconds=3600)
    engine.publish(LISTENER)
    engine.publish(model_flow("finishes", {}))
    finished = engine.start("finishes")
    assert engine.wait(finished)["status"] == "succeeded"  # its hold is charged: no hold.expired
    engine.publish(model_flow("sweep", {"background": True, "hold_ttl": "2m"}))
    run_id = engine.start("sweep")
    engine.wait_parked(run_id, "provider_response")
    engine.clock.advance(121)
    # The engine's own sweep (every 5 s) may return the hold first; either way it is returned once, as expired.
    assert [s.reason for s in engine.services.money.sweep_once()] in (["expired"], [])
    [listener] = _listener_runs(engine, 1)
    event = listener["inputs"]["event"]
    assert (event["type"], event["run_id"], event["flow_id"], event["reason"]) == (
        "hold.expired", run_id, "sweep", "expired")
    assert listener["result"] == "reserve"  # the node that placed the hold
