"""The process layout of `lockgate worker --processes N`: N executor processes, one projector process and, with
`--http`, K http processes (the API and webhooks) under one supervisor.

Each child is a `lockgate worker --role executor|projector|http` process. The http children share one listening
socket the supervisor bound (`--http-fd`): the port stays bound, and a burst waits in its backlog, while a child
restarts. A child that dies is logged and
started again after a backoff that doubles with every quick death (reset once a child has stayed up for
`STABLE_SECONDS`). SIGTERM to the supervisor is forwarded to every child, which drains (its workers finish
the batch in hand; nothing half-done is acknowledged); children still running after `DRAIN_SECONDS` are
killed, so the supervisor exits within 10 s. Children die with the supervisor even when it is killed
outright (Linux PR_SET_PDEATHSIG, the same as the app's Valkey and engine children). Each child has a process
group of its own, so a terminal's Ctrl-C reaches the supervisor alone and the children stop once, by its SIGTERM.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

log = logging.getLogger("lockgate.supervisor")

DRAIN_SECONDS = 8.0
"""How long children get to drain after SIGTERM before they are killed (the supervisor's own limit is 10 s)."""
FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0
STABLE_SECONDS = 30.0
"""A child that stayed up this long restarts at once after its next death (its backoff is reset)."""
POLL_SECONDS = 0.1
REFUSED_CODES = frozenset({2, 3})
"""Exit codes of a child that refused to start (usage error, schema not current): starting it again cannot
help, so the supervisor stops everything and exits with that code."""

_PR_SET_PDEATHSIG = 1


def default_executor_processes() -> int:
    """Executor processes sized to the machine: one per core (each is one GIL), at least one."""
    return max(1, os.cpu_count() or 1)


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A `preexec_fn`: the child gets SIGTERM when the process that started it dies (Linux), and exits at once
    if that happened already, between the fork and this call."""

    def arm() -> None:
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:
            os._exit(1)

    return arm


@dataclass(frozen=True)
class ChildSpec:
    """One supervised process: its name in the log, its command line and the file descriptors it inherits."""

    name: str
    argv: tuple[str, ...]
    pass_fds: tuple[int, ...] = ()


@dataclass
class _Child:
    spec: ChildSpec
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff: float = FIRST_BACKOFF_SECONDS
    restart_at: float | None = None
    restarts: int = 0
    exits: list[int] = field(default_factory=list)


class Supervisor:
    """Starts the children, restarts the ones that die, and stops them all on `stop()`."""

    def __init__(self, specs: Sequence[ChildSpec], env: dict[str, str] | None = None, *,
                 first_backoff: float = FIRST_BACKOFF_SECONDS, drain_seconds: float = DRAIN_SECONDS) -> None:
        self.children = [_Child(spec, backoff=first_backoff) for spec in specs]
        self.env = env
        self.first_backoff = first_backoff
        self.drain_seconds = drain_seconds
        self._stopping = threading.Event()
        self.refused: int | None = None
        """The exit code of a child that refused to start, once one did."""

    def pids(self) -> dict[str, int]:
        """Name -> pid of each child running now."""
        return {child.spec.name: child.process.pid for child in self.children
                if child.process is not None and child.process.poll() is None}

    def start(self) -> Supervisor:
        for child in self.children:
            self._spawn(child)
        return self

    def run(self, stop: threading.Event) -> int:
        """Watch the children until `stop` is set or one refuses to start, then stop them (drain, then kill).
        Returns 0, or the refusing child's exit code."""
        try:
            while not stop.wait(POLL_SECONDS) and self.refused is None:
                self.tick(time.monotonic())
        finally:
            self.stop()
        return self.refused or 0

    def tick(self, now: float) -> None:
        """Notice children that died and start the ones whose backoff is over."""
        for child in self.children:
            if self._stopping.is_set():
                return
            process = child.process
            if process is not None and (code := process.poll()) is not None:
                child.process = None
                child.exits.append(code)
                if code in REFUSED_CODES:
                    log.error("%s (pid %d) refused to start (exit code %d); stopping", child.spec.name,
                              process.pid, code)
                    self.refused = code
                    return
                if now - child.started_at >= STABLE_SECONDS:
                    child.backoff = self.first_backoff
                child.restart_at = now + child.backoff
                log.warning("%s (pid %d) exited with %s; restarting in %.1fs", child.spec.name, process.pid,
                            _exit_text(code), child.backoff)
                child.backoff = min(MAX_BACKOFF_SECONDS, child.backoff * 2)
            if child.process is None and child.restart_at is not None and now >= child.restart_at:
                child.restart_at = None
                child.restarts += 1
                self._spawn(child)

    def stop(self) -> None:
        """SIGTERM every child, wait up to `drain_seconds`, kill what is left, reap everything."""
        self._stopping.set()
        running = [child.process for child in self.children if child.process is not None]
        for process in running:
            if process.poll() is None:
                try:
                    process.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + self.drain_seconds
        for process in running:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("pid %d did not stop within %.0fs of SIGTERM; killed", process.pid, self.drain_seconds)
                process.kill()
                process.wait()
        for child in self.children:
            child.process = None

    def _spawn(self, child: _Child) -> None:
        try:
            # A process group of its own: a terminal's Ctrl-C reaches the supervisor alone, which stops the
            # children itself (a child that also got the SIGINT would take the SIGTERM for a second signal).
            child.process = subprocess.Popen(list(child.spec.argv), env=self.env, stdin=subprocess.DEVNULL,
                                             pass_fds=child.spec.pass_fds, preexec_fn=die_with_parent(os.getpid()),
                                             process_group=0)
        except OSError as exc:
            log.error("%s could not be started (%s); retrying in %.1fs", child.spec.name, exc, child.backoff)
            child.restart_at = time.monotonic() + child.backoff
            child.backoff = min(MAX_BACKOFF_SECONDS, child.backoff * 2)
            return
        child.started_at = time.monotonic()
        log.info("%s started (pid %d)", child.spec.name, child.process.pid)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"


def child_env(redis_url: str, data_dir: str, key_prefix: str, http_url: str | None) -> dict[str, str]:
    """A supervised child's environment: this process's, on one Redis, data folder and keyspace. With `http_url`
    (where the http children serve), children that serve no HTTP make their callback links (`callback_url(node)`)
    to it, as one process serving HTTP does; LOCKGATE_PUBLIC_URL still wins. The log level reaches them by
    LOCKGATE_LOG_LEVEL."""
    env = {**os.environ, "LOCKGATE_REDIS_URL": redis_url, "LOCKGATE_DATA_DIR": data_dir,
           "LOCKGATE_KEY_PREFIX": key_prefix}
    if http_url is not None:
        env["LOCKGATE_HTTP_URL"] = http_url
    return env


def layout(executors: int, threads: int, base: Sequence[str], http_fds: Sequence[int] = ()) -> list[ChildSpec]:
    """The children of `lockgate worker --processes N`: `executors` executor processes of `threads` worker
    threads, one projector process and one http process per listening socket of `http_fds`, serving the API on it
    (a restarted http child gets the same socket)."""
    common = [*base, "worker"]
    specs = [ChildSpec(f"executor-{index}", (*common, "--role", "executor", "--workers", str(threads)))
             for index in range(executors)]
    specs.append(ChildSpec("projector", (*common, "--role", "projector")))
    return specs + http_layout(base, http_fds)


def http_layout(base: Sequence[str], http_fds: Sequence[int]) -> list[ChildSpec]:
    """One http process per listening socket of `http_fds`, serving the API on it (a restarted one gets the same
    socket): the http children of `layout`, and of `lockgate worker --http-processes K` without `--processes`."""
    return [ChildSpec(f"http-{index}", (*base, "worker", "--role", "http", "--http-fd", str(fd)), (fd,))
            for index, fd in enumerate(http_fds)]
