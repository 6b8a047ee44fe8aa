"""`lockgate runs list|show|cancel|watch|rerun|save-test`: runs through the engine's facade (`EngineApi`).

Each subcommand is a `register_*` function below (or in its own module) listed in `SUBCOMMANDS`.
Exit codes: 0 done, 1 an unknown run (or, for `watch`, a run that did not succeed), 2 usage (for `list`, a
bad cursor or a --limit outside 1 to MAX_LIST_LIMIT), 3 a store whose schema is not current.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, get_args

from engine.cli import rerun, runs_watch
from engine.cli.flowtest import add_save_test
from engine.read_models import MAX_LIST_LIMIT, RunStatus

EXIT_OK = 0
EXIT_UNKNOWN = 1
EXIT_USAGE = 2
DEFAULT_LIST_LIMIT = 50
LIST_COLUMNS = ("ID", "STATUS", "FLOW", "VERSION", "NODE", "WAITING ON", "CREATED")


def register_list(commands: Any) -> None:
    listing = commands.add_parser("list", help="runs, newest first")
    listing.add_argument("--flow", help="only runs of this flow id")
    listing.add_argument("--status", choices=get_args(RunStatus), help="only runs in this status")
    listing.add_argument("--limit", type=int, default=DEFAULT_LIST_LIMIT,
                         help=f"at most this many, 1 to {MAX_LIST_LIMIT} (default {DEFAULT_LIST_LIMIT})")
    listing.add_argument("--cursor", help="continue after a page: the next_cursor of --json")
    listing.add_argument("--json", action="store_true", help="print the RunList as the HTTP API answers it")
    listing.set_defaults(handler=list_command)


def register_show(commands: Any) -> None:
    show = commands.add_parser("show", help="one run: current node, what it waits on, errors, cost, tokens, steps")
    show.add_argument("run_id", metavar="ID")
    show.add_argument("--json", action="store_true", help="print the Run as the HTTP API answers it")
    show.set_defaults(handler=show_command)


def register_cancel(commands: Any) -> None:
    cancel = commands.add_parser("cancel", help="cancel a run (a running one stops at its next step)")
    cancel.add_argument("run_id", metavar="ID")
    cancel.add_argument("--reason", default="cancelled from the command line", help="recorded with the run")
    cancel.add_argument("--json", action="store_true", help="print the CancelledRun as the HTTP API answers it")
    cancel.set_defaults(handler=cancel_command)


SUBCOMMANDS: list[Callable[[Any], None]] = [
    register_list, register_show, register_cancel, runs_watch.register, rerun.register_rerun,
    add_save_test,
]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("runs", help="list, show, cancel and watch runs")
    commands = parser.add_subparsers(dest="runs_command", required=True)
    for add in SUBCOMMANDS:
        add(commands)


def unknown_run(command: str, run_id: str) -> int:
    from engine.cli.output import cli_hinted

    print(f"lockgate runs {command}: {cli_hinted('unknown_run', f'run {run_id!r} does not exist')}", file=sys.stderr)
    return EXIT_UNKNOWN


def list_command(args: argparse.Namespace) -> int:
    from engine.cli.output import note, print_json, print_table
    from engine.cli.run_view import waiting_label
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable
    from engine.facade import BadCursor

    if not 1 <= args.limit <= MAX_LIST_LIMIT:
        print(f"lockgate runs list: --limit {args.limit} is out of range; give a number from 1 to {MAX_LIST_LIMIT} "
              "(and page on with --cursor)", file=sys.stderr)
        return EXIT_USAGE
    try:
        with engine_api("lockgate runs list") as api:
            runs = api.list_runs(status=args.status, flow_id=args.flow, limit=args.limit, cursor=args.cursor)
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    except BadCursor as exc:
        print(f"lockgate runs list: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print_json(runs)
        return EXIT_OK
    if not runs.runs:
        note("no runs" + (" match" if args.status or args.flow else " yet; start one with `lockgate run FILE`"))
        return EXIT_OK
    print_table(
        LIST_COLUMNS,
        [
            (run.id, run.status, run.flow_id, run.version, run.current_node, waiting_label(run), run.created_at)
            for run in runs.runs
        ],
    )
    if runs.next_cursor is not None:
        options = {"status": args.status, "flow": args.flow,
                   "limit": args.limit if args.limit != DEFAULT_LIST_LIMIT else None}
        note(f"more runs: lockgate runs list --cursor {runs.next_cursor}"
             + "".join(f" --{name} {value}" for name, value in options.items() if value is not None))
    return EXIT_OK


def show_command(args: argparse.Namespace) -> int:
    from engine.cli.output import print_json, print_table
    from engine.cli.run_view import STEP_COLUMNS, header_lines, step_rows
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable

    try:
        with engine_api("lockgate runs show") as api:
            run = api.get_run(args.run_id)
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    if run is None:
        return unknown_run("show", args.run_id)
    if args.json:
        print_json(run)
        return EXIT_OK
    for line in header_lines(run):
        print(line)
    print_table(STEP_COLUMNS, step_rows(run))
    return EXIT_OK


def cancel_command(args: argparse.Namespace) -> int:
    from engine.cli.output import print_json
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable

    try:
        with engine_api("lockgate runs cancel") as api:
            cancelled = api.cancel_run(args.run_id, args.reason)
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    except LookupError:
        return unknown_run("cancel", args.run_id)
    if args.json:
        print_json(cancelled)
    elif cancelled.status == "cancelling":
        print(f"run {cancelled.run_id}: cancelling (it stops at its next step boundary)")
    elif cancelled.status == "cancelled":
        print(f"run {cancelled.run_id}: cancelled")
    else:
        print(f"run {cancelled.run_id} had already finished ({cancelled.status}); nothing to cancel")
    return EXIT_OK
