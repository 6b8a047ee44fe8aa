"""`lockgate runs rerun ID --from NODE [--version N|current] [--yes] [--detach] [--json]`.

Starts the rerun on this data folder's engine (the same input check and budget preflight as any run) and
waits for it like `lockgate run`. A non-idempotent node at or after NODE that already had its effect in the
original run is named first; without `--yes` nothing starts. Exit codes: 0 the rerun succeeded (or, with
`--detach`, started), 1 refused or the rerun did not succeed, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.cli.run import EXIT_FAILED, EXIT_OK, EXIT_USAGE, print_run


def register_rerun(commands: Any) -> None:
    rerun = commands.add_parser("rerun", help="a new run that reuses the steps before NODE and executes NODE on")
    rerun.add_argument("run_id", metavar="ID", help="a finished run")
    rerun.add_argument("--from", dest="from_node", metavar="NODE", required=True, help="the node to execute again")
    rerun.add_argument("--version", default="original", metavar="N|current",
                       help="the original run's version (default), `current` (the newest published) or a number")
    rerun.add_argument("--yes", action="store_true",
                       help="start even though non-idempotent nodes that already had their effect run again")
    rerun.add_argument("--detach", action="store_true", help="return once the rerun is queued")
    rerun.add_argument("--json", action="store_true")
    rerun.set_defaults(handler=rerun_command)


def parse_version(text: str) -> int | str:
    """`original`, `current` or a version number (ValueError otherwise)."""
    if text in ("original", "current"):
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f'--version must be a version number, "current" or "original" (got {text!r})')


def rerun_command(args: argparse.Namespace) -> int:
    from engine.config import EngineConfig
    from engine.host import EngineServices
    from engine.runtime.create import RunRefused
    from engine.runtime.inputs import InputError
    from engine.runtime.rerun import RerunRefused

    try:
        version: Any = parse_version(args.version)
    except ValueError as exc:
        print(f"lockgate runs rerun: {exc}", file=sys.stderr)
        return EXIT_USAGE
    services = EngineServices(EngineConfig.from_env())
    try:
        services.start()
        try:
            plan = services.plan_rerun(args.run_id, args.from_node, version)
            if plan.repeated_effects and not args.yes:
                print(f"lockgate runs rerun: these nodes are not idempotent and already had their effect in run "
                      f"{plan.run_id}; the rerun executes them again: {', '.join(plan.repeated_effects)}. "
                      "Pass --yes to start it anyway", file=sys.stderr)
                return EXIT_FAILED
            created, plan = services.rerun_run(args.run_id, args.from_node, version)
        except RerunRefused as exc:
            print(f"lockgate runs rerun: {exc.kind}: {exc}", file=sys.stderr)
            if exc.nodes:
                print(f"differing nodes: {', '.join(exc.nodes)}", file=sys.stderr)
            return EXIT_FAILED
        except (RunRefused, InputError) as exc:
            print(f"lockgate runs rerun: {exc}", file=sys.stderr)
            return EXIT_FAILED
        reused = ", ".join(step.node for step in plan.reused) or "none"
        print(f"run {created.run_id} queued: rerun of {plan.run_id} from {plan.from_node} (flow {plan.flow_id} "
              f"v{plan.version}); reused: {reused}", file=sys.stderr)
        if args.detach:
            if args.json:
                print(json.dumps({"run_id": created.run_id, "status": created.status, "rerun_of": plan.run_id,
                                  "from_node": plan.from_node}))
            return EXIT_OK
        run = services.wait_for_run(created.run_id, timeout=10 * 365 * 86400.0)
        print_run(run, args.json)
        return EXIT_OK if run["status"] == "succeeded" else EXIT_FAILED
    finally:
        services.stop()
