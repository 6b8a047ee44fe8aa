"""A launcher of real `lockgate worker` processes that starts each in a fraction of a second.

It imports the engine once, single-threaded and with no connection open, then forks a child per request;
the child sets its environment, re-reads the crash point (`engine.runtime.crashpoints.rearm`) and runs
`lockgate worker` through the same entry point as the command line. The crash suite starts dozens of
engine processes, and a fresh interpreter would spend ~2 s importing each one.

Protocol: one JSON object per line on stdin, one answer per line on stdout.
- `{"op": "spawn", "env": {...}, "argv": [...], "log": PATH}` -> `{"pid": N}`
- `{"op": "wait", "pid": N, "timeout": S}` -> `{"pid": N, "code": C}` (C: exit code, -signal, or null if
  still running after S seconds)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import app.main
import engine.cli.worker
import engine.host
import engine.store.db
from engine.runtime import crashpoints

assert engine.host and engine.store.db and engine.cli.worker


def _child(env: dict[str, str], argv: list[str], log_path: str) -> None:
    try:
        os.setpgid(0, 0)
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.environ.update(env)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        crashpoints.rearm()
        code = app.main.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def main() -> int:
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "spawn":
            pid = os.fork()
            if pid == 0:
                _child(request["env"], request["argv"], request["log"])
            answer: dict[str, object] = {"pid": pid}
        elif request["op"] == "wait":
            answer = {"pid": request["pid"], "code": _wait(int(request["pid"]), float(request["timeout"]))}
        else:
            answer = {"error": f"unknown op {request['op']!r}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
