"""`lockgate admin migrate` (upgrade a shared database's schema, once, before workers start) and
`lockgate admin status [--json]` (what a shared deployment is doing: processes and hosts, projector lease,
stream lag, pending and dead jobs, parked runs by reason)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("admin", help="operate a shared deployment (schema migration, status)")
    commands = parser.add_subparsers(dest="admin_command", metavar="migrate|status", required=True)
    migrate = commands.add_parser(
        "migrate", help="upgrade the database's schema to this lockgate's (LOCKGATE_DB_URL, else the data folder's)")
    migrate.set_defaults(handler=migrate_command)
    status = commands.add_parser("status", help="processes, hosts, projector lease, stream lag, jobs, parked runs")
    status.add_argument("--json", action="store_true", help="the same as one JSON document")
    status.set_defaults(handler=status_command)


def migrate_command(args: argparse.Namespace) -> int:
    from engine.cli.settings import command_config
    from engine.store.db import init_db, make_engine
    from engine.store.schema_check import schema_state

    config = command_config()
    sql = make_engine(config.sql_url)
    try:
        before = schema_state(sql)
        if before.status == "newer":
            print(f"lockgate admin migrate: the database is at revision {before.current}, newer than this lockgate "
                  f"(its newest is {before.head}); run the migration from the newer lockgate", file=sys.stderr)
            return 3
        if before.status == "current":
            print(f"lockgate admin migrate: the schema is current ({before.head}); nothing to do")
            return 0
        init_db(sql)
        after = schema_state(sql)
    finally:
        sql.dispose()
    print(f"lockgate admin migrate: schema upgraded from {before.current or 'nothing'} to {after.current}")
    return 0


def status_command(args: argparse.Namespace) -> int:
    import orjson

    from engine.cli.settings import command_config
    from engine.runtime.deployment_status import deployment_status
    from engine.store.db import make_engine
    from engine.transport.connection import open_redis
    from engine.transport.keys import Keyspace

    config = command_config()
    sql = make_engine(config.sql_url)
    handle = open_redis(config)
    try:
        status = deployment_status(handle.client(), Keyspace(config.key_prefix), sql)
    finally:
        handle.close()
        sql.dispose()
    if args.json:
        print(orjson.dumps(status.to_data(), option=orjson.OPT_INDENT_2).decode())
        return 0
    _print_status(status)
    return 0


def _print_status(status: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    schema = status.schema
    console.print(f"schema: {schema.status} (database {schema.current or 'empty'}, code {schema.head})")
    now = time.time()
    table = Table("host", "pid", "role", "workers", "up", "seen", title=f"{len(status.processes)} engine process(es) "
                  f"on {len(status.hosts)} host(s)")
    for process in status.processes:
        table.add_row(process.host, str(process.pid), process.role, str(process.workers),
                      f"{now - process.started_at:.0f}s", f"{now - process.seen_at:.1f}s ago")
    console.print(table)
    if status.worker_names:
        console.print("worker names: " + ", ".join(status.worker_names))
    lease = status.lease
    console.print("projector lease: " + (f"{lease.holder}, renewed {lease.renewed_seconds_ago:.1f}s ago"
                                          if lease.holder else "nobody holds it (no projector is active)"))
    for stream in (status.jobs, status.events):
        lag = "?" if stream.lag is None else str(stream.lag)
        console.print(f"{stream.stream}: {stream.length} entries, lag {lag}, pending {stream.pending}")
    console.print(f"dead jobs: {status.dead_jobs}; dead-lettered events: {status.dead_events}")
    console.print("runs: " + (", ".join(f"{name} {count}" for name, count in sorted(status.runs_by_status.items()))
                              or "none"))
    console.print("parked runs by reason: " + (", ".join(f"{reason} {count}" for reason, count in
                                                         status.parked_by_reason.items()) or "none"))
