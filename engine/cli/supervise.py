"""`lockgate worker --processes N [--http HOST:PORT [--http-processes K]]`: bind the HTTP port, start (or reuse)
Redis, then supervise N executor processes, one projector process and K http processes (default 1, each serving on
its own socket of the port bound here, `engine.api.listener.listen_sockets`) until SIGINT/SIGTERM
(`engine.runtime.supervisor`)."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

log = logging.getLogger("lockgate.supervisor")


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
    messages; `port_option` is how its user picks another port.

    A process started as `lockgate` (its logging configured by `app.main`) becomes the supervisor's own light
    process (`engine.cli.supervisor_process`) once the port is bound; one embedding this call supervises in it."""
    from engine.api.listener import listen_sockets, socket_url
    from engine.cli.settings import command_config
    from engine.cli.supervisor_process import SupervisorPlan, exec_supervisor, run
    from engine.cli.worker import http_refusal
    from engine.logs import configured
    from engine.runtime.supervisor import default_executor_processes

    config = command_config()
    listeners: list[socket.socket] = []
    if address is not None:
        try:
            # Bound here, once, for every http child: a taken port fails at once, and requests wait in the backlog
            # while the children start or one restarts.
            listeners = listen_sockets(*address, count=http_processes)
        except OSError as exc:
            print(http_refusal(label, address, exc, port_option), file=sys.stderr)
            return 2
    logging_setup = configured()
    # The children check the schema (and upgrade the data folder's own SQLite file) themselves; one that refuses
    # it exits with code 3 and its message, and the supervisor stops with that code.
    plan = SupervisorPlan(
        label=label, executors=processes or default_executor_processes(), threads=max(1, workers),
        http_fds=tuple(os.dup(sock.fileno()) for sock in listeners),
        http_url=socket_url(listeners[0]) if listeners else None, data_dir=str(config.data_dir),
        redis_url=config.redis_url, key_prefix=config.key_prefix, sql_url=config.sql_url,
        log_level=logging_setup.level if logging_setup is not None else None,
        log_file=str(logging_setup.file) if logging_setup is not None and logging_setup.file else None)
    for sock in listeners:
        sock.close()  # the plan holds duplicates of their descriptors
    if logging_setup is None:
        return run(plan)
    log.debug("handing over to the supervisor process: %s", plan)
    exec_supervisor(plan)
    return 0  # not reached: exec_supervisor replaces this process
