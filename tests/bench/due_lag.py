"""Benchmark: wake lag of the parked-run due set.

Schedules N members with due times spread evenly over S seconds, runs W due wakers on the system
clock, and reports how late each member was delivered after its due time (p50/p99/max), deliveries
per second, the wakers' loop wake-ups, and peak RSS of this process and of the Redis server.

    .venv/bin/python tests/bench/due_lag.py                 # 10,000 members over 60 s, embedded Valkey
    .venv/bin/python tests/bench/due_lag.py --seconds 10    # shorter
    .venv/bin/python tests/bench/due_lag.py --redis-url redis://127.0.0.1:6379/0 --wakers 3

Prints one JSON object. Target: p99 lag < 100 ms.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from engine.transport.connection import redis_client
from engine.transport.due import DueItem, DueSet, DueWaker
from engine.transport.embedded import EmbeddedRedis
from engine.transport.keys import Keyspace


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _server_peak_rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def run(members: int, seconds: float, wakers: int, redis_url: str | None, lead: float) -> dict[str, object]:
    server: EmbeddedRedis | None = None
    folder = None
    if redis_url is None:
        folder = tempfile.mkdtemp(prefix="lg-due-")
        server = EmbeddedRedis(folder).start()
        redis_url = server.url
    keyspace = Keyspace(f"bench-{uuid.uuid4().hex[:8]}")
    client = redis_client(redis_url)
    lags: list[float] = []
    lock = threading.Lock()
    done = threading.Event()

    def deliver(items: list[DueItem]) -> None:
        now = time.time()
        with lock:
            lags.extend(now - item.due_at for item in items)
            if len(lags) >= members:
                done.set()

    running = [DueWaker(DueSet(redis_client(redis_url), keyspace), deliver).start() for _ in range(wakers)]
    try:
        first_due = time.time() + lead
        step = seconds / members
        due_times = {f"run-{i:06d}": first_due + i * step for i in range(members)}
        scheduling_started = time.perf_counter()
        schedule = DueSet(client, keyspace)
        names = list(due_times)
        for start in range(0, members, 1_000):
            schedule.schedule_many({name: due_times[name] for name in names[start : start + 1_000]})
        schedule_seconds = time.perf_counter() - scheduling_started
        if not done.wait(timeout=lead + seconds + 30):
            raise SystemExit(f"only {len(lags)} of {members} members were delivered")
        span = time.time() - first_due
    finally:
        for waker in running:
            waker.stop()
        server_rss = _server_peak_rss_mb(server.pid if server else None)
        client.delete(keyspace.due)
        if server is not None:
            server.stop()
    return {
        "benchmark": "due_lag",
        "members": members,
        "seconds": seconds,
        "wakers": wakers,
        "redis": "embedded valkey" if folder else redis_url,
        "schedule_per_s": round(members / schedule_seconds),
        "lag_ms_p50": round(statistics.median(lags) * 1000, 2),
        "lag_ms_p99": round(_percentile(lags, 0.99) * 1000, 2),
        "lag_ms_max": round(max(lags) * 1000, 2),
        "early_deliveries": sum(1 for lag in lags if lag < 0),
        "deliveries_per_s": round(members / span, 1),
        "loop_wakes": sum(waker.wakes for waker in running),
        "loop_wakes_per_s": round(sum(waker.wakes for waker in running) / span, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "redis_peak_rss_mb": server_rss,
        "target_p99_ms": 100,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="due times spread over this many seconds")
    parser.add_argument("--wakers", type=int, default=1)
    parser.add_argument("--lead", type=float, default=1.0, help="seconds from now to the first due time")
    parser.add_argument("--redis-url", default=None, help="default: an embedded Valkey in a temp folder")
    args = parser.parse_args()
    print(json.dumps(run(args.members, args.seconds, args.wakers, args.redis_url, args.lead)))


if __name__ == "__main__":
    main()
