"""The engine alone at the HTTP benchmark's concurrency: C threads each start the peer harness's flow through
`create_run()` and wait for its end (the batch listener), then start the next, as wrk's connections do through
`POST /api/v1/runs` (`api_throughput.py`). Same engine settings as `lockgate worker` (4 worker threads).

    python tests/bench/engine_closed_loop.py [--conc 8,32] [--duration 10] [--read]

`--read` also reads the ended run with its steps, as the HTTP answer does. Prints one JSON line per concurrency:
runs/s and the process's CPU ms per run (embedded Redis excluded), the figure `api_throughput.py`'s server CPU
per request is compared with.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.projection import BatchResult
from engine.runtime.transitions import TERMINAL

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("LOCKGATE_PEERS", ROOT.parent / "shared" / "peers"))
FLOW = PEERS / "lockgate" / "bench.flow.json"
WARMUP_SECONDS = 3.0


def bench(conc: int, duration: float, read: bool, workers: int) -> dict[str, object]:
    flow = json.loads(FLOW.read_text())
    services = EngineServices(EngineConfig(data_dir=Path(tempfile.mkdtemp(prefix="lg-closed-")),
                                           key_prefix="closed"), workers=workers)
    waiters: dict[str, threading.Event] = {}

    def on_batch(result: BatchResult) -> None:
        for run_id, _status in result.terminal_runs:
            event = waiters.get(run_id)
            if event is not None:
                event.set()

    stop = threading.Event()
    counts = [0] * conc

    def loop(index: int) -> None:
        number = 0
        while not stop.is_set():
            number += 1
            created = services.create_run(flow["id"], {"id": number, "value": 10 if number % 2 else 90})
            ended = waiters[created.run_id] = threading.Event()
            run = services.get_run(created.run_id, with_steps=False)
            if run is None or run["status"] not in TERMINAL:
                ended.wait(30)
            waiters.pop(created.run_id, None)
            if read:
                services.get_run(created.run_id)
            counts[index] += 1

    services.start()
    try:
        services.add_batch_listener(on_batch)
        services.publish_flow(flow_from_data(flow))
        threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(conc)]
        for thread in threads:
            thread.start()
        time.sleep(WARMUP_SECONDS)
        cpu, runs, began = time.process_time(), sum(counts), time.monotonic()
        time.sleep(duration)
        cpu, runs, seconds = time.process_time() - cpu, sum(counts) - runs, time.monotonic() - began
        stop.set()
        for thread in threads:
            thread.join(30)
    finally:
        services.stop()
    return {"bench": "engine_closed_loop", "connections": conc, "read": read, "workers": workers,
            "runs_per_s": round(runs / seconds, 1), "cpu_ms_per_run": round(cpu * 1000 / max(runs, 1), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conc", default="8,32")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--read", action="store_true", help="read each ended run with its steps")
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    for conc in (int(part) for part in args.conc.split(",")):
        print(json.dumps(bench(conc, args.duration, args.read, args.workers)), flush=True)


if __name__ == "__main__":
    main()
