"""`lockgate worker [--workers N] [--processes N] [--role ROLE] [--http HOST:PORT] [--http-processes K]
[--log-level LEVEL]`: the engine services headless until SIGINT/SIGTERM, then a clean stop. Its warnings and errors
also go out on the keyspace's `logs` channel.

Without `--processes` everything runs in this one process (`--role all`), or, with `--http-processes K`, everything
but the API, which K http processes of its own serve (`engine.cli.http_children`). With `--processes N` this process
supervises N executor processes, one projector process and, with `--http`, K http processes sharing the port it
binds (`engine.runtime.supervisor`); `--role` (and `--http-fd`, the inherited socket) is how the supervisor starts
each of them.

On a shared database (LOCKGATE_DB_URL) a worker does not upgrade the schema itself: it refuses one that is not
current and names `lockgate admin migrate`. The data folder's own SQLite file is upgraded at start, as before
(LOCKGATE_AUTO_MIGRATE=1 does that for a shared database too, e.g. for a throwaway test database)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

SWITCH_INTERVAL_SECONDS = 0.001
STOP_DEADLINE_SECONDS = 10.0
"""After SIGINT/SIGTERM, how long the clean stop may take before the process exits anyway (a second signal exits at
once): a stop that waits on a Redis or database that does not answer must not keep the process alive."""
ROLES = ("all", "executor", "projector", "http")
log = logging.getLogger("lockgate.worker")


def level_option(text: str) -> str:
    """`--log-level` as argparse reads it: a bad level is a usage error (exit 2) naming the levels."""
    from engine.logs import LogLevelError, parse_level

    try:
        return parse_level(text)
    except LogLevelError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--log-level ")) from None


def add_log_level(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--log-level", type=level_option, default=default, metavar="LEVEL",
                        help="debug, info (default), warning, error or critical; the log file gets this level "
                             "and worse, stderr warnings and worse (also LOCKGATE_LOG_LEVEL)")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "worker", help="run the engine headless (workers, projector, due waker) until interrupted",
        description="Run the engine services on the data folder's embedded Redis and SQLite, or on "
        "LOCKGATE_REDIS_URL and LOCKGATE_DB_URL, until SIGINT or SIGTERM.")
    parser.add_argument("--workers", type=int, default=4,
                        help="worker threads (default 4); with --processes, per executor process")
    parser.add_argument("--processes", type=int, default=None, metavar="N",
                        help="supervise N executor processes and one projector process (0: one executor per core), "
                             "and with --http the http processes; default: everything in this one process")
    parser.add_argument("--role", choices=ROLES, default="all",
                        help="what this process runs: all (default), executor (workers only), projector "
                             "(projector, due waker, scheduler, reaper, watchdog) or http (the HTTP API only)")
    parser.add_argument("--http", metavar="HOST:PORT", default=None,
                        help="also serve the HTTP API and webhooks there, e.g. 127.0.0.1:8080 (default: off); with "
                             "--processes, in http processes of their own")
    parser.add_argument("--http-processes", type=int, default=None, metavar="K",
                        help="with --http: serve the API from K http processes of their own sharing the port "
                             "(default: in this process, or 1 with --processes); without --processes the engine "
                             "stays in this one")
    parser.add_argument("--http-fd", type=int, default=None, metavar="FD",
                        help="serve the HTTP API on this inherited listening socket instead of binding --http "
                             "(how the supervisor starts its http processes)")
    # Also accepted before the command (`lockgate --log-level debug worker`); given here, it wins.
    add_log_level(parser, argparse.SUPPRESS)
    parser.set_defaults(handler=worker_command)


def parse_http_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--http {text!r} is not HOST:PORT; write e.g. 127.0.0.1:8080")
    if int(port) > 65535:
        raise ValueError(f"--http {text!r}: port {int(port)} is out of range (1-65535); write e.g. 127.0.0.1:8080")
    return host, int(port)


def http_refusal(label: str, address: tuple[str, int], exc: OSError, port_option: str) -> str:
    """The message of a process that cannot bind its HTTP port."""
    host, port = address
    return f"{label}: cannot serve HTTP on {host}:{port} ({exc.strerror or exc}); pick a free port with {port_option}"


def auto_migrate(config: Any) -> bool:
    """Whether this worker upgrades the schema itself: on the data folder's SQLite file, or when asked
    (`LOCKGATE_AUTO_MIGRATE`)."""
    from engine.cli.settings import command_settings

    return config.db_url is None or command_settings().auto_migrate


def role_options(role: str, workers: int) -> dict[str, Any]:
    """EngineServices options of one process role."""
    if role == "executor":
        return {"workers": workers, "projector": False, "due_waker": False, "scheduler": False, "reaper": False}
    if role == "projector":
        return {"workers": 0}
    if role == "http":
        # Requests only: create runs, read the store, wait on the live channel; the other roles do the rest.
        return {"workers": 0, "projector": False, "due_waker": False, "scheduler": False, "reaper": False,
                "concurrency_control": False}
    return {"workers": workers}


def _exit_now(label: str, why: str) -> None:
    """End the process at once, with what each thread was doing on stderr (written to its descriptor directly: no lock
    a stuck thread holds can stop it). Jobs in hand stay pending and are redelivered, as after a crash."""
    import faulthandler
    import os

    try:
        os.write(2, f"{label}: {why}; exiting without a clean stop. Threads:\n".encode())
        faulthandler.dump_traceback(sys.stderr.fileno() if sys.stderr is not None else 2, all_threads=True)
    except (OSError, ValueError):
        pass
    os._exit(1)


def worker_command(args: argparse.Namespace) -> int:
    if args.processes is not None:
        from engine.cli.supervise import supervise_command

        return supervise_command(args)
    if args.http_processes is not None and (not args.http or args.http_processes < 1 or args.role != "all"
                                            or args.http_fd is not None):
        print("lockgate worker: --http-processes K needs --http and K of at least 1 (and no --role or --http-fd)",
              file=sys.stderr)
        return 2
    try:
        http_address = parse_http_address(args.http) if args.http else None
    except ValueError as exc:
        print(f"lockgate: {exc}", file=sys.stderr)
        return 2
    if args.role == "http" and http_address is None and args.http_fd is None:
        print("lockgate worker: --role http needs --http HOST:PORT (or --http-fd)", file=sys.stderr)
        return 2
    return run_engine(args, http_address, "lockgate worker", http_fd=args.http_fd,
                      http_processes=args.http_processes or 0)


def run_engine(args: argparse.Namespace, http_address: tuple[str, int] | None, label: str,
               port_option: str = "--http HOST:PORT", http_fd: int | None = None, http_processes: int = 0) -> int:
    """The engine services of `args.role` with `args.workers`, and the HTTP API at `http_address` (or on the
    inherited listening socket `http_fd`), until SIGINT or SIGTERM; `label` starts this process's messages,
    `port_option` is how its user picks another port. With `http_processes` K, the API is served by K http
    processes of its own, children of this one (`HttpChildren`), and the engine runs here."""
    # httpx imports its command-line tool when click, rich and pygments are installed (they are, for the
    # CLI); a worker never runs it, and without them each engine process is ~6 MB smaller. httpx falls back
    # to a stub `main` when the import fails, as it does where they are not installed.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    from engine.cli.http_children import CHILD_POLL_SECONDS, HttpChildren
    from engine.cli.served_url import record_served_url
    from engine.cli.settings import command_config, command_settings
    from engine.gc_pauses import freeze_startup_objects
    from engine.host import EngineServices
    from engine.log_channel import LogPublisher
    from engine.logs import configured
    from engine.malloc_arenas import one_malloc_arena
    from engine.outages import outage, unreachable
    from engine.shown_urls import shown_url
    from engine.stop_signals import StopSignals
    from engine.store.schema_check import SchemaMismatch

    one_malloc_arena()
    config = command_config()
    if args.role != "http":
        # Engine threads: a shorter GIL switch interval lets a thread back from Redis or SQL run sooner instead
        # of queueing behind a busy one (about +20% runs/s in the benchmark). An http process keeps Python's: its
        # event loop does most of its work, and handing the GIL to its few threads every 1 ms cost it about 7%
        # more CPU a sync start, at no gain in starts a second.
        sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    stop = threading.Event()
    deadlines: list[threading.Timer] = []

    def on_signal(received: signal.Signals) -> None:
        if stop.is_set():
            _exit_now(label, f"a second {received.name} while stopping")
        stop.set()
        deadline = threading.Timer(STOP_DEADLINE_SECONDS, _exit_now,
                                   (label, f"the stop took longer than {STOP_DEADLINE_SECONDS:g}s"))
        deadline.daemon = True
        deadlines.append(deadline)
        deadline.start()

    signals = StopSignals(on_signal).install()
    options = role_options(args.role, max(1, args.workers))
    services = EngineServices(config, migrate=auto_migrate(config), role=args.role, settings=command_settings(),
                              **options)
    api = None
    children: HttpChildren | None = None
    publisher: LogPublisher | None = None
    refused = 0
    try:
        if http_processes:
            assert http_address is not None  # worker_command asks for --http with --http-processes
            try:
                children = HttpChildren.bind(http_address, http_processes)
            except OSError as exc:
                print(http_refusal(label, http_address, exc, port_option), file=sys.stderr)
                return 2
        elif http_fd is not None:
            from engine.api.listener import adopt_socket
            from engine.api.server import ApiServer

            try:
                api = ApiServer(services, listening=adopt_socket(http_fd))
            except OSError as exc:
                print(f"{label}: cannot serve HTTP on --http-fd {http_fd} ({exc.strerror or exc})", file=sys.stderr)
                return 2
        elif http_address is not None:
            from engine.api.server import ApiServer

            try:
                # Bound before the engine starts: a taken port fails at once, and clients connecting while the
                # engine starts wait in the listen backlog instead of being refused.
                api = ApiServer(services, *http_address)
            except OSError as exc:
                print(http_refusal(label, http_address, exc, port_option), file=sys.stderr)
                return 2
        try:
            services.start()
        except SchemaMismatch as exc:
            print(f"{label}: {exc}", file=sys.stderr)
            return 3
        except Exception as exc:
            if not outage(exc):
                raise
            # Not a refusal: the same command works once the service answers (a supervisor starts it again).
            print(f"{label}: cannot start: {unreachable(exc, config.redis_url, config.db_url)}", file=sys.stderr)
            return 1
        if services.redis is not None:
            publisher = LogPublisher(services.redis.client(), services.keys.logs).start()
            logging.getLogger().addHandler(publisher)
        if api is not None:
            api.start()
            record_served_url(config.data_dir, api.url)
            print(f"{label}: HTTP API and webhooks on {api.url}", file=sys.stderr)
        if children is not None:
            pids = children.start(services, config)
            record_served_url(config.data_dir, children.url)
            print(f"{label}: HTTP API and webhooks on {children.url}, served by {http_processes} http process(es) "
                  f"(pids {', '.join(map(str, pids))})", file=sys.stderr)
        freeze_startup_objects()
        where = shown_url(config.redis_url) or f"embedded Redis in {config.data_dir}"
        sql = shown_url(config.sql_url)
        print(f"{label}: {options['workers']} worker(s) on {where}, SQL {sql}, role {args.role}; "
              "Ctrl-C stops", file=sys.stderr)
        setup = configured()
        if setup is not None and setup.file is not None:
            print(f"{label}: log in {setup.file}", file=sys.stderr)
        log.info("%d worker(s) on %s, SQL %s, role %s", options["workers"], where, sql, args.role)
        while not stop.wait(CHILD_POLL_SECONDS if children is not None else 0.5):
            if children is not None and (refused := children.tick()):
                print(f"{label}: an http process refused to start (exit code {refused}, its message above)",
                      file=sys.stderr)
                break
        print(f"{label}: stopping", file=sys.stderr)
        log.info("stopping")
    finally:
        if children is not None:
            children.stop()  # first: requests in flight finish while the engine still runs
        if api is not None:
            api.stop()
        if publisher is not None:
            logging.getLogger().removeHandler(publisher)
            publisher.close()
        services.stop()
        signals.restore()
        for deadline in deadlines:
            deadline.cancel()  # stopped in time (this function may run inside a longer-lived process)
    print(f"{label}: stopped", file=sys.stderr)
    return refused
