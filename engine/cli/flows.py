"""`lockgate flows list|diff`: published flows in the store."""

from __future__ import annotations

import argparse
from typing import Any

from engine.cli.diff import register_flows_diff

EXIT_OK = 0
LIST_COLUMNS = ("FLOW", "NAME", "VERSION", "ENABLED")


def register_list(commands: Any) -> None:
    listing = commands.add_parser("list", help="published flows: newest version, enabled or not")
    listing.add_argument("--json", action="store_true", help="print the FlowList as the HTTP API answers it")
    listing.set_defaults(handler=list_command)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("flows", help="published flows and their versions")
    commands = parser.add_subparsers(dest="flows_command", required=True)
    register_list(commands)
    register_flows_diff(commands)


def list_command(args: argparse.Namespace) -> int:
    from engine.cli.output import note, print_json, print_table
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable

    try:
        with engine_api("lockgate flows list") as api:
            flows = api.list_flows()
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    if args.json:
        print_json(flows)
        return EXIT_OK
    if not flows.flows:
        note("no published flows; publish one with `lockgate publish FILE`")
        return EXIT_OK
    print_table(LIST_COLUMNS, [(f.flow_id, f.name, f.version, "yes" if f.enabled else "no") for f in flows.flows])
    return EXIT_OK
