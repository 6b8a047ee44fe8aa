"""Benchmark: scale-out over real hosts. Three hosts are network namespaces, each running one
`lockgate worker --workers N` in its own network and UTS namespace; the data tier is a fourth namespace with its
own PostgreSQL (initdb/pg_ctl into a temporary folder) and redis-server (appendonly yes). Built and torn down
by `tests.scaleout` (needs root and iproute2).

1. Scaling: runs/s of trigger -> POST (not idempotent) -> end with 1, 2 and 3 hosts against the same data
   tier, over the middle 80% of `--scale-runs` runs created as fast as the client (this process) can. On a
   2-core machine the hosts share the cores, so the factor says what one more process buys there, not on
   separate machines; `cores` is reported next to it.
2. Failover and reclaim, with all three hosts, under `--runs` runs of trigger -> queue 1 s -> POST -> end
   created at `--rate` per second: `--cuts` times the active projector's host is cut off
   (`ip link set ... down` at the switch): seconds until another host holds the lease (`lease_s`) and until
   its first applied batch (`apply_s`); the host is brought back and must leave the lease to the new holder
   (`yielded`). After the first cut, a worker host that is neither of those two is SIGKILLed while it holds
   jobs: how many were reclaimed by the others and how long after the kill the last was (`reclaim_s`); the host
   is then started again. That happens after each of the first `--kills` cuts. The POST is answered `--post-ms`
   after it is counted in this phase (in the scaling phase at once), so a host holds jobs when it dies.
   Then: runs lost (not ended), POSTs sent twice, endings, and whether SQL equals a rebuild from the events
   journal.

The failover time is bounded below by the projector lease (`LEASE_SECONDS`, 5 s) plus a standby's poll
(a fifth of it); reclaim by the heartbeat timeout given to the workers (`--heartbeat-timeout`).

    sudo PYTHONPATH=. .venv/bin/python tests/bench/scaleout.py
    sudo PYTHONPATH=. .venv/bin/python tests/bench/scaleout.py --runs 500 --cuts 5 --scale-runs 600

Prints one JSON object; `engine_errors` counts the ERROR lines of the workers' logs by logger
(`--keep-logs DIR` keeps the logs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from engine.runtime.projector import LEASE_SECONDS
from engine.runtime.transitions import TERMINAL
from engine.store.models import Run
from tests.chaos.conftest import effect_flow
from tests.scaleout.cluster import (
    Cluster,
    Failover,
    Feeder,
    HostProcess,
    LeaseWatch,
    Reclaim,
    cut_active_projector,
    kill_a_worker_host,
    wait_until,
)


def _ended(cluster: Cluster, run_ids: list[str]) -> int:
    with cluster.deployment.sql.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(Run).where(
            Run.id.in_(run_ids), Run.status.in_(TERMINAL))).scalar() or 0)


def scaling(cluster: Cluster, hosts: int, runs: int) -> float:
    """Runs/s of the first `hosts` hosts, over the middle 80% of `runs` runs created before their workers start
    (so neither the client's create rate nor process start-up is what is measured)."""
    handle = cluster.deployment.handle
    run_ids = [handle.create_run("first").run_id for _ in range(runs)]
    cluster.start_workers(cluster.host_names()[:hosts])
    low, high = int(runs * 0.1), int(runs * 0.9)
    marks: dict[int, float] = {}
    deadline = time.monotonic() + 600
    while len(marks) < 2:
        ended = _ended(cluster, run_ids)
        now = time.monotonic()
        for mark in (low, high):
            if ended >= mark and mark not in marks:
                marks[mark] = now
        if now > deadline:
            raise RuntimeError(f"{hosts} host(s): {ended} of {runs} runs ended after 600 s")
        time.sleep(0.02)
    wait_until(lambda: _ended(cluster, run_ids) == runs, "every run ends", cluster, guard=600)
    for host in list(cluster.running):
        cluster.stop_worker(host)
    return (high - low) / max(marks[high] - marks[low], 1e-9)


def _spread(samples: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(samples), 3), "max": round(max(samples), 3)} if samples else {}


def outcome(cluster: Cluster, run_ids: list[str], grace: float) -> dict[str, Any]:
    """What the promises say, counted rather than asserted."""
    deadline = time.monotonic() + grace
    while _ended(cluster, run_ids) < len(run_ids) and time.monotonic() < deadline:
        time.sleep(0.1)
    runs = cluster.deployment.runs(run_ids)
    assert cluster.data.counter is not None
    hits = cluster.data.counter.hits()
    endings: dict[str, int] = {}
    for run in runs.values():
        ending = f"{run['status']}:{run['error_type'] or ''}"
        endings[ending] = endings.get(ending, 0) + 1
    try:
        cluster.deployment.check_projection()
        equal = True
    except AssertionError:
        equal = False
    return {"runs": len(run_ids),
            "lost": sum(1 for run_id in run_ids if runs.get(run_id, {}).get("status") not in TERMINAL),
            "effects_twice": sum(1 for run_id in run_ids if hits.get(f"/effect/{run_id}", 0) > 1),
            "succeeded_without_effect": sum(1 for run_id, run in runs.items() if run["status"] == "succeeded"
                                            and hits.get(f"/effect/{run_id}", 0) != 1),
            "endings": endings, "projection_equals_rebuild": equal}


def chaos(cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    for host in cluster.host_names():
        if host not in cluster.running:
            cluster.start_worker(host)
    assert cluster.data.counter is not None
    cluster.data.counter.answer_after(args.post_ms / 1000)
    failovers: list[Failover] = []
    reclaims: list[Reclaim] = []
    restarted: list[HostProcess] = []
    watch = LeaseWatch(cluster)
    with watch.running():
        feeder = Feeder(cluster, "parked", args.runs, args.rate).start()
        wait_until(lambda: cluster.lease_host() in cluster.running and cluster.journal_length() > 0,
                   "a projector on one of the hosts applies events", cluster)
        for cut in range(args.cuts):
            if not feeder.feeding:
                raise RuntimeError(f"the load ended before cut {cut + 1}: raise --runs or lower --rate")
            failover = cut_active_projector(cluster)
            failovers.append(failover)
            print(f"cut {cut + 1}: {failover}", file=sys.stderr)
            if cut < args.kills:
                reclaim = kill_a_worker_host(cluster, spare={failover.cut_host, failover.new_host})
                reclaims.append(reclaim)
                print(f"kill: {reclaim}", file=sys.stderr)
                restarted.append(cluster.launch(reclaim.host))  # it comes up while the load goes on
        for process in restarted:
            cluster.ready(process)
        run_ids = feeder.join()
        result = outcome(cluster, run_ids, args.grace)
        ended = time.monotonic()
    bounds = [f.cut_at for f in failovers[1:]] + [ended]
    return {
        **result,
        "failover_lease_s": _spread([f.lease_seconds for f in failovers]),
        "failover_apply_s": _spread([f.apply_seconds for f in failovers]),
        "failovers": [{"cut": f.cut_host, "new": f.new_host, "lease_s": round(f.lease_seconds, 3),
                       "apply_s": round(f.apply_seconds, 3),
                       "back_s": round(f.back_seconds, 3), "yielded": f.yielded(watch, until)}
                      for f, until in zip(failovers, bounds, strict=True)],
        "cut_hosts_yielded": all(f.yielded(watch, until) for f, until in zip(failovers, bounds, strict=True)),
        "reclaim_s": _spread([r.seconds for r in reclaims]),
        "jobs_held_by_killed_hosts": sum(r.held for r in reclaims),
        "jobs_reclaimed_elsewhere": sum(r.reclaimed for r in reclaims),
        "kills": [{"host": r.host, "held": r.held, "reclaimed_elsewhere": r.reclaimed, "seconds": round(r.seconds, 3)}
                  for r in reclaims],
    }


def engine_errors(folder: Path) -> dict[str, int]:
    """ERROR lines the worker processes logged, by logger (an orphan sweep failing a run, say)."""
    found: dict[str, int] = {}
    for log in sorted(folder.glob("worker-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("ERROR "):
                name = line.split()[1].rstrip(":")
                found[name] = found.get(name, 0) + 1
    return found


def bench(args: argparse.Namespace) -> dict[str, Any]:
    recovery = {"LOCKGATE_HEARTBEAT_TIMEOUT": str(args.heartbeat_timeout),
                "LOCKGATE_JOB_IDLE_TIMEOUT": str(args.idle_timeout)}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lockgate-scaleout-") as folder:
        cluster = Cluster(Path(folder), hosts=3, worker_threads=args.workers, worker_env=recovery).open()
        try:
            assert cluster.data.counter is not None
            cluster.deployment.publish(effect_flow(cluster.data.counter.url))
            cluster.publish_parked_flow()
            rates = {str(hosts): round(scaling(cluster, hosts, args.scale_runs), 1) for hosts in (1, 2, 3)}
            print(f"runs/s by hosts: {rates}", file=sys.stderr)
            report = chaos(cluster, args)
            report["engine_errors"] = engine_errors(Path(folder))
            if args.keep_logs:
                shutil.copytree(folder, args.keep_logs, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("data"))
        except BaseException:
            print(cluster.deployment.logs()[-6000:], file=sys.stderr)
            print("--- PostgreSQL sessions\n" + cluster.data.activity(), file=sys.stderr)
            server_log = cluster.data.pg_dir / "server.log"
            if server_log.exists():
                print("--- PostgreSQL\n" + server_log.read_text(errors="replace")[-6000:], file=sys.stderr)
            raise
        finally:
            cluster.close()
    one = rates["1"]
    return {
        "bench": "scaleout", "cores": os.cpu_count(),
        "load_average_before_after": [round(load_before[0], 1), round(os.getloadavg()[0], 1)],
        "worker_threads_per_host": args.workers,
        "data_tier": "PostgreSQL + redis-server (appendonly yes) in their own namespace",
        "scale_runs": args.scale_runs, "runs_per_s_by_hosts": rates,
        "scaling_factor": {hosts: round(rate / one, 2) for hosts, rate in rates.items()},
        "lease_seconds": LEASE_SECONDS, "heartbeat_timeout_s": args.heartbeat_timeout,
        "idle_timeout_s": args.idle_timeout, "cuts": args.cuts, "kills": args.kills,
        "rate_per_s": args.rate, "post_ms": args.post_ms, **report,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="runs of the failover and reclaim phase")
    parser.add_argument("--rate", type=float, default=3.0, help="runs created per second in that phase")
    parser.add_argument("--cuts", type=int, default=5)
    parser.add_argument("--kills", type=int, default=3, help="worker hosts SIGKILLed, one after each of the first cuts")
    parser.add_argument("--post-ms", type=float, default=200.0,
                        help="the counting server answers each POST this long after counting it (failover phase)")
    parser.add_argument("--scale-runs", type=int, default=600, help="runs per host count in the scaling phase")
    parser.add_argument("--workers", type=int, default=2, help="worker threads per host")
    parser.add_argument("--heartbeat-timeout", type=float, default=5.0)
    parser.add_argument("--idle-timeout", type=float, default=8.0)
    parser.add_argument("--keep-logs", metavar="DIR", default=None, help="copy the worker logs there")
    parser.add_argument("--grace", type=float, default=120.0, help="seconds the runs get to end after the load")
    args = parser.parse_args()
    print(json.dumps(bench(args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
