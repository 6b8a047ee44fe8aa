"""Recovery fixtures: a real HTTP server whose first call to /hold blocks, real worker processes, an engine
(projector, reaper and watchdog with short thresholds) in the test process."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.config import EngineConfig
from engine.host import EngineServices
from engine.runtime.reclaim import RecoveryThresholds
from tests.engine.conftest import LocalServer, QuietHandler
from tests.engine.conftest import wait_until as engine_wait_until

ROOT = Path(__file__).resolve().parents[2]
FAST = RecoveryThresholds(heartbeat_timeout=1.0, idle_timeout=3.0, retry_cap=2, tick=0.1)


class HoldingSite(LocalServer):
    """Counts hits per path; the first hit of /hold waits until `release` is set (10 s at most)."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.lock = threading.Lock()
        self.release = threading.Event()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                path = self.path.split("?")[0]
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                with site.lock:
                    site.hits[path] = site.hits.get(path, 0) + 1
                    count = site.hits[path]
                if path == "/hold" and count == 1:
                    site.release.wait(10)
                try:
                    self.send_json(200, {"count": count})
                except OSError:  # the caller was killed meanwhile
                    pass

        super().__init__(Handler)

    def count(self, path: str) -> int:
        with self.lock:
            return self.hits.get(path, 0)

    def close(self) -> None:
        self.release.set()
        super().close()


@pytest.fixture
def holding_site() -> Iterator[HoldingSite]:
    site = HoldingSite()
    try:
        yield site
    finally:
        site.close()


class WorkerProcess:
    """A `tests.recovery.worker_proc` child; its stderr goes to a file the test can read."""

    def __init__(self, config: EngineConfig, log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.recovery.worker_proc", str(config.data_dir), str(config.redis_url),
             str(config.db_url), config.key_prefix], stdout=subprocess.PIPE, stderr=self._log, cwd=ROOT, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.strip() == b"ready", f"worker process did not start: {line!r}; log: {self.log()}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        os.kill(self.proc.pid, signum)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


@pytest.fixture
def recovery_config(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> EngineConfig:
    return EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, db_url=sqlite_url, key_prefix=key_prefix)


@pytest.fixture
def spawn_worker(recovery_config: EngineConfig, tmp_path: Path) -> Iterator[Callable[[], WorkerProcess]]:
    started: list[WorkerProcess] = []

    def spawn() -> WorkerProcess:
        worker = WorkerProcess(recovery_config, tmp_path / f"worker-{len(started)}.log")
        started.append(worker)
        return worker

    try:
        yield spawn
    finally:
        for worker in started:
            worker.close()


@pytest.fixture
def supervisor(recovery_config: EngineConfig) -> Iterator[EngineServices]:
    """The test process's engine: projector, reaper and watchdog with short thresholds, no workers."""
    services = EngineServices(recovery_config, workers=0, scheduler=False, block_ms=100, recovery=FAST,
                              heartbeat_seconds=0.2).start()
    try:
        yield services
    finally:
        services.stop()


# The engine tests' helper, with more time by default: these waits span worker processes starting and dying.
wait_until = functools.partial(engine_wait_until, timeout=15.0)
