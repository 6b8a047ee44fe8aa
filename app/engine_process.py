"""The engine's workers, projector and due waker in a child process (`lockgate worker`).

They run Python hot loops; in the app's own process they would compete with the GUI thread
for the GIL (measured: ~100 ms GUI stalls while 200 runs start). The child shares the app's
Redis (the embedded server the app started, or the configured one) and database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from engine.config import EngineConfig

STOP_TIMEOUT_S = 15.0
LOG_NAME = "engine-worker.log"


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
            )
        return self

    def exit_code(self) -> int | None:
        """None while it runs."""
        return None if self.process is None else self.process.poll()

    def stop(self) -> int | None:
        """Ask it to stop (SIGTERM: it finishes its steps, parked runs stay parked); kill it if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return self.exit_code()
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(STOP_TIMEOUT_S)
