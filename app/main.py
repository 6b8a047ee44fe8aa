"""The `lockgate` command: no arguments opens the app; subcommands are engine CLI pieces."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from engine import __version__

# Each module defines `register(subparsers)`; it adds its parser and sets `handler=fn(args) -> int`.
# Keep imports inside handlers so `lockgate --help` stays fast.
COMMAND_MODULES: list[str] = [
    "engine.cli.validate",
    "engine.cli.run",
    "engine.cli.worker",
    "engine.cli.runs",
    "engine.cli.provider_sim",
    "engine.cli.budgets",
    "engine.cli.keys",
    "engine.cli.approvals",
    "engine.cli.triggers",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lockgate",
        description="Lockgate: durable automation flows. With no command, opens the app.",
    )
    parser.add_argument("--version", action="version", version=f"lockgate {__version__}")
    parser.add_argument("--data-dir", help="data folder (default: LOCKGATE_DATA_DIR or the platform's)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.data_dir:
        os.environ["LOCKGATE_DATA_DIR"] = args.data_dir
    if args.command is None:
        from app.gui import run_app

        return run_app()
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
