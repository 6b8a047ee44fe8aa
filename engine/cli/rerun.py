"""`lockgate runs rerun ID --from NODE [--version N|current|original] [--yes] [--detach] [--json]`.

Starts the rerun on this data folder's engine (the same input check and budget preflight as any run) and
waits for it like `lockgate run`. A non-idempotent node at or after NODE that already had its effect in the
original run is named first; without `--yes` nothing starts. Exit codes: 0 the rerun succeeded (or, with
`--detach`, started), 1 refused or the rerun did not succeed, 2 usage, 130 interrupted (Ctrl-C or SIGTERM: the
rerun goes on with the next engine on this data folder). The wait wakes on the projector's live channel.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING, Any

from engine.cli.run import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    RunProgress,
    live_api,
    print_run,
    stop_on_signals,
)

if TYPE_CHECKING:
    from engine.facade import EngineApi


def register_rerun(commands: Any) -> None:
    rerun = commands.add_parser("rerun", help="a new run that reuses the steps before NODE and executes NODE on")
    rerun.add_argument("run_id", metavar="ID", help="a finished run")
    rerun.add_argument("--from", dest="from_node", metavar="NODE", required=True, help="the node to execute again")
    rerun.add_argument("--version", default="original", metavar="N|current|original",
                       help="`original`, the original run's version (default), `current` (the newest published) or a "
                            "number")
    rerun.add_argument("--yes", action="store_true",
                       help="start even though non-idempotent nodes that already had their effect run again")
    rerun.add_argument("--detach", action="store_true", help="return once the rerun is queued")
    rerun.add_argument("--json", action="store_true", help="print the Run as the HTTP API answers it (with "
                       "--detach: the RerunStarted)")
    rerun.set_defaults(handler=rerun_command)


def parse_version(text: str) -> int | str:
    """`original`, `current` or a version number (ValueError otherwise)."""
    if text in ("original", "current"):
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f'--version must be a version number, "current" or "original" (got {text!r})')


def rerun_command(args: argparse.Namespace) -> int:
    from engine.cli.output import cli_hinted, print_json
    from engine.cli.settings import command_config, command_settings
    from engine.host import EngineServices
    from engine.read_models import RerunRequest
    from engine.runtime.create import RunRefused
    from engine.runtime.inputs import InputError
    from engine.runtime.rerun import RerunRefused

    try:
        version: Any = parse_version(args.version)
    except ValueError as exc:
        print(f"lockgate runs rerun: {exc}", file=sys.stderr)
        return EXIT_USAGE
    services = EngineServices(command_config(), settings=command_settings())
    api: EngineApi | None = None
    request = {"from_node": args.from_node, "version": version}
    previous = stop_on_signals()
    run_id: str | None = None
    try:
        services.start()
        api = live_api(services)
        try:
            plan = api.rerun(args.run_id, RerunRequest.model_validate({**request, "dry_run": True}))
            if plan.repeated_effects and not args.yes:
                print(f"lockgate runs rerun: these nodes are not idempotent and already had their effect in run "
                      f"{plan.rerun_of}; the rerun executes them again: {', '.join(plan.repeated_effects)}. "
                      "Pass --yes to start it anyway", file=sys.stderr)
                return EXIT_FAILED
            started = api.rerun(args.run_id, RerunRequest.model_validate({**request, "repeat_effects": args.yes}))
        except RerunRefused as exc:
            print(f"lockgate runs rerun: {exc.kind}: {cli_hinted(exc.kind, str(exc))}", file=sys.stderr)
            if exc.nodes and exc.kind == "upstream_changed":  # the other kinds' messages name their nodes
                print(f"differing nodes: {', '.join(exc.nodes)}", file=sys.stderr)
            return EXIT_FAILED
        except (RunRefused, InputError) as exc:
            print(f"lockgate runs rerun: {exc}", file=sys.stderr)
            return EXIT_FAILED
        assert started.run_id is not None  # not a dry run: it started one
        run_id = started.run_id
        reused = ", ".join(started.reused_steps) or "none"
        print(f"run {started.run_id} queued: rerun of {started.rerun_of} from {started.from_node} (flow "
              f"{started.flow_id} v{started.version}); reused: {reused}", file=sys.stderr)
        if args.detach:
            if args.json:
                print_json(started)
            return EXIT_OK
        run = api.wait_for_run(started.run_id, on_change=RunProgress(steps=False))  # says where it parks, as `run`
        print_run(run, args.json)
        return EXIT_OK if run.status == "succeeded" else EXIT_FAILED
    except KeyboardInterrupt:
        if run_id is None:
            print("lockgate runs rerun: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        print(f"lockgate runs rerun: interrupted; rerun {run_id} goes on with the next engine on this data folder",
              file=sys.stderr)
        current = api.get_run(run_id) if api is not None else None
        if current is not None:
            print_run(current, args.json)
        return EXIT_INTERRUPTED
    finally:
        if api is not None:
            api.close()
        services.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
