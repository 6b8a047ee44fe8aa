"""Engine throughput: N runs of a 5-node flow submitted through create_run() as fast as possible.

Flow: manual trigger -> set -> router -> set -> terminal. Embedded Redis (Valkey, unix socket,
AOF everysec) with SQLite, and the same flow on PostgreSQL beside it when one answers.
Prints JSON: runs/s, events/s, p50/p99 latency from create_run() to the run's terminal state in
the DB, peak RSS. Usage: python tests/bench/engine_throughput.py [--runs 3000] [--workers 2] [--db sqlite,postgres]
[--processes N]

With `--processes N` the engine is `lockgate worker --processes N --workers W` (N executor processes of W
threads and one projector process under a supervisor) and this process only submits: a run's end is the
moment its terminal change arrives on the batch channel (`live_batches`), which the projector publishes after
the commit.
Engine CPU then sums this process's CPU (create_run) and that of the supervisor's process tree (Redis
excluded, as in the one-process mode); RSS is the peak of the tree's total, sampled every 0.2 s. This
process's CPU includes its listener thread parsing every batch's summary (benchmark work, not the engine's):
`engine_cpu_ms_per_run_without_listener` leaves that thread's CPU while submitting out.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.gc_pauses import freeze_startup_objects
from engine.host import EngineServices
from engine.runtime.projection import BatchResult
from engine.runtime.transitions import TERMINAL
from tests.bench import process_tree

PG_ADMIN_URL = "postgresql+psycopg://root@127.0.0.1:5432/test"
TRACE_PATH = os.environ.get("LOCKGATE_BENCH_TRACE", "")
"""When set, each run of a `--processes` round is appended there: db, wall-clock ms it was created, latency ms."""

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


def _redis_cpu(client: Any) -> float:
    """Seconds of CPU the Redis server has used (user + system)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


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
    warm_ids: set[str] = set()

    def on_batch(result: BatchResult) -> None:
        now = time.perf_counter()
        events[0] += result.applied
        for run_id, status in result.terminal_runs:
            if run_id in warm_ids:  # the warm-up run's listener call may come after wait_for_run saw it end
                continue
            finished[run_id] = now
            statuses[run_id] = status
        if len(finished) >= runs:
            done.set()

    try:
        services.start()
        services.add_batch_listener(on_batch)
        services.publish_flow(flow_from_data(FLOW))
        warm = services.create_run("bench5", {"n": 0})
        warm_ids.add(warm.run_id)
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

        assert services.redis is not None
        probe = services.redis.client()
        redis_began = _redis_cpu(probe)
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
        redis_cpu = _redis_cpu(probe) - redis_began
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
            "redis_cpu_ms_per_run": round(redis_cpu * 1000 / runs, 3),
            "latency_ms": {"p50": round(_percentile(latencies, 0.5), 1), "p99": round(_percentile(latencies, 0.99), 1),
                           "mean": round(statistics.fmean(latencies), 1), "max": round(max(latencies), 1)},
        }
    finally:
        services.stop()
        if drop is not None:
            drop()


def _rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def bench_processes(db: str, runs: int, workers: int, processes: int, submitters: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lockgate-bench-"))
    drop = None
    db_url = None
    if db == "postgres":
        found = _pg_database()
        if found is None:
            return {"db": db, "skipped": "no PostgreSQL answers at 127.0.0.1:5432"}
        db_url, drop = found
    config = EngineConfig(data_dir=folder, db_url=db_url, key_prefix="bench")
    client = EngineServices(config, workers=0, projector=False, due_waker=False, scheduler=False, reaper=False)
    supervisor: subprocess.Popen[bytes] | None = None
    finished: dict[str, float] = {}
    statuses: dict[str, str] = {}
    events = [0]
    done = threading.Event()
    try:
        client.start()
        freeze_startup_objects()  # as every engine process does once it is up (`engine.cli.worker.run_engine`)
        assert client.redis is not None
        env = {**os.environ, "LOCKGATE_DATA_DIR": str(folder), "LOCKGATE_REDIS_URL": client.redis.url,
               "LOCKGATE_KEY_PREFIX": "bench", "LOCKGATE_DB_URL": db_url or "", "LOCKGATE_AUTO_MIGRATE": "1"}
        supervisor = subprocess.Popen([sys.executable, "-m", "app", "worker", "--processes", str(processes),
                                       "--workers", str(workers)], env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pubsub = client.redis.client().pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(client.keys.live_batches)

        listener_cpu = [0.0]
        """The listener thread's own CPU time so far (it parses every batch's summary: the benchmark's work)."""

        def listen() -> None:
            while not listening.is_set():
                listener_cpu[0] = time.thread_time()
                message = pubsub.get_message(timeout=0.2)
                if message is None:
                    continue
                now = time.perf_counter()
                for run_id, seq, status in json.loads(message["data"]):
                    if status in TERMINAL and run_id not in finished:
                        # A run's sequence counts its events without gaps, and the summary names each run's latest
                        # change: the terminal one's sequence is the run's number of events.
                        events[0] += seq
                        finished[run_id] = now
                        statuses[run_id] = status
                        if expected[0] and len(finished) >= expected[0]:
                            done.set()

        expected = [1]
        listening = threading.Event()
        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        client.publish_flow(flow_from_data(FLOW))
        warm = [client.create_run("bench5", {"n": n}).run_id for n in range(8)]  # every executor's first run
        expected[0] = len(warm)
        if not done.wait(120):
            raise TimeoutError("the warm-up runs did not finish; is `lockgate worker --processes` starting?")
        tree = process_tree.tree(supervisor.pid)  # Redis is this process's child, not the supervisor's
        done.clear()
        finished.clear()
        statuses.clear()
        events[0] = 0
        expected[0] = runs
        created: dict[str, float] = {}
        peak_rss = [_rss_mb(tree)]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.2):
                peak_rss[0] = max(peak_rss[0], _rss_mb(tree))

        threading.Thread(target=sample, daemon=True).start()

        def submit(numbers: range) -> None:
            for n in numbers:
                at = time.perf_counter()
                created[client.create_run("bench5", {"n": n}).run_id] = at

        redis_began = _redis_cpu(client.redis.client())
        cpu_tree_began = process_tree.cpu_seconds(tree)
        began = time.perf_counter()
        cpu_began = time.process_time()
        listener_began = listener_cpu[0]
        began_wall = time.time()
        threads = [threading.Thread(target=submit, args=(range(i, runs, submitters),)) for i in range(submitters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        submitted = time.perf_counter()
        cpu_submit = time.process_time() - cpu_began
        listener_submitting = listener_cpu[0] - listener_began
        if not done.wait(timeout=max(60.0, runs / 20)):
            raise TimeoutError(f"only {len(finished)} of {runs} runs finished")
        cpu_tree_ended = process_tree.cpu_seconds(tree)
        redis_cpu = _redis_cpu(client.redis.client()) - redis_began
        sampling.set()
        listening.set()
        ended = max(finished[run_id] for run_id in created)
        cpu_tree = sum(cpu_tree_ended[pid] - cpu_tree_began.get(pid, 0.0) for pid in cpu_tree_ended)
        by_role: dict[str, float] = {}
        for pid, seconds in cpu_tree_ended.items():
            role = process_tree.role(pid, supervisor.pid)
            by_role[role] = by_role.get(role, 0.0) + seconds - cpu_tree_began.get(pid, 0.0)
        latencies = [(finished[run_id] - created[run_id]) * 1000 for run_id in created]
        if TRACE_PATH:
            with open(TRACE_PATH, "a") as trace:
                for run_id in created:
                    trace.write(f"{db}\t{(created[run_id] - began) * 1000 + began_wall * 1000:.1f}\t"
                                f"{(finished[run_id] - created[run_id]) * 1000:.1f}\n")
        elapsed = ended - began
        ok = sum(1 for run_id in created if statuses.get(run_id) == "succeeded")
        return {
            "db": db,
            "runs": runs,
            "processes": processes,
            "workers_per_process": workers,
            "submitter_threads": submitters,
            "succeeded": ok,
            "seconds": round(elapsed, 3),
            "runs_per_s": round(runs / elapsed, 1),
            "events_per_s": round(events[0] / elapsed, 1),
            "submit_per_s": round(runs / (submitted - began), 1),
            "engine_cpu_ms_per_run": round((cpu_tree + cpu_submit) * 1000 / runs, 3),
            "cpu_ms_per_run": {"create_run": round(cpu_submit * 1000 / runs, 3),
                               "executors_and_projector": round(cpu_tree * 1000 / runs, 3),
                               "listener_while_submitting": round(listener_submitting * 1000 / runs, 3),
                               **{role: round(seconds * 1000 / runs, 3) for role, seconds in sorted(by_role.items())}},
            "redis_cpu_ms_per_run": round(redis_cpu * 1000 / runs, 3),
            "engine_cpu_ms_per_run_without_listener": round(
                (cpu_tree + cpu_submit - listener_submitting) * 1000 / runs, 3),
            "engine_rss_mb": {"processes": len(tree), "peak_total": round(peak_rss[0], 1)},
            "latency_ms": {"p50": round(_percentile(latencies, 0.5), 1), "p99": round(_percentile(latencies, 0.99), 1),
                           "mean": round(statistics.fmean(latencies), 1), "max": round(max(latencies), 1)},
        }
    finally:
        done.set()
        if supervisor is not None:
            supervisor.send_signal(signal.SIGTERM)
            try:
                supervisor.wait(15)
            except subprocess.TimeoutExpired:
                supervisor.kill()
                supervisor.wait()
        client.stop()
        if drop is not None:
            drop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--submitters", type=int, default=1, help="threads calling create_run() (default 1)")
    parser.add_argument("--db", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    parser.add_argument("--processes", type=int, default=None,
                        help="run the engine as `lockgate worker --processes N` (--workers threads each) and only "
                             "submit from here; default: every engine thread in this process")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for this process (Python's default is 0.005 s)")
    args = parser.parse_args(argv)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    names = [db.strip() for db in args.db.split(",") if db.strip()]
    if args.processes is not None:
        results = [bench_processes(db, args.runs, args.workers, args.processes, args.submitters) for db in names]
    else:
        results = [bench(db, args.runs, args.workers, args.submitters) for db in names]
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"benchmark": "engine_throughput", "flow_nodes": 5, "switch_interval": sys.getswitchinterval(),
                      "results": results,
                      "peak_rss_mb": round(peak_kb / 1024, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
