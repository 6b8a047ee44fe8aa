"""Benchmark: park N runs on a `queue` node with due times spread over S seconds, in a real engine process.

The engine is `lockgate worker` in a child process (its RSS is sampled from /proc); this process only
submits runs through `create_run()` and reads the store. Each run's flow is one of `--buckets` flows
whose queue delays step from `--lead` to `--lead + --seconds`, so due times spread over S seconds
and every run is parked before the first one falls due.

Reports: the engine's RSS idle, with all runs parked, and its peak while they wait (and the growth
per parked run), Redis memory per parked run (the stored state), resume lag after the due time
(p50/p99/max, from each run's due time to its queue step's completion), and resumes per second.

    .venv/bin/python tests/bench/parking.py                          # 10,000 runs over 60 s
    .venv/bin/python tests/bench/parking.py --runs 1000 --seconds 10 --lead 10

Redis: LOCKGATE_REDIS_URL or --redis-url (default the machine's 127.0.0.1:6379), SQLite in a temp
data folder. Prints one JSON object. Target: p99 lag < 100 ms.
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
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.transport.connection import redis_client
from engine.transport.keys import Keyspace

ROOT = Path(__file__).resolve().parents[2]


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _warm_flow() -> dict[str, Any]:
    return {"format": "lockgate.flow/1", "id": "warm", "name": "warm-up", "inputs": {},
            "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                      {"id": "done", "type": "terminal", "config": {}}],
            "edges": [{"from": "start", "to": "done"}]}


def _flow(index: int, delay: float) -> dict[str, Any]:
    return {"format": "lockgate.flow/1", "id": f"park{index}", "name": f"park {index}", "inputs": {},
            "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                      {"id": "pause", "type": "queue", "config": {"delay": f"{delay * 1000:.0f}ms"}},
                      {"id": "done", "type": "terminal", "config": {}}],
            "edges": [{"from": "start", "to": "pause"}, {"from": "pause", "to": "done"}]}


class RssSampler:
    """Samples a process's resident set size (MB) from /proc every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.samples.append((time.time(), self.rss()))
            except OSError:
                return

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak_between(self, start: float, end: float) -> float:
        return max((rss for at, rss in self.samples if start <= at <= end), default=0.0)


def _count(sql: sa.Engine, status: str) -> int:
    with sql.connect() as conn:
        return int(conn.execute(sa.text("select count(*) from runs where status = :s"), {"s": status}).scalar() or 0)


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"parking bench: timed out waiting for {what}")
        time.sleep(0.2)


def bench(runs: int, seconds: float, lead: float | None, buckets: int, workers: int,
          redis_url: str) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lockgate-park-bench-"))
    prefix = f"lgpark-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "LOCKGATE_DATA_DIR": str(folder), "LOCKGATE_REDIS_URL": redis_url,
           "LOCKGATE_KEY_PREFIX": prefix, "LOCKGATE_DB_URL": ""}
    config = EngineConfig(data_dir=folder, redis_url=redis_url, db_url=None, key_prefix=prefix)
    client: Any = redis_client(redis_url)
    redis_before = int(client.info("memory")["used_memory"])
    engine = subprocess.Popen([sys.executable, "-m", "app.main", "worker", "--workers", str(workers)], env=env,
                              cwd=ROOT, stderr=subprocess.DEVNULL)
    submitter = EngineServices(config, workers=0, projector=False, due_waker=False).start()
    sampler = RssSampler(engine.pid)
    try:
        assert submitter.sql is not None
        sql = submitter.sql
        _wait_for(lambda: client.get(Keyspace(prefix).projector_lease) is not None, 30, "the engine to start")
        if lead is None:
            # Submit-and-park speed on this machine now, so every run is parked before the first is due.
            submitter.publish_flow(flow_from_data(_warm_flow()))
            warm = min(500, max(50, runs // 20))
            t0 = time.time()
            for _ in range(warm):
                submitter.create_run("warm")
            _wait_for(lambda: _count(sql, "succeeded") >= warm, 120, "the warm-up runs")
            lead = 5 + 1.5 * runs * (time.time() - t0) / warm
        for index in range(buckets):
            submitter.publish_flow(flow_from_data(_flow(index, lead + seconds * index / max(buckets - 1, 1))))
        time.sleep(1.0)
        warmed = _count(sql, "succeeded")
        rss_idle = sampler.rss()
        sampler.start()
        began = time.time()
        for number in range(runs):
            submitter.create_run(f"park{number % buckets}")
        _wait_for(lambda: _count(sql, "waiting") + _count(sql, "succeeded") >= runs + warmed, lead + 300,
                  "every run to park")
        all_parked = time.time()
        with sql.connect() as conn:
            waiting = int(conn.execute(sa.text("select count(*) from runs where status = 'waiting'")).scalar() or 0)
        rss_parked = sampler.rss()
        redis_parked = int(client.info("memory")["used_memory"])
        _wait_for(lambda: _count(sql, "succeeded") >= runs + warmed, seconds + lead + 300, "every run to finish")
        finished = time.time()
        sampler.stop()
        delays = {f"park{index}": round((lead + seconds * index / max(buckets - 1, 1)) * 1000) / 1000
                  for index in range(buckets)}
        with sql.connect() as conn:
            steps = conn.execute(sa.text(
                "select r.flow_id, s.started_at, s.finished_at from steps s join runs r on r.id = s.run_id "
                "where s.step = 'pause'")).all()
        from datetime import UTC, datetime

        def epoch(value: Any) -> float:
            stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
            return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()

        # Due time = when the queue step started + its delay (the body adds the delay to the same clock).
        timed = [(epoch(started) + delays[flow_id], epoch(done)) for flow_id, started, done in steps if done]
        first_due = min(due for due, _ in timed)
        lags = [(done - due) * 1000 for due, done in timed]
        resumed_at = sorted(done for _, done in timed)
        per_second: dict[int, int] = {}
        for at in resumed_at:
            per_second[int(at)] = per_second.get(int(at), 0) + 1
        span = (resumed_at[-1] - resumed_at[0]) if len(resumed_at) > 1 else 0.0
        return {
            "bench": "parking", "runs": runs, "seconds": seconds, "lead_s": round(lead, 1), "workers": workers,
            "submit_and_park_s": round(all_parked - began, 2),
            "parked_at_once": waiting,
            "engine_rss_mb": {"idle": round(rss_idle, 1), "all_parked": round(rss_parked, 1),
                              "peak_while_waiting": round(sampler.peak_between(began, first_due), 1),
                              "peak_overall": round(sampler.peak_between(began, finished), 1)},
            "engine_rss_kb_per_parked_run": round((rss_parked - rss_idle) * 1024 / max(runs, 1), 2),
            "redis_bytes_per_parked_run": round((redis_parked - redis_before) / max(runs, 1)),
            "resume_lag_ms": {"p50": round(statistics.median(lags), 1), "p99": round(_percentile(lags, 0.99), 1),
                              "max": round(max(lags), 1), "measured": len(lags)} if lags else None,
            "resumes_per_s": {"mean": round(len(resumed_at) / span, 1) if span else None,
                              "peak_1s": max(per_second.values(), default=0)},
            "target_p99_ms": 100,
        }
    finally:
        sampler.stop() if sampler._thread.is_alive() else None
        submitter.stop()
        engine.send_signal(signal.SIGTERM)
        try:
            engine.wait(30)
        except subprocess.TimeoutExpired:
            engine.kill()
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for start in range(0, len(keys), 1000):
            client.delete(*keys[start:start + 1000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="spread of the due times")
    parser.add_argument("--lead", type=float, default=None,
                        help="delay of the earliest bucket (default: 1.5x the measured time to submit every run)")
    parser.add_argument("--buckets", type=int, default=120, help="flows with distinct delays")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-url", default=os.environ.get("LOCKGATE_REDIS_URL") or "redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    print(json.dumps(bench(args.runs, args.seconds, args.lead, args.buckets, args.workers, args.redis_url), indent=2))


if __name__ == "__main__":
    main()
