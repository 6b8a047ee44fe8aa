"""Benchmark: exactly once under chaos. Runs with parks and non-idempotent POSTs while worker processes, the
projector and Valkey are SIGKILLed at random; then counts what was lost or done twice.

Two `lockgate worker --workers 2` processes (each also a projector standby; the lease makes one active)
run against one data folder, forked by the crash suite's launcher (`tests.chaos.conftest`). Runs of two
flows, trigger -> POST -> end and trigger -> queue 1s -> POST -> end, are submitted evenly over the kill
window; the POST goes to a counting HTTP server at `/effect/<run id>` that answers `--post-ms` after
counting, and is not idempotent, so a second one is a broken promise. Every 0.5-1.5 s (`--kill-every`) a
victim is SIGKILLed: a worker process, the worker process holding the projector lease, or Valkey; each is
restarted 0.2-1.0 s later (by this script; with `--redis folder`, a killed Valkey is restarted by the workers' own
keepers). A worker process that exits on its own is started again, as a service manager would.

Seeded: the seed fixes the kill schedule (times, victim kinds, which process, restart delays) and the run
mix; process timing is the machine's, so the runs the kills land on differ between rounds.

    PYTHONPATH=. .venv/bin/python tests/bench/chaos.py --runs 300 --kills 20 --seed 1
    PYTHONPATH=. .venv/bin/python tests/bench/chaos.py --runs 300 --kills 20 --seed 2 --db postgres
    # issue 10's experiment: parked flow only, worker kills only, Valkey owned by the workers of the folder
    PYTHONPATH=. .venv/bin/python tests/bench/chaos.py --redis folder --victims worker --mix parked

Valkey is the embedded server (`EmbeddedRedis`, AOF everysec) in the data folder: by default this script
starts it and the workers use its URL; `--redis folder` lets the workers start and keep it as the app does.
SQLite in the data folder, or `--db postgres`: a fresh database on 127.0.0.1:5432 (LOCKGATE_TEST_PG_URL).
Recovery thresholds are the engine's defaults unless `--heartbeat-timeout` / `--idle-timeout` are given.

Prints one JSON object. `recovery_s`: for every kill and every run in flight in the victim at that moment,
the seconds from the kill until the projector applied that run's next event produced after the kill (for
runs whose events the projector victim had not yet applied: until their next event was applied).
In flight: a worker process's running jobs (`running_jobs` entries under its consumer names); for Valkey,
every run with a running entry or a job on the jobs stream; the projector, runs with unprojected events.
`per_run_hit_once` keeps the samples whose run no later kill also caught before it progressed. Kind
`projector` is a worker process that held the projector lease when it was killed. Also reported: runs lost
(not ended `--grace` s after the chaos, with what Redis still holds for each), effects twice,
`step_not_idempotent` endings, other endings, whether SQL equals a rebuild from the events journal, whether
a Valkey restart lost an acknowledged stream entry, and how long worker processes took to start.
Target at 300 runs x 20 kills: 0 lost, 0 effects twice, recovery p99 < 5 s.
"""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import os
import random
import shutil
import signal
import socket
import statistics
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.runtime.emitter import EVENT_FIELD, entry_events
from engine.runtime.transitions import TERMINAL
from engine.transport.connection import redis_client
from engine.transport.embedded import EmbeddedRedis
from tests.chaos.conftest import Deployment, EffectCounter, Zygote, effect_flow

KINDS = ("worker", "projector", "valkey")
WEIGHTS = {"worker": 2, "projector": 1, "valkey": 1}
FLOWS = {"first": None, "parked": "1s"}
PROCESSES = 2
RESTART_SECONDS = 0.5
"""A worker process that exited on its own is started again this long after it exited."""
STREAMS = ("jobs", "events", "events_journal")
"""Streams whose last generated id must survive a Valkey restart (an acknowledged XADD is never undone)."""


@dataclass(frozen=True)
class PlannedKill:
    at: float
    """Seconds after the start of the chaos."""
    kind: str
    pick: float
    """Which live worker process, as a fraction of those alive."""
    restart_after: float


@dataclass(frozen=True)
class Plan:
    kills: list[PlannedKill]
    runs: list[tuple[float, str]]
    """(seconds after the start, flow id) per run."""
    victims: frozenset[str]


def plan(seed: int, runs: int, kills: int, victims: list[str], mix: list[str],
         every: tuple[float, float] = (0.5, 1.5)) -> Plan:
    """The whole schedule from one seed, drawn in a fixed order whatever happens at run time."""
    rng = random.Random(seed)
    at = 0.0
    planned = []
    for _ in range(kills):
        at += rng.uniform(*every)
        kind = rng.choices(victims, [WEIGHTS[v] for v in victims])[0]
        planned.append(PlannedKill(round(at, 3), kind, rng.random(), round(rng.uniform(0.2, 1.0), 3)))
    window = at + 0.5
    return Plan(planned, [(window * index / max(runs, 1), rng.choice(mix)) for index in range(runs)],
                frozenset(victims))


@dataclass
class Kill:
    at: float
    kind: str
    pid: int | None
    runs_new: set[str] = field(default_factory=set)
    """Runs in flight in the victim: recovered at the projection of their next event produced after the kill."""
    runs_applied: set[str] = field(default_factory=set)
    """Runs with events not yet projected: recovered at the projection of their next event."""
    note: str = ""


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"p50": None, "p99": None, "max": None, "samples": 0}
    return {"p50": round(statistics.median(values), 3), "p99": round(_percentile(values, 0.99), 3),
            "max": round(max(values), 3), "samples": len(values)}


class Valkey:
    """The data folder's Valkey: started and restarted here, or (`--redis folder`) by the workers."""

    def __init__(self, folder: Path, owned: bool) -> None:
        self.server = EmbeddedRedis(folder)
        self.owned = owned
        self.down = False

    def pid(self) -> int | None:
        if self.owned:
            return self.server.pid
        try:
            return int(self.server.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None

    def kill(self) -> int | None:
        pid = self.pid()
        if pid is None:
            return None
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        if self.owned:
            deadline = time.monotonic() + 5
            while self.server.owned and time.monotonic() < deadline:  # `owned` polls, which reaps it
                time.sleep(0.01)
        self.down = True
        return pid

    def restart(self) -> None:
        if self.owned:
            self.server.start()
        self.wait_answering(30)
        self.down = False

    def wait_answering(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.server.answers():
            if time.monotonic() > deadline:
                raise SystemExit(f"chaos bench: Valkey in {self.server.data_dir} did not answer in {timeout:g}s")
            time.sleep(0.02)


class Cluster:
    """The worker processes and Valkey of one deployment, and what each holds at a given moment."""

    def __init__(self, deployment: Deployment, valkey: Valkey) -> None:
        self.deployment = deployment
        self.valkey = valkey
        self.keys = deployment.handle.keys
        self.host = socket.gethostname()
        self.probe = redis_client(deployment.redis_url, socket_timeout=2, socket_connect_timeout=1)
        self.pids: list[int | None] = [None] * PROCESSES
        self.started = [0.0] * PROCESSES
        self.exit_codes: list[int | None] = []
        self.self_exits: list[int] = []
        """Exit codes of worker processes that ended without being killed here."""
        self._exited: dict[int, float] = {}
        """Slot -> when the process that exited on its own there is started again."""
        self.ready: dict[int, float] = {}
        """Process id -> seconds from its start to holding its consumer names."""
        self.none_ready_s = 0.0
        """Time during which no worker process was up (all killed, restarting or starting)."""
        self._last_look = 0.0

    def start(self, slot: int) -> None:
        if self.pids[slot] is None:
            self.pids[slot] = self.deployment.start()
            self.started[slot] = time.monotonic()

    def supervise(self) -> None:
        """Start again, as a service manager would, a worker process that exited on its own (`lockgate worker`
        exits when Redis does not answer at its start)."""
        now = time.monotonic()
        for slot, pid in enumerate(self.pids):
            code = None if pid is None else self.deployment.zygote.wait(pid, 0)
            if code is not None:
                self.self_exits.append(code)
                self.pids[slot] = None
                self._exited[slot] = now + RESTART_SECONDS
            if slot in self._exited and now >= self._exited[slot]:
                del self._exited[slot]
                self.start(slot)
        self._note_ready()
        if self._last_look and not any(pid in self.ready for pid in self.alive()):
            self.none_ready_s += now - self._last_look
        self._last_look = now

    def _note_ready(self) -> None:
        """How long each started process took to take its consumer names (then it drains its predecessor's jobs)."""
        waiting = [(slot, pid) for slot, pid in enumerate(self.pids) if pid is not None and pid not in self.ready]
        for slot, pid in waiting:
            try:
                if self.names_of(pid):
                    self.ready[pid] = time.monotonic() - self.started[slot]
            except redis.RedisError:
                return

    def alive(self) -> list[int]:
        return [pid for pid in self.pids if pid is not None]

    def kill_worker(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        # Reaped at once: a zombie still answers kill(pid, 0), and its successor would not see it gone.
        self.exit_codes.append(self.deployment.zygote.wait(pid, 5))
        self.pids[self.pids.index(pid)] = None

    def lease_pid(self) -> int | None:
        try:
            raw: Any = self.probe.get(self.keys.projector_lease)
        except redis.RedisError:
            return None
        parts = raw.decode().split(":") if raw else []
        return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None

    def names_of(self, pid: int) -> set[str]:
        slots: Any = self.probe.mget([self.keys.consumer_slot(self.host, index) for index in range(4 * PROCESSES)])
        return {f"{self.host}:w{index}" for index, raw in enumerate(slots)
                if raw and raw.decode().partition(":")[0] == str(pid)}

    def running(self, names: set[str] | None) -> set[str]:
        """Runs with a running entry (under one of `names`, or anyone's)."""
        entries: Any = self.probe.hgetall(self.keys.running_jobs)
        held = (orjson.loads(raw) for raw in entries.values())
        return {entry["run"] for entry in held if names is None or entry["worker"] in names}

    def queued(self) -> set[str]:
        entries: Any = self.probe.xrange(self.keys.jobs, count=10_000)
        return {orjson.loads(fields[b"j"])["run_id"] for _id, fields in entries if b"j" in fields}

    def unprojected(self) -> set[str]:
        entries: Any = self.probe.xrange(self.keys.events, count=10_000)
        return {orjson.loads(raw)["run_id"] for _id, fields in entries for raw in entry_events(fields) if raw}

    def last_ids(self) -> dict[str, str]:
        ids = {}
        for stream in STREAMS:
            info: Any = self.probe.xinfo_stream(getattr(self.keys, stream))
            last = info["last-generated-id"]
            ids[stream] = last.decode() if isinstance(last, bytes) else str(last)
        return ids

    def aof(self) -> dict[str, Any]:
        info: Any = self.probe.info("persistence")
        return {name: info.get(name) for name in ("aof_buffer_length", "aof_pending_bio_fsync", "aof_delayed_fsync",
                                                  "aof_last_write_status")}


def _stream_id(text: str) -> tuple[int, int]:
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


class Chaos:
    """Carries out a plan: the submitter thread creates runs, this thread kills and restarts."""

    def __init__(self, cluster: Cluster, plan: Plan, gate: threading.Lock) -> None:
        self.cluster = cluster
        self.plan = plan
        self.gate = gate
        self.kills: list[Kill] = []
        self.created: list[str] = []
        self.create_errors: list[str] = []
        self.valkey_restarts: list[dict[str, Any]] = []
        self._valkey_before: dict[str, str] = {}
        self._valkey_killed = 0.0
        self.began = 0.0

    def submit(self, began: float) -> None:
        deployment = self.cluster.deployment
        for at, flow_id in self.plan.runs:
            time.sleep(max(0.0, began + at - time.time()))
            for _try in range(60):
                with self.gate:
                    try:
                        self.created.append(deployment.handle.create_run(flow_id).run_id)
                        break
                    except redis.RedisError as exc:
                        self.create_errors.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.5)

    def run(self) -> None:
        self.began = began = time.time()
        submitter = threading.Thread(target=self.submit, args=(began,), name="chaos-submitter", daemon=True)
        submitter.start()
        actions: list[tuple[float, int, str, Any]] = [(began + k.at, i, "kill", k)
                                                      for i, k in enumerate(self.plan.kills)]
        heapq.heapify(actions)
        counter = len(actions)
        while actions:
            at, _n, action, arg = heapq.heappop(actions)
            while time.time() < at:
                self.cluster.supervise()
                time.sleep(min(0.05, max(0.0, at - time.time())))
            if action == "kill":
                restart = self.kill(arg)
                counter += 1
                if restart is None:  # the victim is down already: once it is back
                    heapq.heappush(actions, (time.time() + 0.2, counter, "kill", arg))
                else:
                    heapq.heappush(actions, (time.time() + arg.restart_after, counter, "restart", restart))
            elif action == "restart" and arg == "valkey":
                self.restart_valkey()
            elif action == "restart":
                self.cluster.start(int(arg))
        submitter.join()

    def kill(self, planned: PlannedKill) -> str | None:
        """Kill the planned victim (a worker process instead of Valkey while that is down, when workers may be
        victims); returns what to restart (`valkey` or a process slot), or None when every possible victim is
        down already."""
        cluster = self.cluster
        if planned.kind == "valkey" and not cluster.valkey.down:
            return self.kill_valkey()
        alive = cluster.alive()
        if not alive or (planned.kind == "valkey" and self.plan.victims == {"valkey"}):
            return None
        holder = cluster.lease_pid()
        victim = holder if planned.kind == "projector" and holder in alive else alive[int(planned.pick * len(alive))]
        assert victim is not None
        slot = cluster.pids.index(victim)
        try:
            names = cluster.names_of(victim)
            runs = cluster.running(names)
            unprojected = cluster.unprojected() if victim == holder else set()
            note = ""
        except redis.RedisError as exc:
            names, runs, unprojected, note = set(), set(), set(), f"in-flight runs unknown: {exc}"
        record = Kill(time.time(), "projector" if victim == holder else "worker", victim, runs, unprojected, note)
        cluster.kill_worker(victim)
        self.kills.append(record)
        return str(slot)

    def kill_valkey(self) -> str:
        cluster = self.cluster
        if cluster.valkey.owned:
            self.gate.acquire()  # the submitter's create_run is not what this measures
        try:
            runs = cluster.running(None) | cluster.queued()
            unprojected = cluster.unprojected()
            self._valkey_before = cluster.last_ids()
            aof = cluster.aof()
        except redis.RedisError as exc:
            runs, unprojected, aof = set(), set(), {"error": str(exc)}
        record = Kill(time.time(), "valkey", None, runs, unprojected, json.dumps(aof))
        record.pid = cluster.valkey.kill()
        self._valkey_killed = record.at
        self.kills.append(record)
        return "valkey"

    def restart_valkey(self) -> None:
        cluster = self.cluster
        try:
            cluster.valkey.restart()
        finally:
            if cluster.valkey.owned:
                self.gate.release()
        after = cluster.last_ids()
        regressed = {stream: {"before_kill": self._valkey_before[stream], "after_restart": after[stream]}
                     for stream in STREAMS if stream in self._valkey_before
                     and _stream_id(after[stream]) < _stream_id(self._valkey_before[stream])}
        self.valkey_restarts.append({"down_s": round(time.time() - self._valkey_killed, 3),
                                     "acknowledged_ids_lost": regressed})

    def settle(self) -> None:
        """Everything up again after the last kill."""
        if self.cluster.valkey.down and self.cluster.valkey.owned:
            self.restart_valkey()
        self.cluster.valkey.wait_answering(30)
        for slot in range(PROCESSES):
            self.cluster.start(slot)


def _journal(cluster: Cluster) -> dict[str, list[tuple[float, float]]]:
    """Run id -> (applied at, produced at) of each journalled event, in the order applied."""
    by_run: dict[str, list[tuple[float, float]]] = {}
    cursor = "-"
    while True:
        entries: Any = cluster.probe.xrange(cluster.keys.events_journal, min=cursor, max="+", count=5000)
        for message_id, fields in entries:
            event = orjson.loads(fields[EVENT_FIELD])
            applied = _stream_id(message_id.decode())[0] / 1000
            by_run.setdefault(event["run_id"], []).append((applied, float(event["ts"])))
        if len(entries) < 5000:
            return by_run
        cursor = "(" + entries[-1][0].decode()


def recovery(kills: list[Kill], journal: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    samples: list[tuple[float, int, str]] = []
    single: list[float] = []
    """Samples where no later kill also had the run in flight before it progressed."""
    unmeasured = 0
    for index, kill in enumerate(kills):
        wanted = [(run, True) for run in kill.runs_new] + [(run, False) for run in kill.runs_applied - kill.runs_new]
        for run_id, new in wanted:
            after = [applied for applied, produced in journal.get(run_id, [])
                     if applied > kill.at and (produced > kill.at or not new)]
            if not after:
                unmeasured += 1
                continue
            samples.append((min(after) - kill.at, index, run_id))
            if not any(kill.at < other.at < min(after) and run_id in other.runs_new | other.runs_applied
                       for other in kills[index + 1:]):
                single.append(min(after) - kill.at)
    values = [seconds for seconds, _i, _r in samples]
    per_kill: dict[int, float] = {}
    for seconds, index, _run in samples:
        per_kill[index] = max(per_kill.get(index, 0.0), seconds)
    worst = sorted(samples, reverse=True)[:5]
    return {"per_run_in_flight": _summary(values), "per_run_hit_once": _summary(single),
            "per_kill_slowest_run": _summary(list(per_kill.values())),
            "not_measured": unmeasured,
            "worst": [{"s": round(seconds, 3), "kill": index, "kind": kills[index].kind, "run": run_id}
                      for seconds, index, run_id in worst]}


def tally(cluster: Cluster, run_ids: list[str]) -> dict[str, Any]:
    deployment = cluster.deployment
    runs = deployment.runs(run_ids)
    lost = [_where(cluster, run_id, runs[run_id]["status"] if run_id in runs else "missing")
            for run_id in run_ids if run_id not in runs or runs[run_id]["status"] not in TERMINAL]
    twice, not_idempotent, succeeded, other = [], 0, 0, []
    for run_id, run in runs.items():
        effects = deployment.counter.effects(run_id)
        if effects > 1:
            twice.append({"run": run_id, "effects": effects, "status": run["status"]})
        if run["status"] == "succeeded" and effects == 1:
            succeeded += 1
        elif run["status"] == "failed" and run["error_type"] == "step_not_idempotent" and effects <= 1:
            not_idempotent += 1
        elif run["status"] in TERMINAL:
            other.append({"run": run_id, "status": run["status"], "error_type": run["error_type"], "effects": effects,
                          "error": (run["error"] or "")[:300]})
    return {"runs_lost": len(lost), "lost": lost, "effects_twice": len(twice), "twice": twice,
            "step_not_idempotent": not_idempotent, "succeeded": succeeded, "other_failures": other}


def _where(cluster: Cluster, run_id: str, status: str) -> dict[str, Any]:
    """What Redis still holds for a run that did not end: the evidence of where it stopped."""
    keys, probe = cluster.keys, cluster.probe
    events: Any = probe.xrange(keys.events, count=100_000)
    return {"run": run_id, "status": status, "unprojected_events": sum(
                1 for _id, fields in events for raw in entry_events(fields) if orjson.loads(raw)["run_id"] == run_id),
            "job_on_stream": run_id in cluster.queued(), "running_entry": run_id in cluster.running(None),
            "due_at": probe.zscore(keys.due, run_id), "checkpoint": bool(probe.exists(keys.run_checkpoint(run_id)))}


def _orphans(deployment: Deployment, run_ids: list[str]) -> int:
    """Runs in SQL that no create_run returned (a create that failed after writing its row)."""
    with deployment.sql.connect() as conn:
        return sum(1 for (run_id,) in conn.execute(sa.text("select id from runs")) if run_id not in set(run_ids))


def _log_findings(deployment: Deployment, valkey: Valkey) -> dict[str, int]:
    text = "\n".join(deployment.log(i).read_text(errors="replace") for i in range(1, deployment.processes + 1)
                     if deployment.log(i).exists())
    valkey_log = valkey.server.log_path.read_text(errors="replace") if valkey.server.log_path.exists() else ""
    return {"tracebacks": text.count("Traceback (most recent call last)"),
            "redis_lost_mid_batch": text.count("Redis failed mid-batch"),
            "no_checkpoint_to_resume": text.count("has no checkpoint to resume from"),
            "valkey_slow_fsync": valkey_log.count("Asynchronous AOF fsync is taking too long")}


def _postgres() -> tuple[str, Any]:
    from tests.fixtures import PG_ADMIN_URL

    name = f"lgchaos_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", drop


def _wait_terminal(cluster: Cluster, run_ids: list[str], grace: float) -> float:
    began = time.monotonic()
    while time.monotonic() - began < grace:
        cluster.supervise()
        runs = cluster.deployment.runs(run_ids)
        if len(runs) == len(run_ids) and all(run["status"] in TERMINAL for run in runs.values()):
            break
        time.sleep(0.2)
    return time.monotonic() - began


def bench(args: argparse.Namespace) -> dict[str, Any]:
    schedule = plan(args.seed, args.runs, args.kills, args.victims, args.mix, args.kill_every)
    folder = Path(tempfile.mkdtemp(prefix="lgchaos-"))
    data = folder / "data"
    data.mkdir()
    valkey = Valkey(data, owned=args.redis == "bench")
    valkey.server.start()
    db_url, drop_db = _postgres() if args.db == "postgres" else (f"sqlite:///{data / 'lockgate.db'}", None)
    counter = EffectCounter(delay=args.post_ms / 1000)
    zygote = Zygote()
    env = {"LOCKGATE_HEARTBEAT_TIMEOUT": args.heartbeat_timeout or "", "LOCKGATE_JOB_IDLE_TIMEOUT":
           args.idle_timeout or "", **({"LOCKGATE_REDIS_URL": ""} if args.redis == "folder" else {})}
    deployment = Deployment(folder, valkey.server.url, db_url, f"lgchaos-{args.seed}", zygote, counter,
                            worker_env=env)
    cluster = Cluster(deployment, valkey)
    load_before = os.getloadavg()
    started = time.time()
    result: dict[str, Any] = {}
    try:
        for delay in FLOWS.values():
            deployment.publish(effect_flow(counter.url, delay=delay))
        for slot in range(PROCESSES):
            cluster.start(slot)
        deadline = time.monotonic() + 60
        while len(cluster.names_of(cluster.pids[0] or 0) | cluster.names_of(cluster.pids[1] or 0)) < 2 * PROCESSES \
                or cluster.lease_pid() is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"chaos bench: the workers did not start\n{deployment.logs()}")
            time.sleep(0.1)
        if args.redis == "folder":
            valkey.server.stop()  # the workers' keepers start it again: from now on a worker owns it
            valkey.wait_answering(30)
        chaos = Chaos(cluster, schedule, threading.Lock())
        chaos.run()
        chaos.settle()
        waited = _wait_terminal(cluster, chaos.created, args.grace)
        try:
            deployment.check_projection()
            mismatch: str | None = None
        except AssertionError as exc:
            mismatch = str(exc)[:2000] or "the projection differs from a rebuild from the events journal"
        outcome = tally(cluster, chaos.created)
        kinds = {kind: sum(1 for k in chaos.kills if k.kind == kind) for kind in KINDS}
        result = {
            "bench": "chaos", "seed": args.seed, "db": args.db, "redis": args.redis, "victims": args.victims,
            "mix": args.mix, "kill_every_s": list(args.kill_every), "post_ms": args.post_ms,
            "runs": len(chaos.created), "kills": len(chaos.kills),
            "kills_by_kind": kinds,
            **outcome,
            "projection_mismatch": mismatch is not None, **({"projection_diff": mismatch} if mismatch else {}),
            "recovery_s": recovery(chaos.kills, _journal(cluster)),
            "recovery_definition": "per (kill, run in flight in the victim): kill -> projection of that run's next "
                                   "event produced after the kill (runs with unprojected events: next applied)",
            "valkey_restarts": chaos.valkey_restarts,
            "create_errors": len(chaos.create_errors), "orphaned_rows": _orphans(deployment, chaos.created),
            "worker_exit_codes": sorted({code for code in cluster.exit_codes if code is not None}),
            "worker_self_exits": cluster.self_exits,
            "worker_start_s": _summary(list(cluster.ready.values())),
            "no_worker_up_s": round(cluster.none_ready_s, 1),
            "logs": _log_findings(deployment, valkey),
            "settle_s": round(waited, 1), "duration_s": round(time.time() - started, 1),
            "thresholds": {"heartbeat_timeout": args.heartbeat_timeout or "default 15",
                           "idle_timeout": args.idle_timeout or "default 30"},
            "machine": {"cpus": os.cpu_count(), "load_before": [round(v, 2) for v in load_before],
                        "load_after": [round(v, 2) for v in os.getloadavg()]},
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "target": {"runs_lost": 0, "effects_twice": 0, "recovery_p99_s": 5},
        }
        if args.kills_detail:
            result["kill_log"] = [{"at": round(k.at - chaos.began, 3), "kind": k.kind, "pid": k.pid,
                                   "in_flight": len(k.runs_new), "unprojected": len(k.runs_applied),
                                   **({"note": k.note} if k.note else {})} for k in chaos.kills]
        failed = outcome["runs_lost"] or outcome["effects_twice"] or outcome["other_failures"] or mismatch
        if failed or args.keep:
            result["kept"] = str(folder)
        return result
    finally:
        for pid in cluster.alive():
            os.kill(pid, signal.SIGTERM)
            zygote.wait(pid, 20)
        zygote.close()
        deployment.handle.stop()
        valkey.server.stop()
        server_pid = valkey.pid()
        if not valkey.owned and server_pid and valkey.server.answers():
            os.kill(server_pid, signal.SIGTERM)
        counter.close()
        if drop_db is not None:
            drop_db()
        if "kept" not in result:
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--redis", choices=("bench", "folder"), default="bench",
                        help="bench: this script runs Valkey and restarts it; folder: the workers do, as the app")
    parser.add_argument("--victims", type=lambda text: text.split(","), default=list(KINDS),
                        help="comma-separated kinds among worker,projector,valkey (default all)")
    parser.add_argument("--mix", type=lambda text: text.split(","), default=list(FLOWS),
                        help="flows runs are drawn from: first,parked (default both)")
    parser.add_argument("--kill-every", type=lambda text: tuple(float(v) for v in text.split("-", 1)),
                        default=(0.5, 1.5), help="seconds between kills, drawn uniformly (default 0.5-1.5)")
    parser.add_argument("--post-ms", type=float, default=50.0,
                        help="the POST's answer comes this long after it was counted (default 50 ms)")
    parser.add_argument("--grace", type=float, default=120.0, help="seconds after the chaos for every run to end")
    parser.add_argument("--heartbeat-timeout", default=None, help="LOCKGATE_HEARTBEAT_TIMEOUT of the workers")
    parser.add_argument("--idle-timeout", default=None, help="LOCKGATE_JOB_IDLE_TIMEOUT of the workers")
    parser.add_argument("--kills-detail", action="store_true", help="add every kill to the output")
    parser.add_argument("--keep", action="store_true", help="keep the data folder and logs (always kept on failure)")
    args = parser.parse_args()
    unknown = [v for v in args.victims if v not in KINDS] + [m for m in args.mix if m not in FLOWS]
    if unknown:
        parser.error(f"unknown victim kind or flow: {', '.join(unknown)}")
    logging.basicConfig(level=logging.ERROR)
    print(json.dumps(bench(args), indent=2))


if __name__ == "__main__":
    main()
