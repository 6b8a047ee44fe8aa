"""`lockgate runs watch ID [--json]`: follow a run live until it ends.

At a terminal the run's status, current node, what it waits on, cost and steps update in place (Rich Live);
piped, one tab-separated line per change (id, status, current node, waiting on); `--json` one `Run` a line per
change. Woken by the projector's live channel, not by polling the store.
Exit codes: 0 the run succeeded, 1 it ended otherwise or does not exist, 3 a store whose schema is not current,
130 interrupted (the run goes on).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import RenderableType

    from engine.read_models import Run

EXIT_SUCCEEDED = 0
EXIT_NOT_SUCCEEDED = 1
EXIT_INTERRUPTED = 130


def register(commands: Any) -> None:
    watch = commands.add_parser("watch", help="follow a run live until it ends (exit 0 when it succeeded)")
    watch.add_argument("run_id", metavar="ID")
    watch.add_argument("--json", action="store_true", help="print the Run, one JSON object a line, on each change")
    watch.set_defaults(handler=watch_command)


def watch_command(args: argparse.Namespace) -> int:
    from engine.cli.output import for_people
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable

    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with engine_api("lockgate runs watch") as api:
            runs = api.follow_run(args.run_id)
            if args.json:
                last = _print_json(runs)
            elif for_people():
                last = _show_live(runs)
            else:
                last = _print_lines(runs)
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    except LookupError:
        from engine.cli.runs import unknown_run

        return unknown_run("watch", args.run_id)
    except KeyboardInterrupt:
        print("lockgate runs watch: interrupted; the run goes on", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_SUCCEEDED if last is not None and last.status == "succeeded" else EXIT_NOT_SUCCEEDED


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _print_json(runs: Iterator[Run]) -> Run | None:
    from engine.cli.output import print_json

    last = None
    for last in runs:
        print_json(last, compact=True)
    return last


def _print_lines(runs: Iterator[Run]) -> Run | None:
    from engine.cli.run_view import state_line

    last = None
    shown = ""
    for last in runs:
        line = state_line(last)
        if line != shown:
            shown = line
            print(line, flush=True)
    return last


def _show_live(runs: Iterator[Run]) -> Run | None:
    from rich.console import Console
    from rich.live import Live

    console = Console()
    last = None
    with Live(console=console, auto_refresh=False, transient=False) as live:
        for last in runs:
            live.update(_view(last), refresh=True)
    return last


STATUS_STYLE = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "interrupted": "red",
    "waiting": "cyan",
    "running": "blue",
    "queued": "dim",
}


def _view(run: Run) -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from engine.cli.run_view import STEP_COLUMNS, header_lines, step_rows

    head = header_lines(run)
    status = Text(head[0])
    start = len(f"run {run.id} ")
    status.stylize(STATUS_STYLE.get(run.status, ""), start, start + len(run.status))
    steps = Table(*STEP_COLUMNS)
    for row in step_rows(run):
        steps.add_row(*("" if value is None else str(value) for value in row))
    return Group(status, *(Text(line) for line in head[1:]), steps)
