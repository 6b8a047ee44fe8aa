"""Parking through the seam (queue), a killed worker leaving its job pending, and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

from engine.clock import ManualClock
from engine.flow import flow_from_data
from engine.runtime.queries import get_run
from engine.transport.keys import Keyspace
from tests.cli import LOCKGATE, cli_env
from tests.conftest import EXAMPLES
from tests.engine.conftest import Site, make_flow, start_engine, wait_until

T = {"id": "start", "type": "trigger.manual"}


def test_a_parked_run_holds_no_worker_and_resumes_at_its_due_time(tmp_path: Path, redis_url: str, sqlite_url: str,
                                                                  key_prefix: str) -> None:
    clock = ManualClock(1_800_000_000.0)
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock)
    try:
        doc = make_flow("wait", [T, {"id": "before", "type": "set", "config": {"values": {"n": "{{ 20 }}"}}},
                                 {"id": "pause", "type": "queue", "config": {"delay": "2h"}},
                                 {"id": "done", "type": "terminal", "config": {"output": "{{ state.n + 1 }}"}}],
                        [("start", "before"), ("before", "pause"), ("pause", "done")])
        services.publish_flow(flow_from_data(doc))
        created = services.create_run("wait")
        run = services.wait_for_run(created.run_id, statuses=frozenset({"waiting"}))
        assert run["waiting_on"] == {"node": "pause", "reason": "queue_delay", "due_at": 1_800_007_200.0}
        # The park is projected as the worker acknowledges its job; the worker lets go right after.
        wait_until(lambda: all(not worker.active for worker in services.workers), timeout=20,
                   what="every worker to let go of the parked run")
        handles = services.handles
        assert handles is not None and handles.client.xlen(handles.keys.jobs) == 0  # no job held
        assert handles.client.xpending(handles.keys.jobs, handles.keys.jobs_group)["pending"] == 0
        assert services.get_run(created.run_id)["status"] == "waiting"
        clock.advance(2 * 3600)
        assert services.waker is not None
        services.waker.due.nudge()
        run = services.wait_for_run(created.run_id, timeout=10)
        assert run["status"] == "succeeded" and run["result"] == 21
        assert [s["step"] for s in run["steps"]] == ["start", "before", "pause", "done"]
        assert handles.client.get(handles.keys.run_checkpoint(created.run_id)) is None
    finally:
        services.stop()


def test_lockgate_run_hello_prints_the_succeeded_run(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    done = subprocess.run([*LOCKGATE, "run", str(EXAMPLES / "hello.flow.json"), "--input", 'name="Ada"', "--json"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["status"] == "succeeded" and run["result"] == "Hello, Ada!" and run["version"] == 1
    assert [s["status"] for s in run["steps"]] == ["succeeded"] * 3
    assert all(s["duration_ms"] is not None for s in run["steps"])
    assert "greet (set): succeeded" in done.stderr
    shown = subprocess.run([*LOCKGATE, "runs", "show", run["id"], "--json"], env=env,
                           capture_output=True, text=True, timeout=30)
    assert json.loads(shown.stdout)["result"] == "Hello, Ada!"
    listed = subprocess.run([*LOCKGATE, "runs", "list"], env=env,
                            capture_output=True, text=True, timeout=30)
    assert run["id"] in listed.stdout and "succeeded" in listed.stdout


def test_lockgate_run_refuses_bad_flows_and_bad_inputs(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    bad = tmp_path / "bad.flow.json"
    bad.write_text(json.dumps(make_flow("bad", [{"id": "x", "type": "set", "config": {"values": {"a": "1"}}}], [])))
    refused = subprocess.run([*LOCKGATE, "run", str(bad)], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "no_trigger" in refused.stderr and "was not published" in refused.stderr
    hello = str(EXAMPLES / "hello.flow.json")
    missing = subprocess.run([*LOCKGATE, "run", hello], env=env, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and 'required input "name" (string) is missing' in missing.stderr
    typed = subprocess.run([*LOCKGATE, "run", hello, "--input", "name=3"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert typed.returncode == 2 and "must be of JSON type string, got integer" in typed.stderr
    not_json = subprocess.run([*LOCKGATE, "run", hello, "--input", "name=Ada"], env=env, capture_output=True,
                              text=True, timeout=60)
    assert not_json.returncode == 2 and "is not JSON" in not_json.stderr


def test_a_killed_worker_leaves_its_job_pending(tmp_path: Path, redis_url: str, key_prefix: str, site: Site) -> None:
    site.release.clear()
    env = cli_env(tmp_path, redis_url, key_prefix)
    flow = tmp_path / "slow.flow.json"
    flow.write_text(json.dumps(make_flow("slow", [T, {"id": "call", "type": "http.request",
                                                      "config": {"method": "GET", "url": site.url + "/hold"}},
                                                  {"id": "done", "type": "terminal"}],
                                         [("start", "call"), ("call", "done")])))
    submitter, _ = start_engine(tmp_path, redis_url, f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}", key_prefix,
                                workers=0)
    try:
        submitter.publish_flow(flow_from_data(json.loads(flow.read_text())))
        run_id = submitter.create_run("slow").run_id
    finally:
        submitter.stop()
    store = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}")
    worker = subprocess.Popen([*LOCKGATE, "worker", "--workers", "1"], env=env, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: site.hits.get("/hold"), timeout=20, what="the worker to be inside the http step")
        wait_until(lambda: _statuses(store, run_id) == ("running", {"start": "succeeded", "call": "running"}),
                   timeout=20, what="the store to show the step in flight")  # flushed before the blocking call
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
    client: Any = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    pending = client.xpending_range(keys.jobs, keys.jobs_group, "-", "+", 10)
    assert len(pending) == 1 and pending[0]["times_delivered"] == 1
    assert b":w0" in pending[0]["consumer"]
    fields = client.xrange(keys.jobs, pending[0]["message_id"], pending[0]["message_id"])[0][1]
    assert run_id.encode() in fields[b"j"]  # the job a reaper needs is still there
    shown = subprocess.run([*LOCKGATE, "runs", "show", run_id, "--json"], env=env, capture_output=True, text=True,
                           timeout=30)
    run = json.loads(shown.stdout)
    assert run["status"] == "running"  # nobody finished or failed it: it waits for a reaper
    assert {s["step"]: s["status"] for s in run["steps"]} == {"start": "succeeded", "call": "running"}
    store.dispose()


def _statuses(store: sa.Engine, run_id: str) -> tuple[str, dict[str, str]] | None:
    run = get_run(store, run_id)
    return (run["status"], {s["step"]: s["status"] for s in run["steps"]}) if run else None


def test_detach_returns_at_the_first_park_and_the_run_continues_with_the_next_engine(
        tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    flow = tmp_path / "nap.flow.json"
    flow.write_text(json.dumps(make_flow("nap", [T, {"id": "nap", "type": "queue", "config": {"delay": "1s"}},
                                                 {"id": "done", "type": "terminal", "config": {"output": "rested"}}],
                                         [("start", "nap"), ("nap", "done")])))
    detached = subprocess.run([*LOCKGATE, "run", str(flow), "--detach", "--json"], env=env, capture_output=True,
                              text=True, timeout=60)
    assert detached.returncode == 0, detached.stderr
    run = json.loads(detached.stdout)
    assert run["status"] == "waiting"
    assert run["waiting_on"]["node"] == "nap" and run["waiting_on"]["reason"] == "queue_delay"
    assert "parked at nap (queue_delay) until" in detached.stderr
    services, _ = start_engine(tmp_path, redis_url, f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}", key_prefix)
    try:
        finished = services.wait_for_run(run["id"], timeout=15)
        assert finished["status"] == "succeeded" and finished["result"] == "rested"
    finally:
        services.stop()


def test_one_projector_is_active_among_engine_processes(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    db = f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}"
    client: Any = redis.Redis.from_url(redis_url)
    lease = Keyspace(key_prefix).projector_lease
    submitter, _ = start_engine(tmp_path, redis_url, db, key_prefix, workers=0, projector=False, due_waker=False,
                                scheduler=False, reaper=False)
    engines: list[subprocess.Popen[bytes]] = []
    try:
        submitter.publish_flow(flow_from_data(make_flow("after", [T, {"id": "done", "type": "terminal"}],
                                                        [("start", "done")])))
        engines.append(subprocess.Popen([*LOCKGATE, "worker", "--workers", "1"], env=env, stderr=subprocess.DEVNULL))
        first_holder = wait_until(lambda: client.get(lease), timeout=30, what="the first engine to take the lease")
        holders: set[bytes | None] = set()
        sampling = threading.Event()
        sampler = threading.Thread(target=_sample, args=(client, lease, holders, sampling), daemon=True)
        sampler.start()
        engines.append(subprocess.Popen([*LOCKGATE, "worker", "--workers", "1"], env=env, stderr=subprocess.PIPE))
        _wait_for_line(engines[1], "Ctrl-C stops")
        for _ in range(3):
            before = submitter.create_run("after").run_id
            assert submitter.wait_for_run(before, timeout=15)["status"] == "succeeded"
        sampling.set()
        sampler.join(5)
        assert holders == {first_holder}  # the second engine's projector stood by all along

        engines[0].send_signal(signal.SIGKILL)  # no clean release: the lease lapses
        engines[0].wait(10)
        after = submitter.create_run("after").run_id
        assert submitter.wait_for_run(after, timeout=20)["status"] == "succeeded"  # applied by the standby
        second_holder = client.get(lease)
        assert second_holder is not None and second_holder != first_holder
    finally:
        for engine in engines:
            if engine.poll() is None:
                engine.kill()
            engine.wait(10)
        submitter.stop()


def _sample(client: Any, key: str, seen: set[bytes | None], done: threading.Event) -> None:
    while not done.is_set():
        seen.add(client.get(key))
        done.wait(0.002)


def _wait_for_line(process: subprocess.Popen[bytes], text: str, timeout: float = 30.0) -> None:
    """Block until the process prints `text` on stderr; its stderr is drained from then on."""
    assert process.stderr is not None
    stream = process.stderr
    seen = threading.Event()

    def read() -> None:
        for raw in stream:
            if text in raw.decode(errors="replace"):
                seen.set()

    threading.Thread(target=read, name="engine-stderr", daemon=True).start()
    assert seen.wait(timeout), f"the process did not print {text!r} within {timeout:g}s"


def test_lockgate_worker_on_the_embedded_redis_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LOCKGATE_REDIS_URL", "LOCKGATE_DB_URL")}
    env.update(LOCKGATE_DATA_DIR=str(tmp_path / "data"), LOCKGATE_KEY_PREFIX="lg")
    worker = subprocess.Popen([*LOCKGATE, "worker", "--workers", "1"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stderr is not None
        banner = worker.stderr.readline()
        assert "embedded Redis in" in banner and "lockgate.db" in banner
        done = subprocess.run([*LOCKGATE, "run", str(EXAMPLES / "hello.flow.json"), "--input", 'name="Bo"', "--json"],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["result"] == "Hello, Bo!"
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0
        assert "lockgate worker: stopped" in worker.stderr.read()
    finally:
        if worker.poll() is None:
            worker.kill()
    assert not _answers(tmp_path / "data" / "redis.sock"), "the worker left its embedded Redis running"


def _answers(socket_path: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=1).ping())
    except redis.RedisError:
        return False


def test_ctrl_c_leaves_a_parked_run_that_the_next_engine_finishes(tmp_path: Path, redis_url: str,
                                                                  key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    flow = tmp_path / "long-nap.flow.json"
    flow.write_text(json.dumps(make_flow("longnap", [T, {"id": "nap", "type": "queue", "config": {"delay": "1h"}},
                                                     {"id": "done", "type": "terminal", "config": {"output": "up"}}],
                                         [("start", "nap"), ("nap", "done")])))
    cli = subprocess.Popen([*LOCKGATE, "run", str(flow), "--json"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        assert cli.stderr is not None
        for line in cli.stderr:
            if "parked at nap (queue_delay) until" in line:
                break
        cli.send_signal(signal.SIGINT)
        out, err = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130 and "interrupted" in err
    run = json.loads(out)
    assert run["status"] == "waiting" and run["waiting_on"]["node"] == "nap"
    clock = ManualClock(run["waiting_on"]["due_at"] + 1)  # an hour later, without waiting an hour
    services, _ = start_engine(tmp_path, redis_url, f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}", key_prefix,
                               clock=clock)
    try:
        finished = services.wait_for_run(run["id"], timeout=15)
        assert (finished["status"], finished["result"]) == ("succeeded", "up")
    finally:
        services.stop()
