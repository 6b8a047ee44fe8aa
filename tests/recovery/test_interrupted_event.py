"""`run.interrupted`: a run given up on past the retry cap starts the flows listening to it."""

from __future__ import annotations

from typing import Any

import redis

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.reclaim import RecoveryThresholds
from engine.transport.keys import Keyspace
from tests.engine.conftest import make_flow
from tests.recovery.conftest import wait_until

T = {"id": "start", "type": "trigger.manual"}
DONE = {"id": "done", "type": "terminal", "config": {"output": "ok"}}
LISTENER = make_flow("on-interrupted", [
    {"id": "on", "type": "trigger.event", "config": {"event_type": "run.interrupted"}},
    {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.event.type }}"}},
], [("on", "done")], {"event": {"type": "object"}})


def _take_and_die(client: redis.Redis, keys: Keyspace) -> None:
    """Read one job message as a consumer that dies without acknowledging it."""
    def read() -> Any:
        reply: Any = client.xreadgroup(keys.jobs_group, "dead-consumer", {keys.jobs: ">"}, count=1, block=50)
        return reply[0][1][0] if reply else None

    wait_until(read, timeout=10, what="a job message")


def test_an_interrupted_run_starts_its_listener(recovery_config: EngineConfig) -> None:
    thresholds = RecoveryThresholds(heartbeat_timeout=5.0, idle_timeout=0.3, retry_cap=0, tick=0.05)
    with EngineServices(recovery_config, workers=0, scheduler=False, block_ms=100, recovery=thresholds) as engine:
        engine.publish_flow(flow_from_data(make_flow("lost", [T, DONE], [("start", "done")])))
        engine.publish_flow(flow_from_data(LISTENER))
        run_id = engine.create_run("lost", {}).run_id
        _take_and_die(engine.require_handles().client, engine.keys)
        assert engine.wait_for_run(run_id, timeout=10)["status"] == "interrupted"

        def listener_run() -> dict[str, Any] | None:
            runs = engine.list_runs(flow_id="on-interrupted")
            return engine.get_run(runs[0]["id"]) if runs else None

        # No workers here: the listener's run is created (queued), which is what the trigger does.
        listener = wait_until(listener_run, timeout=10, what="the listener's run")
        assert listener is not None
        assert listener["trigger"] == "on"
        assert listener["inputs"]["event"]["type"] == "run.interrupted"
        assert listener["inputs"]["event"]["run_id"] == run_id
