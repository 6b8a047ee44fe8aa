"""`lockgate worker` stops on SIGTERM within its stop deadline while its Redis does not answer (a real worker
process and a real Valkey, frozen with SIGSTOP so that every Redis call of the clean stop waits)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.cli.worker import STOP_DEADLINE_SECONDS
from engine.transport.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]
READY_SECONDS = 60.0


def _wait_for(path: Path, text: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        assert process.poll() is None, path.read_text(errors="replace")
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not seen within {timeout}s:\n{path.read_text(errors='replace')}")


@pytest.mark.parametrize("second_signal", [False, True], ids=["deadline", "second-sigterm"])
def test_sigterm_stops_a_worker_whose_redis_does_not_answer(tmp_path: Path, second_signal: bool) -> None:
    server = EmbeddedRedis(tmp_path / "valkey").start()
    assert server.pid is not None
    pid = server.pid
    stderr = tmp_path / "worker.err"
    env = {**os.environ, "LOCKGATE_REDIS_URL": server.url, "LOCKGATE_DATA_DIR": str(tmp_path / "data"),
           "LOCKGATE_KEY_PREFIX": "outagestop"}
    env.pop("LOCKGATE_DB_URL", None)
    with open(stderr, "wb") as err:
        worker = subprocess.Popen([sys.executable, "-m", "app", "worker", "--workers", "1"], cwd=ROOT, env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    frozen = False
    try:
        _wait_for(stderr, "Ctrl-C stops", worker, READY_SECONDS)
        os.kill(pid, signal.SIGSTOP)  # Redis is there but answers nothing: every call waits
        frozen = True
        time.sleep(1.0)
        began = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        if second_signal:
            _wait_for(stderr, "stopping", worker, 10.0)
            time.sleep(0.5)
            worker.send_signal(signal.SIGTERM)
            limit = 3.0
        else:
            limit = STOP_DEADLINE_SECONDS + 5.0
        try:
            code = worker.wait(limit)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker still ran {limit:g}s after SIGTERM:\n{stderr.read_text(errors='replace')}")
        took = time.monotonic() - began
        text = stderr.read_text(errors="replace")
        assert code == 1, text
        assert "exiting without a clean stop" in text
        if not second_signal:
            assert took >= STOP_DEADLINE_SECONDS - 1.0, took
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        if frozen:
            os.kill(pid, signal.SIGCONT)
        server.stop()
