"""Ctrl-C in a terminal signals the whole foreground process group. A supervisor (`lockgate worker --processes
N`) and the app stop their children themselves, so the children sit in process groups of their own: before,
each child got the SIGINT and then its parent's SIGTERM, took that for a second signal and quit without a clean
stop, printing every thread's stack into the terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.cli import LOCKGATE, cli_env

STOP_GUARD_SECONDS = 30


def _ctrl_c(process: subprocess.Popen[str]) -> str:
    """SIGINT to `process`'s process group, as a terminal's Ctrl-C; what it wrote to stderr after that."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        assert process.stderr is not None
        rest = process.stderr.read()
        assert process.wait(STOP_GUARD_SECONDS) == 0, rest
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return rest


def test_ctrl_c_stops_a_supervisor_and_its_children_cleanly(tmp_path: Path, redis_url: str,
                                                           key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_LOG_DIR=str(tmp_path / "logs"))
    process = subprocess.Popen([*LOCKGATE, "worker", "--processes", "1", "--workers", "1"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stderr is not None
    serving = 0
    for line in process.stderr:  # the executor's and the projector's start lines
        serving += "Ctrl-C stops" in line
        if serving == 2:
            break
    rest = _ctrl_c(process)
    assert "second" not in rest and "Threads:" not in rest, rest
    assert rest.count("lockgate worker: stopped") == 3, rest  # both children, then the supervisor


def test_ctrl_c_in_the_apps_terminal_stops_its_engine_child_cleanly(tmp_path: Path, redis_url: str,
                                                                    key_prefix: str) -> None:
    logs = tmp_path / "logs"
    env = cli_env(tmp_path, redis_url, key_prefix, QT_QPA_PLATFORM="offscreen", LOCKGATE_LOG_DIR=str(logs),
                  LOCKGATE_LOG_LEVEL="info", XDG_CONFIG_HOME=str(tmp_path / "config"))
    process = subprocess.Popen([*LOCKGATE], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    worker_log = tmp_path / "data" / "engine-worker.log"  # the engine child's output
    deadline = time.monotonic() + 60
    try:
        while not (worker_log.exists() and "Ctrl-C stops" in worker_log.read_text()):
            assert process.poll() is None and time.monotonic() < deadline, "the app's engine child did not serve"
            time.sleep(0.1)
    except AssertionError:
        process.kill()  # its children get SIGTERM as it dies (PR_SET_PDEATHSIG)
        process.wait()
        raise
    _ctrl_c(process)
    said = worker_log.read_text()
    assert "second" not in said and "Threads:" not in said, said[-3000:]
    assert "lockgate worker: stopped" in said, said[-3000:]
