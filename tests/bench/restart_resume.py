"""Benchmark: how soon runs that fell due while no engine ran resume once a new engine process serves.

Parks N runs on a 2 s queue in a `lockgate worker` child, stops it (SIGTERM), waits until every run is
overdue, starts a new `lockgate worker` and measures, per run, the time from the new engine's start-up line
to the queue step's completion (stamped by the worker). Prints one JSON object: engine start-up time and the
p50/p99/max resume delay. Target: max < 5 s after the start-up line (what the restart test once asserted).

    .venv/bin/python tests/bench/restart_resume.py [--runs 100] [--redis-url redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices

LOCKGATE = [sys.executable, "-m", "app.main"]
DELAY_SECONDS = 2.0


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _start_worker(env: dict[str, str]) -> tuple[subprocess.Popen[str], float]:
    """A `lockgate worker` child and the time it printed its start-up line (its stderr drained after)."""
    worker = subprocess.Popen([*LOCKGATE, "worker", "--workers", "2"], env=env, stderr=subprocess.PIPE, text=True)
    assert worker.stderr is not None
    stream = worker.stderr
    started = threading.Event()
    at: list[float] = []

    def read() -> None:
        for line in stream:
            if "Ctrl-C stops" in line and not at:
                at.append(time.time())
                started.set()

    threading.Thread(target=read, daemon=True).start()
    if not started.wait(60):
        raise SystemExit("restart bench: lockgate worker did not start within 60 s")
    return worker, at[0]


def _stamps(sql: sa.Engine) -> dict[str, float]:
    with sql.connect() as conn:
        rows = conn.execute(sa.text("select run_id, finished_at from steps where step = 'pause' "
                                    "and finished_at is not null")).all()
    result = {}
    for run_id, value in rows:
        stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
        result[run_id] = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    return result


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"restart bench: timed out waiting for {what}")
        time.sleep(0.1)


def bench(runs: int, redis_url: str) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lockgate-restart-bench-"))
    prefix = f"lgrestart-{uuid.uuid4().hex[:10]}"
    db = folder / "lockgate.db"
    env = {**os.environ, "LOCKGATE_DATA_DIR": str(folder), "LOCKGATE_REDIS_URL": redis_url,
           "LOCKGATE_KEY_PREFIX": prefix, "LOCKGATE_DB_URL": "", "LOCKGATE_API_KEY": ""}
    config = EngineConfig(data_dir=folder, redis_url=redis_url, db_url=f"sqlite:///{db}", key_prefix=prefix)
    first, _ = _start_worker(env)
    try:
        with EngineServices(config, workers=0, projector=False, due_waker=False, scheduler=False,
                            reaper=False) as submitter:
            submitter.publish_flow(flow_from_data({
                "format": "lockgate.flow/1", "id": "nap", "name": "nap", "inputs": {},
                "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                          {"id": "pause", "type": "queue", "config": {"delay": f"{DELAY_SECONDS:g}s"}},
                          {"id": "done", "type": "terminal", "config": {}}],
                "edges": [{"from": "start", "to": "pause"}, {"from": "pause", "to": "done"}]}))
            run_ids = [submitter.create_run("nap").run_id for _ in range(runs)]
            _wait(lambda: len(submitter.list_runs(status="waiting", limit=runs + 1)) == runs, 60, "every run to park")
        due_by = time.time() + DELAY_SECONDS
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(30)
    time.sleep(max(0.0, due_by - time.time()) + 0.5)
    spawned = time.time()
    second, ready = _start_worker(env)
    try:
        sql = sa.create_engine(f"sqlite:///{db}")
        _wait(lambda: len(_stamps(sql)) == runs, 60, "every overdue run to resume")
        delays = [(stamp - ready) * 1000 for stamp in _stamps(sql).values()]
        sql.dispose()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.delete(*keys)
    assert len(run_ids) == runs
    return {"runs": runs, "engine_start_s": round(ready - spawned, 2),
            "resume_after_start_ms": {"p50": round(statistics.median(delays), 1),
                                      "p99": round(_percentile(delays, 0.99), 1), "max": round(max(delays), 1)},
            "target_max_ms": 5000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--redis-url", default=os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    print(json.dumps(bench(args.runs, args.redis_url), indent=2))


if __name__ == "__main__":
    main()
