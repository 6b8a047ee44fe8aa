"""`lockgate serve [--host H] [--port P] [--workers N] [--processes N] [--http-processes K]`: the engine (workers,
projector, due waker, ...) and its HTTP API (`/api/v1`, webhooks, callbacks, live runs) in this process until SIGINT
or SIGTERM, then a clean stop; with `--processes`, in processes of their own under this one
(`engine.cli.supervise`, as `lockgate worker --processes N --http HOST:PORT`); with only `--http-processes K`, the
engine here and the API in K http processes of its own (`engine.cli.http_children`).

Exit codes: 0 stopped by a signal, 2 the port is taken or a usage error, 3 a store whose schema is not current.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


def register(subparsers: Any) -> None:
    from engine.cli.worker import add_log_level

    parser = subparsers.add_parser(
        "serve",
        help="run the engine and its HTTP API until interrupted",
        description="Run the engine services and serve the HTTP API (docs/api.md) on HOST:PORT until SIGINT or "
        "SIGTERM. The address it serves on is printed to stderr (useful with --port 0).",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to listen on (default {DEFAULT_PORT}; 0: any free port)"
    )
    parser.add_argument("--workers", type=int, default=4,
                        help="worker threads (default 4); with --processes, per executor process")
    parser.add_argument("--processes", type=int, default=None, metavar="N",
                        help="run N executor processes, a projector process and the API in processes of their own, "
                             "under this one: more runs a second on several cores, more memory (docs/deployment.md)")
    parser.add_argument("--http-processes", type=int, default=None, metavar="K",
                        help="serve the API from K http processes of their own sharing the port (default: in "
                             "this process, or 1 with --processes); without --processes the engine stays in this "
                             "one")
    add_log_level(parser, argparse.SUPPRESS)
    parser.set_defaults(handler=serve_command, role="all")


def serve_command(args: argparse.Namespace) -> int:
    from engine.cli.worker import run_engine

    if not 0 <= args.port <= 65535:
        print(f"lockgate serve: --port {args.port} is not a port; pick one from 0 to 65535", file=sys.stderr)
        return 2
    if args.http_processes is not None and args.http_processes < 1:
        print("lockgate serve: --http-processes K needs K of at least 1", file=sys.stderr)
        return 2
    if args.processes is not None:
        if args.processes < 1:
            print(f"lockgate serve: --processes {args.processes}: give at least 1", file=sys.stderr)
            return 2
        from engine.cli.supervise import supervise

        return supervise(args.processes, args.workers, (args.host, args.port), args.http_processes or 1,
                         "lockgate serve", "--port")
    return run_engine(args, (args.host, args.port), "lockgate serve", port_option="--port",
                      http_processes=args.http_processes or 0)
