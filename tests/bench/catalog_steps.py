"""Catalog v2 step costs: a python `script` step that echoes its input, p50/p99 per step over N runs.

Three figures, so the script step's own overhead can be told from the interpreter's start:
- `step`: the step's `duration_ms` as the engine records it, runs made one after another on real workers
  (machine Redis under a fresh key prefix, a fresh SQLite file);
- `runner`: `run_script` alone on the same code and input (no engine);
- `bare_interpreter`: `python -I -c pass` through subprocess, the floor under both;
- `marker_sweep`: one scan of /proc for a script's marker (done after every script).

Prints JSON. Usage: python tests/bench/catalog_steps.py [--runs 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.script_runner import ScriptRequest, marked_processes, run_script

ECHO = "import json, sys\nprint(json.dumps(json.load(sys.stdin)['inputs']))\n"
FLOW = {"format": "lockgate.flow/1", "id": "echo", "name": "echo",
        "inputs": {"n": {"type": "integer", "required": True}},
        "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                  {"id": "echo", "type": "script", "config": {"language": "python", "code": ECHO,
                                                              "output_key": "echoed"}},
                  {"id": "done", "type": "terminal", "config": {"output": "{{ state.echoed.n }}"}}],
        "edges": [{"from": "start", "to": "echo"}, {"from": "echo", "to": "done"}]}


def _summary(samples_ms: list[float]) -> dict[str, Any]:
    ordered = sorted(samples_ms)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 1),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
            "max_ms": round(ordered[-1], 1)}


def _timed(fn: Any, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def _engine_steps(runs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        config = EngineConfig(data_dir=Path(folder) / "data", key_prefix=f"bench-{uuid.uuid4().hex[:8]}",
                              redis_url=os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0"),
                              db_url=f"sqlite:///{Path(folder) / 'bench.db'}")
        services = EngineServices(config, workers=2, block_ms=50).start()
        try:
            services.publish_flow(flow_from_data(FLOW))
            durations = []
            for index in range(runs):
                run = services.wait_for_run(services.create_run("echo", {"n": index}).run_id, timeout=60)
                assert run["status"] == "succeeded" and run["result"] == index, run
                step = next(s for s in run["steps"] if s["step"] == "echo")
                durations.append(float(step["duration_ms"]))
            return durations
        finally:
            services.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    stdin = json.dumps({"inputs": {"n": 1}, "state": {}, "run": {"id": "r"}}).encode()
    request = ScriptRequest("python", ECHO, stdin, {}, 60.0, 512)
    bare = [sys.executable, "-I", "-c", "pass"]
    report = {
        "machine": {"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]},
        "step": _summary(_engine_steps(args.runs)),
        "runner": _summary(_timed(lambda: run_script(request), args.runs)),
        "bare_interpreter": _summary(_timed(lambda: subprocess.run(bare, check=True), args.runs)),
        "marker_sweep": _summary(_timed(lambda: marked_processes("nothing"), args.runs)),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
