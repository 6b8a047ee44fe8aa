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
import time
from pathlib import Path

from engine.config import EngineConfig
from engine.logs import LOG_DIR_ENV
from engine.relaunch import lockgate_command
from engine.settings import LockgateSettings, load_settings

STOP_TIMEOUT_S = 15.0
LOG_NAME = "engine-worker.log"
SIMULATOR_LOG_NAME = "provider-sim.log"
SIMULATOR_HOST = "127.0.0.1"
SIMULATOR_PORT = 8765
"""The simulator's port when it is free (the engine's default `local` provider, with no providers.json, expects it)."""
SIMULATOR_PORT_VARIABLE = "LOCKGATE_SIMULATOR_PORT"


def preferred_simulator_port(settings: LockgateSettings | None = None) -> int:
    """`LOCKGATE_SIMULATOR_PORT` (of `settings`, else of the environment now) when set (an app beside another
    one's simulator), else `SIMULATOR_PORT`; a bad one raises SettingsError (a ValueError)."""
    configured = (settings if settings is not None else load_settings()).simulator_port
    return configured if configured is not None else SIMULATOR_PORT


_PR_SET_PDEATHSIG = 1
WORKER_NICENESS = 5


def _die_with_app() -> None:  # runs in the child between fork and exec
    # A crashed or killed app must not leave workers behind that keep taking jobs.
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _background_child() -> None:  # runs in the worker child between fork and exec
    _die_with_app()
    # When the cores are busy the window's thread should win them: a step waits a few ms more, a
    # frame does not. With idle cores the niceness changes nothing.
    os.nice(WORKER_NICENESS)


def port_answers(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.3)
        return probe.connect_ex((host, port)) == 0


SIMULATOR_START_S = 10.0
SIMULATOR_OWNER = "lockgate-sim"
"""`owned_by` of every model the bundled simulator lists at /v1/models: how a reused port is recognised."""


def is_our_simulator(host: str, port: int) -> bool:
    """True when what answers on `port` is the bundled provider simulator (its /v1/models says so)."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{port}/v1/models", timeout=1.0) as answer:
            body = json.loads(answer.read())
    except (OSError, ValueError):
        return False
    models = body.get("data") if isinstance(body, dict) else None
    if not isinstance(models, list) or not models:
        return False
    return all(isinstance(m, dict) and m.get("owned_by") == SIMULATOR_OWNER for m in models)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class SimulatorProcess:
    """The bundled provider simulator (`lockgate provider-sim`), so the demo's model calls work offline.

    Started when the data folder's providers.json is missing or its `local` entry is the one the app
    wrote for the simulator. It takes the preferred port when that is free, reuses what answers there
    when that is our simulator, and otherwise listens on a free port; the URL it ends up on is written
    into the `local` entry of providers.json (so the engine, in any process, calls it there).
    """

    def __init__(self, data_dir: Path, preferred_port: int | None = None,
                 settings: LockgateSettings | None = None) -> None:
        self.data_dir = data_dir
        self.preferred_port = preferred_simulator_port(settings) if preferred_port is None else preferred_port
        self.process: subprocess.Popen[bytes] | None = None
        self.reused = False
        self.url = ""
        self.wanted = False

    def start(self) -> SimulatorProcess:
        from app.provider_file import simulator_entry_wanted, write_simulator_provider
        from engine.providers.config import simulator_provider

        self.wanted = simulator_entry_wanted(self.data_dir)
        if not self.wanted:
            return self
        port = self.preferred_port
        if port_answers(SIMULATOR_HOST, port):
            if is_our_simulator(SIMULATOR_HOST, port):
                self.reused = True
            else:
                port = free_port(SIMULATOR_HOST)
        if not self.reused:
            self._spawn(port)
        self.url = f"http://{SIMULATOR_HOST}:{port}/v1"
        write_simulator_provider(self.data_dir, simulator_provider(self.url))
        return self

    def _spawn(self, port: int) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.data_dir / SIMULATOR_LOG_NAME, "ab") as log:
            self.process = subprocess.Popen(
                lockgate_command("provider-sim", "--host", SIMULATOR_HOST, "--port", str(port)),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_app,
                process_group=0,  # Ctrl-C in the app's terminal reaches the app alone, which stops its children
            )
        # The engine may call it as soon as its first run starts: be sure it listens before saying so.
        deadline = time.monotonic() + SIMULATOR_START_S
        while not is_our_simulator(SIMULATOR_HOST, port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the provider simulator did not start on {SIMULATOR_HOST}:{port}; "
                                   f"see {self.data_dir / SIMULATOR_LOG_NAME}")
            time.sleep(0.05)

    def stop(self) -> None:
        _terminate(self.process)
        self.process = None


DEFAULT_HTTP_URL = "http://127.0.0.1:8080"
"""Where the app's engine serves the HTTP API and webhooks unless LOCKGATE_HTTP_URL says otherwise."""


def http_address(url: str) -> tuple[str, int]:
    """`http://127.0.0.1:8080` -> ("127.0.0.1", 8080); raises ValueError naming the expected form."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"LOCKGATE_HTTP_URL {url!r} is not http://HOST:PORT; write e.g. {DEFAULT_HTTP_URL}")
    return parts.hostname, parts.port


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (so the engine child can bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def port_accepts(host: str, port: int) -> bool:
    """True when something accepts connections on host:port (the GUI thread asks: a local address answers in
    well under the timeout)."""
    try:
        with socket.create_connection((host, port), timeout=0.05):
            return True
    except OSError:
        return False


def app_executor_processes() -> int:
    """Executor processes of the app's engine child: one per core but the one the window needs. 0 on a machine
    of 2 cores or fewer: there the child is one process, as the single core left for the engine would be shared
    by a supervisor, an executor and a projector at three times the start-up time and memory."""
    cores = os.cpu_count() or 1
    return cores - 1 if cores > 2 else 0


class EngineProcess:
    """The engine child: `lockgate worker`, a supervisor of executor processes, a projector process and (with
    `http_url`) an http process where the machine has the cores for them (`app_executor_processes`)."""

    def __init__(self, config: EngineConfig, redis_url: str, workers: int, http_url: str | None = None,
                 processes: int | None = None, log_dir: Path | None = None) -> None:
        self.config = config
        self.log_dir = log_dir
        """Folder of the child's log file (`worker.log`); None: where the child's own settings put it."""
        self.redis_url = redis_url
        self.workers = workers
        """Worker threads per executor process."""
        self.processes = processes if processes is not None else app_executor_processes()
        """Executor processes under a supervisor child (`--processes`); 0: one child running every part."""
        self.http_url = http_url
        """The HTTP API and webhooks URL the child serves; None when it serves none."""
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.config.data_dir / LOG_NAME

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(LOCKGATE_DATA_DIR=str(self.config.data_dir), LOCKGATE_REDIS_URL=self.redis_url,
                   LOCKGATE_KEY_PREFIX=self.config.key_prefix)
        if self.log_dir is not None:
            env[LOG_DIR_ENV] = str(self.log_dir)  # beside the app's own log, whichever data folder it runs on
        if self.http_url is not None:
            env["LOCKGATE_HTTP_URL"] = self.http_url  # the child's callback links fall back to it
        if self.config.db_url:
            env["LOCKGATE_DB_URL"] = self.config.db_url
        else:
            env.pop("LOCKGATE_DB_URL", None)
        return env

    def start(self) -> EngineProcess:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            command = lockgate_command("worker", "--workers", str(self.workers))
            if self.processes:
                command += ["--processes", str(self.processes)]
            if self.http_url is not None:
                host, port = http_address(self.http_url)
                command += ["--http", f"{host}:{port}"]
            self.process = subprocess.Popen(
                command,
                env=self.environment(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_background_child,
                process_group=0,  # Ctrl-C in the app's terminal reaches the app alone, which stops this child
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
