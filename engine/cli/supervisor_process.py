"""The supervisor of `lockgate worker --processes N` (and `lockgate serve --processes N`) once its command is read.

`engine.cli.supervise` reads the settings and binds the HTTP port with the whole command line loaded, then
replaces its process with this module: `python -m engine.cli.supervisor_process` with the command's own
arguments (for `ps`), the same pid, the plan in `PLAN_ENV` and the listening sockets inherited. Supervising only
starts, watches and stops processes; pydantic, SQLAlchemy and the Redis client would otherwise stay in its memory
for the life of the deployment (about 50 MB against 18 MB). So this module, and what it imports, stays within the
standard library and the engine's light leaf modules.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.logs import configure_logging
from engine.relaunch import lockgate_command, python_command
from engine.runtime.supervisor import Supervisor, child_env, layout
from engine.shown_urls import shown_url
from engine.stop_signals import StopSignals
from engine.transport.embedded import EmbeddedRedis

log = logging.getLogger("lockgate.supervisor")

CHILD_COMMAND = tuple(lockgate_command())
PLAN_ENV = "LOCKGATE_SUPERVISOR_PLAN"
"""The plan of the process that exec'd this one (`SupervisorPlan.to_json`); read once and taken out of the
environment, so the children do not inherit it."""


@dataclass(frozen=True)
class SupervisorPlan:
    """What the supervisor runs, as its command line read it."""

    label: str
    """Starts this process's messages (`lockgate worker`)."""
    executors: int
    threads: int
    """Worker threads per executor process."""
    http_fds: tuple[int, ...]
    """Listening sockets, one per http child (all on one port)."""
    http_url: str | None
    data_dir: str
    redis_url: str | None
    """None: the data folder's embedded server, started (or reused) and kept running here."""
    key_prefix: str
    sql_url: str
    """For the start-up message only; the children read the settings themselves."""
    log_level: str | None = None
    log_file: str | None = None
    """Where the process that read the command logged (`worker.log`); None: it configured no file."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SupervisorPlan:
        fields: dict[str, Any] = json.loads(text)
        return cls(**{**fields, "http_fds": tuple(fields["http_fds"])})


def exec_supervisor(plan: SupervisorPlan) -> None:
    """Replace this process with the supervisor of `plan` (keeping its pid and the plan's sockets); never returns."""
    for fd in plan.http_fds:
        os.set_inheritable(fd, True)
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os.environ[PLAN_ENV] = plan.to_json()
    os.execv(sys.executable, python_command("-m", "engine.cli.supervisor_process", *sys.argv[1:]))


def run(plan: SupervisorPlan) -> int:
    """Supervise `plan`'s children until SIGINT/SIGTERM or one refuses to start (its exit code is returned)."""
    stop = threading.Event()
    signals = StopSignals(lambda _signal: stop.set()).install()
    # One Redis for all children: the configured one, or the data folder's embedded server, owned here so it
    # lives exactly as long as the supervisor.
    server = None
    redis_url = plan.redis_url
    if redis_url is None:
        server = EmbeddedRedis(Path(plan.data_dir)).start()
        server.keep_running()
        redis_url = server.url
    env = child_env(redis_url, plan.data_dir, plan.key_prefix, plan.http_url)
    supervisor = Supervisor(layout(plan.executors, plan.threads, CHILD_COMMAND, plan.http_fds), env)
    http_processes = len(plan.http_fds)
    http_text = f", {http_processes} http process(es) serving {plan.http_url}" if plan.http_url else ""
    try:
        supervisor.start()
        print(f"{plan.label}: supervising {plan.executors} executor process(es) of {plan.threads} worker thread(s), "
              f"one projector process{http_text} (pids {', '.join(map(str, supervisor.pids().values()))}) on "
              f"{shown_url(redis_url)}; SQL {shown_url(plan.sql_url)}; stop them with Ctrl-C or SIGTERM",
              file=sys.stderr)
        log.info("supervising %d executor process(es) of %d thread(s), one projector and %d http process(es)",
                 plan.executors, plan.threads, http_processes)
        refused = supervisor.run(stop)
    finally:
        supervisor.stop()
        for fd in plan.http_fds:
            os.close(fd)
        if server is not None:
            server.stop()
        signals.restore()
    if refused:
        print(f"{plan.label}: a child refused to start (exit code {refused}, its message above); stopped",
              file=sys.stderr)
        return refused
    print(f"{plan.label}: stopped", file=sys.stderr)
    return 0


def main() -> int:
    text = os.environ.pop(PLAN_ENV, None)
    if text is None:
        print(f"engine.cli.supervisor_process is started by `lockgate worker --processes N`, which sets {PLAN_ENV}",
              file=sys.stderr)
        return 2
    plan = SupervisorPlan.from_json(text)
    if plan.log_level is not None:
        log_file = Path(plan.log_file) if plan.log_file else None
        configure_logging(plan.log_level, log_file.parent if log_file else None, console=True,
                          name=log_file.stem if log_file else "worker")
    return run(plan)


if __name__ == "__main__":
    sys.exit(main())
