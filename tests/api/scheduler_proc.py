"""A real engine process for the schedule tests: no workers, projector or threads of its own, just the
schedule scheduler, ticked on command at a time the test gives.

Usage: python -m tests.api.scheduler_proc DATA_DIR REDIS_URL DB_URL KEY_PREFIX PROCESSES
Prints `ready`, then per line `tick <epoch seconds>` on stdin sets its clock there, ticks once and prints the
fires as one JSON list of [outcome, fire time, run id]; end of input stops it.

Each fire goes through the engine's own `create_run` once all PROCESSES processes reached the same fire (a
Redis counter per idempotency key), so every process has computed the fire before any one records it: the
race the idempotency key decides, made to happen every time.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.clock import ManualClock
from engine.config import EngineConfig
from engine.host import EngineServices
from engine.triggers.schedules import Scheduler

BARRIER_SECONDS = 10.0


def main() -> int:
    data_dir, redis_url, db_url, prefix, processes = sys.argv[1:6]
    clock = ManualClock()
    config = EngineConfig(data_dir=Path(data_dir), redis_url=redis_url, db_url=db_url, key_prefix=prefix)
    services = EngineServices(config, clock=clock, workers=0, projector=False, due_waker=False, reaper=False,
                              scheduler=False)
    with services:
        handles = services.handles
        assert handles is not None
        client = handles.client

        def create_run(flow_id: str, inputs: dict[str, Any], **options: Any) -> Any:
            barrier = f"{prefix}:test-barrier:{options['idempotency_key']}"
            client.incr(barrier)
            deadline = time.monotonic() + BARRIER_SECONDS
            while int(client.get(barrier) or 0) < int(processes) and time.monotonic() < deadline:
                time.sleep(0.002)
            return services.create_run(flow_id, inputs, **options)

        scheduler = Scheduler(handles, create_run, clock)
        print("ready", flush=True)
        for line in sys.stdin:
            command, _, argument = line.strip().partition(" ")
            if command != "tick":
                continue
            clock.set(float(argument))
            fired = [[f.outcome, f.fire_time, f.run_id] for f in scheduler.tick()]
            print(json.dumps(fired), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
