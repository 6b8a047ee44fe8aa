"""`lockgate flows ...`: published flows in the store."""

from __future__ import annotations

from typing import Any

from engine.cli.diff import register_flows_diff


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("flows", help="published flows and their versions")
    commands = parser.add_subparsers(dest="flows_command", metavar="diff", required=True)
    register_flows_diff(commands)
