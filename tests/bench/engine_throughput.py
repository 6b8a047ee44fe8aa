"""Engine throughput: N runs of a 5-node flow submitted through create_run() as fast as possible.

Flow: manual trigger -> set -> router -> set -> terminal. Embedded Redis (Valkey, unix socket,
AOF everysec) with SQLite, and the same flow on PostgreSQL beside it when one answers.
Prints JSON: runs/s, events/s, p50/p99 latency from create_run() to the run's terminal state in
the DB, peak RSS. Usage: python tests/bench/engine_throughput.py [--runs 3000] [--workers 2] [--db sqlite,postgres]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.runtime.projection import BatchResult
from engine.runtime.services import EngineServices

PG_ADMIN_URL = "postgresql+psycopg://root@127.0.0.1:5432/test"

FLOW = {
    "format": "lockgate.flow/1",
    "id": "bench5",
    "name": "Five nodes",
    "inputs": {"n": {"type": "integer", "required": True}},
    "nodes": [
        {"id": "start", "type": "trigger.manual", "config": {}},
        {"id": "double", "type": "set", "config": {"values": {"twice": "{{ inputs.n * 2 }}"}}},
        {"id": "route", "type": "router", "config": {"branches": [{"port": "odd", "when": "{{ inputs.n % 2 }}"}]}},
        {"id": "label", "type": "set", "config": {"values": {"label": "n={{ inputs.n }} twice={{ state.twice }}"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.label }}"}},
    ],
    "edges": [
        {"from": "start", "to": "double"},
        {"from": "double", "to": "route"},
        {"from": "route", "port": "default", "to": "label"},
        {"from": "route", "port": "odd", "to": "label"},
        {"from": "label", "to": "done"},
    ],
}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _pg_database() -> tuple[str, Any] | None:
    try:
        import sqlalchemy as sa

        admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 2})
        name = f"lgbench_{uuid.uuid4().hex[:10]}"
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except Exception:
        return None

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", drop


def bench(db: str, runs: int, workers: int, submitters: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lockgate-bench-"))
    drop = None
    db_url = None
    if db == "postgres":
        found = _pg_database()
        if found is None:
            return {"db": db, "skipped": "no PostgreSQL answers at 127.0.0.1:5432"}
        db_url, drop = found
    services = EngineServices(EngineConfig(data_dir=folder, db_url=db_url, key_prefix="bench"), workers=workers)
    finished: dict[str, float] = {}
    statuses: dict[str, str] = {}
    events = [0]
    done = threading.Event()

    def on_batch(result: BatchResult) -> None:
        now = time.perf_counter()
        events[0] += result.applied
        for run_id, status in result.terminal_runs:
            finished[run_id] = now
            statuses[run_id] = status
        if len(finished) >= runs:
            done.set()

    try:
        services.start()
        services.batch_listeners.append(on_batch)
        services.publish_flow(flow_from_data(FLOW))
        warm = services.create_run("bench5", {"n": 0})
        services.wait_for_run(warm.run_id, timeout=30)
        done.clear()
        finished.clear()
        statuses.clear()
        events[0] = 0
        created: dict[str, float] = {}

        def submit(numbers: range) -> None:
            for n in numbers:
                at = time.perf_counter()
                created[services.create_run("bench5", {"n": n}).run_id] = at

        began = time.perf_counter()
        cpu_began = time.process_time()
        threads = [threading.Thread(target=submit, args=(range(i, runs, submitters),)) for i in range(submitters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        submitted = time.perf_counter()
        if not done.wait(timeout=max(60.0, runs / 20)):
            raise TimeoutError(f"only {len(finished)} of {runs} runs finished")
        ended = max(finished[run_id] for run_id in created)
        cpu = time.process_time() - cpu_began
        latencies = [(finished[run_id] - created[run_id]) * 1000 for run_id in created]
        elapsed = ended - began
        ok = sum(1 for run_id in created if statuses.get(run_id) == "succeeded")
        return {
            "db": db,
            "runs": runs,
            "workers": workers,
            "submitter_threads": submitters,
            "succeeded": ok,
            "seconds": round(elapsed, 3),
            "runs_per_s": round(runs / elapsed, 1),
            "events_per_s": round(events[0] / elapsed, 1),
            "submit_per_s": round(runs / (submitted - began), 1),
            "engine_cpu_ms_per_run": round(cpu * 1000 / runs, 3),
            "latency_ms": {"p50": round(_percentile(latencies, 0.5), 1), "p99": round(_percentile(latencies, 0.99), 1),
                           "mean": round(statistics.fmean(latencies), 1), "max": round(max(latencies), 1)},
        }
    finally:
        services.stop()
        if drop is not None:
            drop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--submitters", type=int, default=1, help="threads calling create_run() (default 1)")
    parser.add_argument("--db", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for this process (Python's default is 0.005 s)")
    args = parser.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    results = [bench(db.strip(), args.runs, args.workers, args.submitters) for db in args.db.split(",") if db.strip()]
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"benchmark": "engine_throughput", "flow_nodes": 5, "switch_interval": sys.getswitchinterval(),
                      "results": results,
                      "peak_rss_mb": round(peak_kb / 1024, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
