"""`lockgate worker --processes N [--http HOST:PORT [--http-processes K]]`: bind the HTTP port, start (or reuse)
Redis, then supervise N executor processes, one projector process and K http processes (default 1, each serving on
its own socket of the port bound here, `engine.api.listener.listen_sockets`) until SIGINT/SIGTERM
(`engine.runtime.supervisor`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from typing import Any

log = logging.getLogger("lockgate.supervisor")

CHILD_COMMAND = (sys.executable, "-m", "app")


def supervise_command(args: argparse.Namespace) -> int:
    """`lockgate worker --processes N [--http HOST:PORT [--http-processes K]]`."""
    from engine.cli.worker import parse_http_address

    if args.role != "all":
        print("lockgate worker: --processes starts its own executor and projector processes; "
              "leave out --role", file=sys.stderr)
        return 2
    if args.http_processes is not None and (not args.http or args.http_processes < 1):
        print("lockgate worker: --http-processes K needs --http and K of at least 1", file=sys.stderr)
        return 2
    if args.http_fd is not None:
        print("lockgate worker: --http-fd is how the supervisor starts its http processes; give --http instead",
              file=sys.stderr)
        return 2
    address = None
    if args.http:
        try:
            address = parse_http_address(args.http)
        except ValueError as exc:
            print(f"lockgate: {exc}", file=sys.stderr)
            return 2
    return supervise(args.processes, args.workers, address, args.http_processes or 1, "lockgate worker",
                     "--http HOST:PORT")


def supervise(processes: int | None, workers: int, address: tuple[str, int] | None, http_processes: int,
              label: str, port_option: str) -> int:
    """`processes` executor processes (None: one per core) of `workers` threads, a projector process and, with
    `address`, `http_processes` http processes serving on it, until SIGINT/SIGTERM. `label` starts this process's
    messages; `port_option` is how its user picks another port."""
    from engine.api.listener import listen_sockets, socket_url
    from engine.cli.settings import command_config
    from engine.cli.worker import http_refusal
    from engine.runtime.supervisor import Supervisor, default_executor_processes, layout
    from engine.transport.connection import open_redis

    listeners: list[socket.socket] = []
    if address is None:
        http_processes = 0
    else:
        try:
            # Bound here, once, for every http child: a taken port fails at once, and requests wait in the backlog
            # while the children start or one restarts.
            listeners = listen_sockets(*address, count=http_processes)
        except OSError as exc:
            print(http_refusal(label, address, exc, port_option), file=sys.stderr)
            return 2
    config = command_config()
    executors = processes or default_executor_processes()
    threads = max(1, workers)
    # The children check the schema (and upgrade the data folder's own SQLite file) themselves; one that refuses
    # it exits with code 3 and its message, and the supervisor stops with that code. SQLAlchemy and Alembic stay
    # out of this process, which only waits.
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    # One Redis for all children: the configured one, or the data folder's embedded server, owned here so it
    # lives exactly as long as the supervisor.
    redis = open_redis(config)
    env = {**os.environ, "LOCKGATE_REDIS_URL": redis.url, "LOCKGATE_DATA_DIR": str(config.data_dir),
           "LOCKGATE_KEY_PREFIX": config.key_prefix}
    # The log level reaches the children by LOCKGATE_LOG_LEVEL.
    specs = layout(executors, threads, CHILD_COMMAND, [sock.fileno() for sock in listeners])
    supervisor = Supervisor(specs, env)
    http_text = f", {http_processes} http process(es) serving {socket_url(listeners[0])}" if listeners else ""
    try:
        supervisor.start()
        print(f"{label}: supervising {executors} executor process(es) of {threads} worker thread(s), "
              f"one projector process{http_text} (pids {', '.join(map(str, supervisor.pids().values()))}) on "
              f"{redis.url}; SQL {config.sql_url}; stop them with Ctrl-C or SIGTERM", file=sys.stderr)
        log.info("supervising %d executor process(es) of %d thread(s), one projector and %d http process(es)",
                 executors, threads, http_processes)
        refused = supervisor.run(stop)
    finally:
        supervisor.stop()
        for sock in listeners:
            sock.close()
        redis.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if refused:
        print(f"{label}: a child refused to start (exit code {refused}, its message above); stopped",
              file=sys.stderr)
        return refused
    print(f"{label}: stopped", file=sys.stderr)
    return 0
