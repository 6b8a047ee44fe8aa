"""Real processes and real time: a run parked when the engine stops resumes when a new engine process starts
(at once when its due time passed meanwhile, else on time); `lockgate run` shows the park of a 2 s queue."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from engine.flow import flow_from_data
from engine.transport.keys import Keyspace
from tests.cli import LOCKGATE, cli_env
from tests.engine.conftest import make_flow, start_engine, wait_until
from tests.parking.conftest import TRIGGER


def _queue_flow(path: Path, flow_id: str, delay: str) -> str:
    path.write_text(json.dumps(make_flow(flow_id, [TRIGGER, {"id": "pause", "type": "queue",
                                                            "config": {"delay": delay}},
                                                  {"id": "done", "type": "terminal", "config": {"output": "{{ 1 }}"}}],
                                         [("start", "pause"), ("pause", "done")])))
    return str(path)


def _runs(db: Path) -> dict[str, dict[str, Any]]:
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("select id, flow_id, status, waiting_on, finished_at from runs")).mappings()
            return {row["flow_id"]: dict(row) for row in rows}
    finally:
        engine.dispose()


def _queue_finished(db: Path, run_id: str) -> float:
    return _queue_stamp(db, run_id, "finished_at")


def _queue_started(db: Path, run_id: str) -> float:
    return _queue_stamp(db, run_id, "started_at")


def _queue_stamp(db: Path, run_id: str, column: str) -> float:
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            value = conn.execute(sa.text(f"select {column} from steps where run_id = :r and step = 'pause'"),
                                 {"r": run_id}).scalar()
    finally:
        engine.dispose()
    from datetime import UTC, datetime

    stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def _wait_for_start_line(worker: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """Block until `lockgate worker` says it serves; then keep draining its stderr so it never blocks on it."""
    assert worker.stderr is not None
    stream = worker.stderr
    started = threading.Event()
    seen: list[str] = []

    def read() -> None:
        for line in stream:
            seen.append(line)
            if "Ctrl-C stops" in line:
                started.set()

    threading.Thread(target=read, name="worker-stderr", daemon=True).start()
    assert started.wait(timeout), f"lockgate worker did not start within {timeout}s: {''.join(seen)}"


def test_parked_runs_resume_after_a_real_engine_restart(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_API_KEY="")
    db = tmp_path / "data" / "lockgate.db"
    first = subprocess.Popen([*LOCKGATE, "worker", "--workers", "2"], env=env, stderr=subprocess.DEVNULL)
    try:
        submitter, _ = start_engine(tmp_path, redis_url, f"sqlite:///{db}", key_prefix, workers=0, projector=False,
                                    due_waker=False)
        try:
            for flow_id, delay in (("early", "2s"), ("later", "12s")):
                _queue_flow(tmp_path / f"{flow_id}.flow.json", flow_id, delay)
                submitter.publish_flow(flow_from_data(json.loads((tmp_path / f"{flow_id}.flow.json").read_text())))
                submitter.create_run(flow_id)
        finally:
            submitter.stop()
        wait_until(lambda: {r["status"] for r in _runs(db).values()} == {"waiting"} and len(_runs(db)) == 2,
                   timeout=20, what="both runs to park on the first engine")
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(15)
    runs = _runs(db)
    assert {r["status"] for r in runs.values()} == {"waiting"}
    early, later = runs["early"], runs["later"]
    early_due = json.loads(early["waiting_on"])["due_at"]
    later_due = json.loads(later["waiting_on"])["due_at"]
    import redis as redis_lib

    client: Any = redis_lib.Redis.from_url(redis_url)
    client.zrem(Keyspace(key_prefix).due, early["id"])  # lost by a process that died before acting on it
    while time.time() < early_due + 0.5:  # the engine is down when `early` falls due
        time.sleep(0.05)
    worker = subprocess.Popen([*LOCKGATE, "worker", "--workers", "2"], env=env, stderr=subprocess.PIPE, text=True)
    started = time.time()
    try:
        # The premise holds from the moment the new engine serves (its start-up line), not from its spawn: a
        # loaded machine can take seconds to import it, and a run already overdue then is not resumed "on time".
        _wait_for_start_line(worker)
        assert _runs(db)["later"]["status"] == "waiting", (
            f"the second run must still be waiting when the new engine is up ({time.time() - started:.1f}s to start)")
        wait_until(lambda: _runs(db)["early"]["status"] == "succeeded", timeout=15, what="the overdue run")
        wait_until(lambda: _runs(db)["later"]["status"] == "succeeded", timeout=30, what="the run due later")
        early_resumed, later_resumed = _queue_finished(db, early["id"]), _queue_finished(db, later["id"])
        assert started <= early_resumed < later_due  # resumed by the new engine, before the other one fell due
        assert later_due <= later_resumed  # the run not yet due waited for its time (the lag: tests/bench)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()


def test_lockgate_run_shows_the_park_and_finishes_2s_later(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_API_KEY="")
    flow = _queue_flow(tmp_path / "two.flow.json", "two", "2s")
    process = subprocess.Popen([*LOCKGATE, "run", flow, "--json"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    lines = list(process.stderr)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, "".join(lines)
    parked = [n for n, line in enumerate(lines) if "parked at pause (queue_delay) until" in line]
    resumed = [n for n, line in enumerate(lines) if line.strip() == "pause (queue): succeeded"]
    assert len(parked) == len(resumed) == 1 and parked[0] < resumed[0], "".join(lines)  # told the park, then on
    run = json.loads(out)
    assert run["status"] == "succeeded" and run["result"] == 1
    pause = next(step for step in run["steps"] if step["step"] == "pause")
    assert pause["status"] == "succeeded"
    waited = _queue_finished(tmp_path / "data" / "lockgate.db", run["id"]) - _queue_started(
        tmp_path / "data" / "lockgate.db", run["id"])
    assert waited >= 2.0, f"the 2 s queue resumed after {waited:.3f}s"  # not before its due time
