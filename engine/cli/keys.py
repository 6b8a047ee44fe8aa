"""`lockgate keys create NAME [--rights R,...] | revoke NAME | list [--json]`: API keys for the HTTP API.

`create` prints the new key alone on stdout, once; only its hash is stored. A key has every right unless
`--rights` names some: `read` (runs, flows, approvals, live streams), `start` (start, cancel and rerun runs),
`publish` (publish flows), `decide` (decide approvals).
Exit codes: 0 done, 1 refused (taken or unknown name, already revoked), 2 usage (an unknown right, a name no key
can have).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("keys", help="create, revoke or list API keys (the HTTP API's)")
    commands = parser.add_subparsers(dest="keys_command", metavar="create|revoke|list", required=True)
    create = commands.add_parser("create", help="create a key; it is printed once, alone on stdout")
    create.add_argument("name", metavar="NAME", help="who or what uses the key, e.g. ops-bot")
    create.add_argument("--rights", metavar="R,...", default=None,
                        help="what the key may do, comma-separated: read, start, publish, decide (default: all); "
                             "e.g. --rights read,decide for an approvals bot")
    create.set_defaults(handler=create_command)
    revoke = commands.add_parser("revoke", help="revoke a key; every request with it is refused from now on")
    revoke.add_argument("name", metavar="NAME")
    revoke.set_defaults(handler=revoke_command)
    listing = commands.add_parser("list", help="key names, rights and state (never the keys)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=list_command)


def open_sql() -> Any:
    """The store of the data folder (LOCKGATE_DB_URL or its SQLite file), migrated."""
    from engine.cli.settings import command_config
    from engine.store.db import init_db, make_engine

    config = command_config()
    config.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(config.sql_url)
    init_db(engine)
    return engine


def create_command(args: argparse.Namespace) -> int:
    from engine.approvals.keys import ALL_SCOPES, NAME_PATTERN, KeyProblem, create_key, rights_named, scopes_of_rights

    try:
        scopes = ALL_SCOPES if args.rights is None else scopes_of_rights(args.rights)
    except KeyProblem as exc:
        print(f"lockgate keys create: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        key = create_key(open_sql(), args.name, scopes=scopes)
    except KeyProblem as exc:
        print(f"lockgate keys create: {exc}", file=sys.stderr)
        return EXIT_REFUSED if NAME_PATTERN.match(args.name) else EXIT_USAGE  # taken, or a name no key can have
    print(key)
    rights = "every right" if scopes == ALL_SCOPES else "the rights " + ", ".join(rights_named(scopes))
    print(f'key "{args.name}" created with {rights}; it is shown only this once, so store it now', file=sys.stderr)
    return EXIT_OK


def revoke_command(args: argparse.Namespace) -> int:
    from engine.approvals.keys import KeyProblem, revoke_key

    try:
        revoke_key(open_sql(), args.name)
    except KeyProblem as exc:
        print(f"lockgate keys revoke: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    print(f'key "{args.name}" revoked', file=sys.stderr)
    return EXIT_OK


def list_command(args: argparse.Namespace) -> int:
    from engine.approvals.keys import list_keys, rights_named
    from engine.cli.output import note, print_table

    keys = list_keys(open_sql())
    if args.json:
        print(json.dumps([key.to_data() for key in keys], indent=2))
        return EXIT_OK
    if not keys:
        note("no keys yet; create one with `lockgate keys create NAME`")
        return EXIT_OK
    print_table(
        ("NAME", "STATE", "RIGHTS"),
        [(key.name, f"revoked {key.revoked_at}" if key.revoked_at else "active",
          ",".join(rights_named(key.scopes))) for key in keys],
    )
    return EXIT_OK
