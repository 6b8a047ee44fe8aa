"""`lockgate approvals list [--json]` and `lockgate approvals decide ID approve|reject [--comment TEXT] --key K`.

Exit codes: 0 listed / decision accepted, 1 decision refused (unknown or already decided approval,
after the timeout, bad or revoked key, no rights), 2 usage (no key given).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
KEY_ENV = "LOCKGATE_API_KEY"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("approvals", help="list pending approvals or decide one with an API key")
    commands = parser.add_subparsers(dest="approvals_command", metavar="list|decide", required=True)
    listing = commands.add_parser("list", help="pending approvals, soonest to time out first")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=list_command)
    decide = commands.add_parser("decide", help="approve or reject a pending approval")
    decide.add_argument("approval_id", metavar="ID")
    decide.add_argument("decision", choices=("approve", "reject"))
    decide.add_argument("--comment", metavar="TEXT", help="recorded with the decision")
    decide.add_argument("--key", metavar="K", help=f"an API key from `lockgate keys create` (or set {KEY_ENV})")
    decide.add_argument("--json", action="store_true", help="print the result as JSON")
    decide.set_defaults(handler=decide_command)


@contextmanager
def open_handles() -> Iterator[Any]:
    """Redis (configured or the data folder's embedded one) and the store, closed afterwards."""
    from engine.config import EngineConfig
    from engine.runtime.handles import EngineHandles
    from engine.store.db import init_db, make_engine
    from engine.transport.connection import open_redis
    from engine.transport.keys import Keyspace

    config = EngineConfig.from_env()
    config.data_dir.mkdir(parents=True, exist_ok=True)
    sql = make_engine(config.sql_url)
    init_db(sql)
    redis_handle = open_redis(config)
    try:
        yield EngineHandles(redis_handle.client(), Keyspace(config.key_prefix), sql)
    finally:
        redis_handle.close()
        sql.dispose()


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def list_command(args: argparse.Namespace) -> int:
    from engine.approvals.pending import list_pending

    with open_handles() as handles:
        pending = list_pending(handles)
    if args.json:
        print(json.dumps([item.to_data() for item in pending], indent=2, ensure_ascii=False))
        return EXIT_OK
    if not pending:
        print("no pending approvals")
    for item in pending:
        print(f"{item.id}  {item.flow_id}/{item.node_id}  run {item.run_id}  expires {_when(item.expires_at)}")
        if item.message:
            print(f"    {item.message}")
    return EXIT_OK


def decide_command(args: argparse.Namespace) -> int:
    from engine.approvals.decide import decide_with_key

    key = args.key or os.environ.get(KEY_ENV)
    if not key:
        print(f"lockgate approvals decide: no API key; pass --key K (or set {KEY_ENV}); create one with "
              "`lockgate keys create NAME`", file=sys.stderr)
        return EXIT_USAGE
    with open_handles() as handles:
        result = decide_with_key(handles, args.approval_id, args.decision, key, args.comment)
    if args.json:
        print(json.dumps(result.to_data(), indent=2, ensure_ascii=False))
    if not result.accepted:
        print(f"lockgate approvals decide: refused ({result.reason}): {result.message}", file=sys.stderr)
        return EXIT_REFUSED
    if not args.json:
        print(result.message)
    return EXIT_OK
