"""`lockgate runs list [--flow F] [--status S] [--limit N] [--json]` and `lockgate runs show ID [--json]`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.cli.flowtest import add_save_test


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("runs", help="list runs or show one, from the store")
    commands = parser.add_subparsers(dest="runs_command", metavar="list|show|save-test", required=True)
    listing = commands.add_parser("list", help="newest runs first")
    listing.add_argument("--flow", help="only runs of this flow id")
    listing.add_argument("--status", help="only runs in this status")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=list_command)
    show = commands.add_parser("show", help="one run with its steps")
    show.add_argument("run_id", metavar="ID")
    show.add_argument("--json", action="store_true")
    show.set_defaults(handler=show_command)
    add_save_test(commands)


def _sql() -> Any:
    from engine.config import EngineConfig
    from engine.store.db import init_db, make_engine

    engine = make_engine(EngineConfig.from_env().sql_url)
    init_db(engine)
    return engine


def list_command(args: argparse.Namespace) -> int:
    from engine.runtime.queries import list_runs

    runs = list_runs(_sql(), flow_id=args.flow, status=args.status, limit=args.limit)
    if args.json:
        print(json.dumps(runs, indent=2, ensure_ascii=False, default=str))
        return 0
    if not runs:
        print("no runs yet; start one with `lockgate run FILE`")
    for run in runs:
        print(f"{run['id']}  {run['status']:<11} {run['flow_id']} v{run['version']}  {run['created_at']}")
    return 0


def show_command(args: argparse.Namespace) -> int:
    from engine.cli.run import print_run, run_summary
    from engine.runtime.queries import get_run

    run = get_run(_sql(), args.run_id)
    if run is None:
        print(f"lockgate runs show: run {args.run_id!r} does not exist; list runs with `lockgate runs list`",
              file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(run_summary(run) | {"state": run["state"], "inputs": run["inputs"]}, indent=2,
                         ensure_ascii=False, default=str))
        return 0
    print_run(run, False)
    for step in run["steps"]:
        took = f" {step['duration_ms']:.1f} ms" if step["duration_ms"] is not None else ""
        tokens = (f" {step['tokens_in'] or 0:,} in / {step['tokens_out'] or 0:,} out tokens"
                  if step.get("tokens_in") is not None or step.get("tokens_out") is not None else "")
        error = f" — {step['error']}" if step["error"] else ""
        print(f"  {step['step']:<24} {step['status']:<10}{took}{tokens}{error}")
    return 0
