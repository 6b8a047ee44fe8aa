"""The crash-point harness: real `lockgate worker` processes (forked by `zygote`), a counting HTTP server, and
the checks every crash must pass (nothing lost, no effect twice, the ending the spec says, a projection equal to
a rebuild from the events journal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.crashpoints import CRASH_EXIT_CODE
from engine.runtime.emitter import EVENT_FIELD, entry_events
from engine.runtime.jobs import encode_job, resume_job
from engine.runtime.projection import apply_batch
from engine.runtime.transitions import TERMINAL
from engine.store.db import init_db, make_engine
from engine.store.models import AppliedEvent, DeadLetter, FlowRecord, FlowVersion, Run, Step
from tests.engine.conftest import LocalServer, QuietHandler, make_flow

ROOT = Path(__file__).resolve().parents[2]


def cases(crashes: list[Any], on_postgres: list[Any]) -> list[Any]:
    """Parameters (database, crash...) for `deployment`: every crash on SQLite, the listed ones on PostgreSQL too
    (the store's part of each crash is the same code on both; PostgreSQL cases keep that true)."""
    def param(db: str, crash: Any) -> Any:
        values = crash if isinstance(crash, tuple) else (crash,)
        return pytest.param(db, *values, id="-".join([db, *(str(v) for v in values)]))

    return [param("sqlite", crash) for crash in crashes] + [param("postgres", crash) for crash in on_postgres]
JOURNAL = 1_000_000
PROCESS_TIMEOUT = 30.0


class Zygote:
    """The `tests.chaos.zygote` process: forks ready-imported `lockgate worker` processes on request."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.chaos.zygote"], cwd=ROOT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.lock = threading.Lock()
        self.children: set[int] = set()

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the process launcher exited with {self.proc.poll()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def spawn(self, env: dict[str, str], argv: list[str], log: Path) -> int:
        pid = int(self._call({"op": "spawn", "env": env, "argv": argv, "log": str(log)})["pid"])
        self.children.add(pid)
        return pid

    def wait(self, pid: int, timeout: float) -> int | None:
        code = self._call({"op": "wait", "pid": pid, "timeout": timeout})["code"]
        if code is not None:
            self.children.discard(pid)
        return None if code is None else int(code)

    def kill_all(self) -> None:
        for pid in list(self.children):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait(pid, 5)

    def close(self) -> None:
        self.kill_all()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture(scope="session")
def zygote() -> Iterator[Zygote]:
    launcher = Zygote()
    try:
        yield launcher
    finally:
        launcher.close()


class EffectCounter(LocalServer):
    """Counts POSTs per path: `/effect/<run id>` is the side effect a non-idempotent step must not repeat.
    With `delay`, each answer comes that many seconds after the POST was counted (a slow remote side)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.hits: dict[str, int] = {}
        self.lock = threading.Lock()
        counter = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                with counter.lock:
                    counter.hits[self.path] = counter.hits.get(self.path, 0) + 1
                if delay:
                    time.sleep(delay)
                try:
                    self.send_json(200, {"ok": True})
                except OSError:  # the caller was killed meanwhile
                    pass

        super().__init__(Handler)

    def effects(self, run_id: str) -> int:
        with self.lock:
            return self.hits.get(f"/effect/{run_id}", 0)


@pytest.fixture
def counter() -> Iterator[EffectCounter]:
    server = EffectCounter()
    try:
        yield server
    finally:
        server.close()


TRIGGER = {"id": "start", "type": "trigger.manual"}


def effect_flow(counter_url: str, *, delay: str | None = None) -> dict[str, Any]:
    """trigger → [queue delay →] POST (not idempotent) → end; the POST's path names the run."""
    post = {"id": "post", "type": "http.request",
            "config": {"method": "POST", "url": counter_url + "/effect/{{ run.id }}", "body": "{{ run.id }}"}}
    end = {"id": "end", "type": "terminal", "config": {"output": "done"}}
    if delay is None:
        return make_flow("first", [TRIGGER, post, end], [("start", "post"), ("post", "end")])
    wait = {"id": "wait", "type": "queue", "config": {"delay": delay}}
    return make_flow("parked", [TRIGGER, wait, post, end], [("start", "wait"), ("wait", "post"), ("post", "end")])


@dataclass
class Deployment:
    """One data tier (a Redis namespace and a SQL database) and the worker processes started against it."""

    tmp: Path
    redis_url: str
    db_url: str
    prefix: str
    zygote: Zygote
    counter: EffectCounter
    handle: EngineServices = field(init=False)
    processes: int = 0
    worker_env: dict[str, str] = field(default_factory=dict)
    """Environment of the worker processes over what `start` sets (other recovery thresholds, another Redis)."""

    def __post_init__(self) -> None:
        config = EngineConfig(data_dir=self.tmp / "data", redis_url=self.redis_url, db_url=self.db_url,
                              key_prefix=self.prefix)
        self.handle = EngineServices(config, workers=0, projector=False, due_waker=False, reaper=False,
                                     scheduler=False).start()
        self.mark = self.tmp / "crashed.txt"

    def publish(self, document: dict[str, Any]) -> None:
        self.handle.publish_flow(flow_from_data(document))

    def create(self, flow_id: str, count: int) -> list[str]:
        return [self.handle.create_run(flow_id).run_id for _ in range(count)]

    def start(self, crash_at: str | None = None, workers: int = 2, role: str = "all") -> int:
        self.processes += 1
        env = {"LOCKGATE_DATA_DIR": str(self.tmp / "data"), "LOCKGATE_REDIS_URL": self.redis_url,
               "LOCKGATE_DB_URL": self.db_url, "LOCKGATE_KEY_PREFIX": self.prefix,
               "LOCKGATE_EVENT_JOURNAL": str(JOURNAL), "LOCKGATE_HEARTBEAT_TIMEOUT": "2",
               "LOCKGATE_JOB_IDLE_TIMEOUT": "4", "LOCKGATE_CRASH_AT": crash_at or "",
               "LOCKGATE_CRASH_MARK": str(self.mark), **self.worker_env}
        return self.zygote.spawn(env, ["worker", "--workers", str(workers), "--role", role], self.log(self.processes))

    def log(self, index: int) -> Path:
        return self.tmp / f"worker-{index}.log"

    def logs(self) -> str:
        return "\n".join(f"--- worker {i}\n" + self.log(i).read_text(errors="replace")[-3000:]
                         for i in range(1, self.processes + 1) if self.log(i).exists())

    def expect_crash(self, pid: int, point: str) -> None:
        code = self.zygote.wait(pid, PROCESS_TIMEOUT)
        if code is None:
            os.killpg(pid, signal.SIGKILL)
            self.zygote.wait(pid, 5)
        assert code == CRASH_EXIT_CODE, f"the worker was to die at {point}; it exited with {code}\n{self.logs()}"
        assert point in self.mark.read_text(), self.mark.read_text()

    def stop(self, pid: int) -> None:
        os.kill(pid, signal.SIGTERM)
        code = self.zygote.wait(pid, 20)
        assert code == 0, f"worker exited with {code} on SIGTERM\n{self.logs()}"

    def runs(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        with self.sql.connect() as conn:
            rows = conn.execute(sa.select(Run.__table__).where(Run.id.in_(run_ids))).mappings().all()
        return {row["id"]: dict(row) for row in rows}

    @property
    def sql(self) -> sa.Engine:
        assert self.handle.sql is not None
        return self.handle.sql

    def wait_for(self, run_ids: list[str], statuses: frozenset[str], timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            runs = self.runs(run_ids)
            if all(run["status"] in statuses for run in runs.values()) and len(runs) == len(run_ids):
                return runs
            if time.monotonic() > deadline:
                left = {run_id: run["status"] for run_id, run in runs.items() if run["status"] not in statuses}
                raise AssertionError(f"runs not yet {sorted(statuses)} after {timeout:g}s: {left}\n{self.logs()}")
            time.sleep(0.05)

    def wait_for_events(self, matches: Callable[[dict[str, Any]], bool], count: int, timeout: float = 30.0) -> None:
        """Wait until the events stream holds `count` events `matches` (while no projector takes them)."""
        client = self.handle.redis.client() if self.handle.redis else None
        assert client is not None
        deadline = time.monotonic() + timeout
        while True:
            entries: Any = client.xrange(self.handle.keys.events)
            found = sum(1 for _id, fields in entries for raw in entry_events(fields) if matches(orjson.loads(raw)))
            if found >= count:
                return
            assert time.monotonic() < deadline, f"{found} of {count} events after {timeout:g}s\n{self.logs()}"
            time.sleep(0.05)

    def duplicate_resumes(self, run_ids: list[str]) -> None:
        """A second resume job per parked run, as a late due waker or a restart's rebuild would enqueue."""
        pipe = self.handle.redis.client().pipeline(transaction=False) if self.handle.redis else None
        assert pipe is not None
        for run_id in run_ids:
            pipe.xadd(self.handle.keys.jobs, encode_job(resume_job(run_id)))
        pipe.execute()

    def check(self, run_ids: list[str]) -> dict[str, Any]:
        """The promises, for every run: ended, never an effect twice, the ending the spec says."""
        runs = self.wait_for(run_ids, TERMINAL)
        endings: dict[str, int] = {}
        for run_id, run in runs.items():
            effects = self.counter.effects(run_id)
            assert effects <= 1, f"run {run_id}: its non-idempotent POST was sent {effects} times\n{self.logs()}"
            if run["status"] == "succeeded":
                assert effects == 1, f"run {run_id} succeeded without its POST"
                assert run["result"] == "done"
            else:
                assert (run["status"], run["error_type"]) == ("failed", "step_not_idempotent"), (run, self.logs())
            ending = f"{run['status']}:{run['error_type'] or ''}"
            endings[ending] = endings.get(ending, 0) + 1
        self.check_projection()
        return endings

    def wait_projected(self) -> Any:
        """Wait until the projector has applied, journalled and deleted every event; the Redis client."""
        client = self.handle.redis.client() if self.handle.redis else None
        assert client is not None
        deadline = time.monotonic() + 20
        while client.xlen(self.handle.keys.events) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.xlen(self.handle.keys.events) == 0, "events left unprojected"
        return client

    def check_projection(self) -> None:
        """SQL equals a rebuild: the runs as created, then every journalled event applied to a fresh database."""
        client = self.wait_projected()
        fresh = make_engine(f"sqlite:///{self.tmp / 'rebuild.db'}")
        init_db(fresh)
        with self.sql.connect() as source, fresh.begin() as target:
            for table in (FlowRecord, FlowVersion):
                rows = [dict(row) for row in source.execute(sa.select(table)).mappings()]
                if rows:
                    target.execute(sa.insert(table), rows)
            # As create_run writes them: what a run is started with; everything else comes from its events.
            created = [{"id": r.id, "flow_id": r.flow_id, "version": r.version, "status": "queued",
                        "trigger": r.trigger, "idempotency_key": r.idempotency_key, "inputs": r.inputs,
                        "state": {}, "errors": None, "created_at": r.created_at, "updated_at": r.created_at,
                        "parent_run_id": r.parent_run_id, "call_depth": r.call_depth, "rerun_of": r.rerun_of,
                        "from_node": r.from_node, "started_by": r.started_by}
                       for r in source.execute(sa.select(Run.__table__))]
            if created:
                target.execute(sa.insert(Run), created)
        journal: Any = client.xrange(self.handle.keys.events_journal)
        messages = [(mid.decode(), fields[EVENT_FIELD]) for mid, fields in journal]
        for start in range(0, len(messages), 500):
            apply_batch(fresh, messages[start:start + 500], source="journal")
        try:
            rebuilt, projected = _projection(fresh), _projection(self.sql)
            assert rebuilt == projected, (_differences(rebuilt, projected)
                                          + _event_histories(rebuilt, projected, messages, self.sql))
        finally:
            fresh.dispose()


_RUN_COLUMNS = ("id", "status", "state", "result", "error", "error_type", "errors", "waiting_on", "current_node",
                "cost_micros", "last_seq", "started_at", "first_parked_at", "finished_at", "rerun_of", "from_node")
_STEP_COLUMNS = ("run_id", "step", "node_id", "node_type", "status", "attempts", "input", "output", "ports", "error",
                 "error_type", "duration_ms", "started_at", "finished_at")


def _canonical(value: Any) -> bytes:
    """One spelling per value whatever the database: JSON keys sorted (PostgreSQL's jsonb reorders them)."""
    return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS)


def _projection(engine: sa.Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        runs = [tuple(_canonical(row[c]) for c in _RUN_COLUMNS)
                for row in conn.execute(sa.select(Run.__table__).order_by(Run.id)).mappings()]
        steps = [tuple(_canonical(row[c]) for c in _STEP_COLUMNS)
                 for row in conn.execute(sa.select(Step.__table__).order_by(Step.run_id, Step.step)).mappings()]
    return {"runs": runs, "steps": steps}


def _differences(rebuilt: dict[str, Any], projected: dict[str, Any]) -> str:
    """The rows a rebuild and the store disagree on, column by column (the first few of each table)."""
    lines = []
    for table, columns in (("runs", _RUN_COLUMNS), ("steps", _STEP_COLUMNS)):
        keys = 1 if table == "runs" else 2
        mine = {row[:keys]: row for row in rebuilt[table]}
        theirs = {row[:keys]: row for row in projected[table]}
        for key in sorted(mine.keys() ^ theirs.keys())[:5]:
            lines.append(f"{table} {key}: only in the {'rebuild' if key in mine else 'store'}")
        differing = [key for key in sorted(mine.keys() & theirs.keys()) if mine[key] != theirs[key]]
        for key in differing[:5]:
            diff = {name: (a, b) for name, a, b in zip(columns, mine[key], theirs[key], strict=True) if a != b}
            lines.append(f"{table} {key}: rebuild != store in {diff}")
        if len(differing) > 5:
            lines.append(f"{table}: {len(differing) - 5} more rows differ")
    return "\n".join(lines)


def _event_histories(rebuilt: dict[str, Any], projected: dict[str, Any], journal: list[tuple[str, bytes]],
                     store: sa.Engine) -> str:
    """For the first runs a rebuild and the store disagree on: the events the journal holds for it, those the store
    recorded as applied (with their sequence), and the store's dead letters of that run."""
    differing = sorted({row[0] for row in set(rebuilt["runs"]) ^ set(projected["runs"])})[:3]
    lines = []
    for key in differing:
        run_id = orjson.loads(key)
        journalled = [(mid, event.get("type"), event.get("event_id")) for mid, raw in journal
                      if (event := orjson.loads(raw)).get("run_id") == run_id]
        with store.connect() as conn:
            applied = conn.execute(sa.select(AppliedEvent.event_type, AppliedEvent.seq, AppliedEvent.event_id)
                                   .where(AppliedEvent.run_id == run_id)).all()
            dead = [(row.message_id, row.error) for row in conn.execute(sa.select(DeadLetter))
                    if run_id.encode() in row.payload]
        lines.append(f"\nrun {run_id}\n  journal: {journalled}\n  applied: {[tuple(r) for r in applied]}"
                     f"\n  dead letters: {dead}")
    return "".join(lines)


@pytest.fixture
def deployment(request: pytest.FixtureRequest, tmp_path: Path, redis_url: str, key_prefix: str, zygote: Zygote,
               counter: EffectCounter) -> Iterator[Deployment]:
    """A data tier on the database the case names (`cases`)."""
    db_url = str(request.getfixturevalue("pg_url" if request.param == "postgres" else "sqlite_url"))
    deployed = Deployment(tmp_path, redis_url, db_url, key_prefix, zygote, counter)
    try:
        yield deployed
    finally:
        zygote.kill_all()
        deployed.handle.stop()
