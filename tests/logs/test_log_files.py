"""Every `lockgate` process logs to its file in LOCKGATE_LOG_DIR: levels, run ids, native crashes, bad levels."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.engine_process import EngineProcess
from engine.config import EngineConfig
from engine.flow import load_flow_text
from engine.host import EngineServices
from tests.cli import LOCKGATE, cli_env, lockgate
from tests.conftest import EXAMPLES

HANG_GUARD_S = 60.0


def wait_for_text(path: Path, text: str, process: subprocess.Popen[str] | None = None) -> str:
    """The file's content once it holds `text` (a hang guard only, not a timing assert)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return content
        assert process is None or process.poll() is None, f"the process ended early:\n{content}"
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared in {path}")


def start_worker(env: dict[str, str], err: Path, *args: str) -> subprocess.Popen[str]:
    with open(err, "w") as stderr:
        worker = subprocess.Popen([*LOCKGATE, "worker", "--workers", "1", *args], env=env, text=True,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    wait_for_text(err, "lockgate worker: log in ", worker)  # printed right after "Ctrl-C stops"
    return worker


def stop(worker: subprocess.Popen[str]) -> int:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    return worker.wait(HANG_GUARD_S)


def test_worker_at_debug_logs_the_run_it_executes(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    logs = tmp_path / "logs"
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_LOG_DIR=str(logs))
    worker = start_worker(env, tmp_path / "worker.err", "--log-level", "debug")
    try:
        assert f"log in {logs / 'worker.log'}" in (tmp_path / "worker.err").read_text()
        # The test's own engine only publishes and creates the run: the worker process executes it.
        config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, key_prefix=key_prefix)
        services = EngineServices(config, workers=0, projector=False, due_waker=False, scheduler=False,
                                  reaper=False).start()
        try:
            services.publish_flow(load_flow_text((EXAMPLES / "hello.flow.json").read_text()))
            run_id = services.create_run("hello", {"name": "Ada"}).run_id
        finally:
            services.stop()
        content = wait_for_text(logs / "worker.log", f"[run={run_id}]", worker)
    finally:
        assert stop(worker) == 0
    line = next(line for line in content.splitlines() if f"[run={run_id}]" in line)
    assert " DEBUG " in line and f" {worker.pid} " in line and "lockgate.worker" in line
    assert "started: lockgate" in content and "INFO" in content
    assert (logs / "worker-faults.log").exists()
    assert not (tmp_path / "data" / "worker.log").exists()


def test_at_warning_the_file_leaves_info_out(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    logs = tmp_path / "logs"
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_LOG_DIR=str(logs), LOCKGATE_LOG_LEVEL="WARNING")
    done = lockgate(env, "validate", str(EXAMPLES / "hello.flow.json"))
    assert done.returncode == 0, done.stderr
    assert (logs / "cli.log").exists() and "started: lockgate" not in (logs / "cli.log").read_text()
    env.pop("LOCKGATE_LOG_LEVEL")
    assert lockgate(env, "validate", str(EXAMPLES / "hello.flow.json")).returncode == 0
    assert "INFO     " in (logs / "cli.log").read_text() and "validate, pid" in (logs / "cli.log").read_text()


def test_a_bad_log_level_is_a_usage_error(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    logs = tmp_path / "logs"
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_LOG_DIR=str(logs))
    flag = lockgate(env, "worker", "--log-level", "loud")
    assert flag.returncode == 2
    assert "argument --log-level: 'loud' is not a log level; use one of debug, info, warning, error" in flag.stderr
    before = lockgate(env, "--log-level", "verbose", "validate", str(EXAMPLES / "hello.flow.json"))
    assert before.returncode == 2 and "'verbose' is not a log level" in before.stderr
    from_env = lockgate({**env, "LOCKGATE_LOG_LEVEL": "loud"}, "validate", str(EXAMPLES / "hello.flow.json"))
    assert from_env.returncode == 2 and "LOCKGATE_LOG_LEVEL 'loud' is not a log level" in from_env.stderr
    assert "Traceback" not in flag.stderr + before.stderr + from_env.stderr
    assert not logs.exists()  # refused before anything was configured


def test_a_native_crash_lands_in_the_faults_file(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    logs = tmp_path / "logs"
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_LOG_DIR=str(logs))
    env.pop("PYTHONFAULTHANDLER", None)
    worker = start_worker(env, tmp_path / "worker.err")
    faults = logs / "worker-faults.log"
    assert faults.exists() and faults.read_text() == ""
    worker.send_signal(signal.SIGSEGV)
    assert stop(worker) == -signal.SIGSEGV
    dump = faults.read_text()
    assert "Fatal Python error: Segmentation fault" in dump
    assert "Thread 0x" in dump and "(most recent call first)" in dump and "engine/log_channel.py" in dump


def test_the_app_writes_its_own_log(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", LOCKGATE_EXIT_WHEN_READY="1", LOCKGATE_NO_ENGINE="1",
               XDG_CONFIG_HOME=str(tmp_path / "config"), LOCKGATE_DATA_DIR=str(tmp_path / "data"),
               LOCKGATE_LOG_DIR=str(logs))
    done = subprocess.run([sys.executable, "-m", "app"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "started: lockgate" in (logs / "app.log").read_text() and " app, pid " in (logs / "app.log").read_text()
    assert (logs / "app-faults.log").exists()


def test_each_data_folder_keeps_its_own_log(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    example = str(EXAMPLES / "hello.flow.json")
    for name in ("one", "two"):
        env = cli_env(tmp_path / name, redis_url, key_prefix)
        del env["LOCKGATE_LOG_DIR"]  # no log folder named: the data folder's
        done = lockgate(env, "validate", example)
        assert done.returncode == 0, done.stderr
    for name in ("one", "two"):
        log = tmp_path / name / "data" / "log" / "cli.log"
        assert log.read_text().count("started: lockgate") == 1, log


def test_the_app_puts_its_engine_childs_log_beside_its_own(tmp_path: Path) -> None:
    config = EngineConfig(data_dir=tmp_path / "data")
    child = EngineProcess(config, "redis://127.0.0.1:6379/0", workers=1, log_dir=tmp_path / "app-logs")
    assert child.environment()["LOCKGATE_LOG_DIR"] == str(tmp_path / "app-logs")
    assert child.environment()["LOCKGATE_DATA_DIR"] == str(tmp_path / "data")
