"""The engine's workers, projector and due waker in a child process (`lockgate worker`).

They run Python hot loops; in the app's own process they would compete with the GUI thread
for the GIL (measured: ~100 ms GUI stalls while 200 runs start). The child shares the app's
Redis (the embedded server the app started, or the configured one) and database.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from engine.config import EngineConfig

STOP_TIMEOUT_S = 15.0
LOG_NAME = "engine-worker.log"
SIMULATOR_LOG_NAME = "provider-sim.log"
SIMULATOR_HOST = "127.0.0.1"
SIMULATOR_PORT = 8765
"""Where the engine's default `local` provider (no providers.json in the data folder) expects the simulator."""


_PR_SET_PDEATHSIG = 1


def _die_with_app() -> None:  # runs in the child between fork and exec
    # A crashed or killed app must not leave workers behind that keep taking jobs.
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def port_answers(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.3)
        return probe.connect_ex((host, port)) == 0


class SimulatorProcess:
    """The bundled provider simulator (`lockgate provider-sim`), so the demo's model calls work offline.

    Started only when the data folder has no providers.json (the engine then uses the simulator) and
    nothing answers on its port yet (another Lockgate may already run one; it is reused).
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.reused = False

    @property
    def wanted(self) -> bool:
        return not (self.data_dir / "providers.json").exists()

    def start(self) -> SimulatorProcess:
        if not self.wanted:
            return self
        if port_answers(SIMULATOR_HOST, SIMULATOR_PORT):
            self.reused = True
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.data_dir / SIMULATOR_LOG_NAME, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app", "provider-sim", "--host", SIMULATOR_HOST, "--port", str(SIMULATOR_PORT)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_app,
            )
        return self

    def stop(self) -> None:
        _terminate(self.process)
        self.process = None


class EngineProcess:
    def __init__(self, config: EngineConfig, redis_url: str, workers: int) -> None:
        self.config = config
        self.redis_url = redis_url
        self.workers = workers
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.config.data_dir / LOG_NAME

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(LOCKGATE_DATA_DIR=str(self.config.data_dir), LOCKGATE_REDIS_URL=self.redis_url,
                   LOCKGATE_KEY_PREFIX=self.config.key_prefix)
        if self.config.db_url:
            env["LOCKGATE_DB_URL"] = self.config.db_url
        else:
            env.pop("LOCKGATE_DB_URL", None)
        return env

    def start(self) -> EngineProcess:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app", "worker", "--workers", str(self.workers)],
                env=self.environment(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_app,
            )
        return self

    def exit_code(self) -> int | None:
        """None while it runs."""
        return None if self.process is None else self.process.poll()

    def stop(self) -> int | None:
        """Ask it to stop (SIGTERM: it finishes its steps, parked runs stay parked); kill it if it hangs."""
        return _terminate(self.process)


def _terminate(process: subprocess.Popen[bytes] | None) -> int | None:
    if process is None or process.poll() is not None:
        return None if process is None else process.poll()
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(STOP_TIMEOUT_S)
