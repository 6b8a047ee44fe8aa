"""Runs one script in a child process of this worker and reports what it did.

The child runs in its own session (so its own process group) and a fresh empty working folder that is
removed afterwards, under an address-space limit, with an environment made only of a few neutral
variables and the ones the node passes. A tiny launcher (this interpreter without `site`) stays beside the
script to end its group should the worker die, and starts the interpreter under the limit: no shell ever
sees a command line, the code is a file. At the timeout, past the output bound, and whenever the script
itself has ended, its whole group is killed; processes that left the group are found by a marker in their
environment and killed too, so nothing the script started outlives the step.
"""

from __future__ import annotations

import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from engine.relaunch import python_command

Language = Literal["python", "shell"]

MAX_OUTPUT_BYTES = 1024 * 1024
"""Most stdout a script may write; one byte more fails the step (`output_too_large`)."""
STDERR_TAIL_BYTES = 2048
"""How much of the end of stderr a failed step's error carries."""
MARKER_ENV = "LOCKGATE_SCRIPT_ID"
"""Set in every script's environment to a value unique to that run of it (finds processes that left the group)."""
STOP_CHECK_SECONDS = 0.5
"""How often a running script asks whether it should stop (its run was cancelled)."""
EXIT_GRACE_SECONDS = 0.5
"""After the script ends, how long its output pipes may stay open (held by a process it started) before
every process carrying its marker is killed."""
SHELL = "/bin/sh"
_READ_CHUNK = 65536
_WRITE_CHUNK = 65536
_NEUTRAL_PATH = "/usr/local/bin:/usr/bin:/bin"

# Runs with `-I -S` as the group's first process (argv: memory limit, worker pid, script folder, program...).
# It forks the program under the memory limit and waits for it, then ends the way the program ended (its exit status, or
# the signal that killed it). When the worker dies the kernel sends it SIGTERM (parent-death signal), and it
# kills every process carrying the script's marker, removes the script's folder, then kills its whole group.
_LAUNCHER = f"""\
import os, resource, signal, sys
needle = ("{MARKER_ENV}=" + os.environ.get("{MARKER_ENV}", "") + "\\0").encode()
def end(_signum, _frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        entries = []
    for entry in entries:
        if entry.isdigit() and int(entry) != me:
            try:
                with open("/proc/" + entry + "/environ", "rb") as file:
                    if needle in file.read() + b"\\0":
                        os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass
    import shutil
    shutil.rmtree(sys.argv[3], ignore_errors=True)
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, end)
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[2]):
    end(0, None)
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    limit = int(sys.argv[1])
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        os.execv(sys.argv[4], sys.argv[4:])
    except OSError as exc:
        sys.stderr.write("cannot start " + sys.argv[4] + ": " + str(exc) + "\\n")
        os._exit(126)
_, status = os.waitpid(child, 0)
if os.WIFSIGNALED(status):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class ScriptRequest:
    """One script to run: its language and code, what it reads on stdin, its extra environment and limits."""

    language: Language
    code: str
    stdin: bytes
    env: dict[str, str]
    timeout: float
    memory_mb: int


@dataclass(frozen=True)
class ScriptOutcome:
    """What a script did: its exit status (negative: the signal that ended it), stdout, the end of stderr."""

    returncode: int
    stdout: bytes
    stderr_tail: str
    timed_out: bool = False
    output_too_large: bool = False
    stopped: bool = False
    """Killed, with every process it started, because `run_script`'s `should_stop` said so."""

    @property
    def signal_name(self) -> str | None:
        """`SIGKILL` and the like when a signal ended the script, else None."""
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


def _program(language: Language, source: Path) -> list[str]:
    if language == "python":
        return python_command("-I", str(source))
    return [SHELL, str(source)]


def _environment(folder: Path, extra: dict[str, str], marker: str) -> dict[str, str]:
    env = {"PATH": _NEUTRAL_PATH, "HOME": str(folder), "TMPDIR": str(folder), "LANG": "C.UTF-8",
           "PYTHONIOENCODING": "utf-8"}
    env.update(extra)
    env[MARKER_ENV] = marker
    return env


def run_script(request: ScriptRequest, should_stop: Callable[[], bool] = lambda: False) -> ScriptOutcome:
    """Run `request` to its end (or its timeout, or until `should_stop()`, asked every `STOP_CHECK_SECONDS`) and
    return what it did; no process of it is left running."""
    base = Path(tempfile.mkdtemp(prefix="lockgate-script-"))
    try:
        work = base / "work"
        work.mkdir()
        source = base / ("main.py" if request.language == "python" else "main.sh")
        source.write_text(request.code, encoding="utf-8")
        marker = secrets.token_hex(16)
        limit = request.memory_mb * 1024 * 1024
        command = [*python_command("-I", "-S", "-c", _LAUNCHER, str(limit), str(os.getpid()), str(base)),
                   *_program(request.language, source)]
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=work, env=_environment(work, request.env, marker), start_new_session=True,
                                close_fds=True)
        try:
            return _supervise(proc, request, marker, should_stop)
        finally:
            _kill_all(proc.pid, marker)
            proc.wait()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _supervise(proc: subprocess.Popen[bytes], request: ScriptRequest, marker: str,
               should_stop: Callable[[], bool]) -> ScriptOutcome:
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + request.timeout
    next_stop_check = time.monotonic() + STOP_CHECK_SECONDS
    stdout = bytearray()
    stderr = b""
    timed_out = too_large = stopped = False
    exited_at: float | None = None
    pending = memoryview(request.stdin)
    selector = selectors.DefaultSelector()
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    selector.register(out_fd, selectors.EVENT_READ)
    selector.register(err_fd, selectors.EVENT_READ)
    if pending:
        os.set_blocking(in_fd, False)
        selector.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    try:
        while any(fd in (out_fd, err_fd) for fd in selector.get_map()):
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if now >= next_stop_check:
                next_stop_check = now + STOP_CHECK_SECONDS
                if exited_at is None and should_stop():
                    stopped = True
                    break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
                _kill_group(proc.pid)
            if exited_at is not None and now - exited_at > EXIT_GRACE_SECONDS:
                break  # a process that left the group holds the pipes open; the sweep below ends it
            for key, _ in selector.select(min(deadline - now, 0.1)):
                fd = key.fd
                if fd == in_fd:
                    try:
                        written = os.write(in_fd, pending[:_WRITE_CHUNK])
                    except BlockingIOError:
                        continue
                    except OSError:  # the script closed stdin or ended: what it did not read is dropped
                        written = len(pending)
                    pending = pending[written:]
                    if not pending:
                        selector.unregister(in_fd)
                        proc.stdin.close()
                    continue
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(fd)
                elif fd == out_fd:
                    stdout += chunk
                    if len(stdout) > MAX_OUTPUT_BYTES:
                        too_large = True
                        break
                else:
                    stderr = (stderr + chunk)[-STDERR_TAIL_BYTES:]
            if too_large:
                break
        while not (timed_out or too_large or stopped) and exited_at is None:
            # Both pipes closed while the script goes on: it still has until its timeout to end.
            try:
                proc.wait(timeout=max(min(deadline, next_stop_check) - time.monotonic(), 0))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    timed_out = True
                elif should_stop():
                    stopped = True
                next_stop_check = time.monotonic() + STOP_CHECK_SECONDS
    finally:
        selector.close()
        _kill_all(proc.pid, marker)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    returncode = proc.wait()
    return ScriptOutcome(returncode, bytes(stdout[:MAX_OUTPUT_BYTES]),
                         stderr.decode("utf-8", errors="replace"), timed_out, too_large, stopped)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_all(pgid: int, marker: str) -> None:
    """Kill the script's group, then any process still carrying its marker (it left the group)."""
    _kill_group(pgid)
    for _ in range(3):
        if not _kill_marked(marker):
            return


def marked_processes(marker: str) -> list[int]:
    """Pids of live processes of this user whose environment carries `MARKER_ENV=marker` (Linux /proc)."""
    needle = f"{MARKER_ENV}={marker}".encode() + b"\0"
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                if needle in file.read() + b"\0":
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _kill_marked(marker: str) -> bool:
    killed = False
    for pid in marked_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
            killed = True
        except (ProcessLookupError, PermissionError):
            pass
    return killed
