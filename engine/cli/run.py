"""`lockgate run FILE [--input KEY=JSON]... [--inputs-file F] [--json] [--detach]`.

Publishes the file (refused on validation errors, printed as `validate` prints them), runs it on
the engine of the data folder, shows progress on stderr and prints the run when it ends.
Exit codes: 0 succeeded (or accepted/parked with --detach), 1 the run did not succeed, the flow was
refused, or inputs the engine cannot carry (too deep or large, NaN, lone surrogates: see
`LOCKGATE_MAX_INPUT_DEPTH` / `LOCKGATE_MAX_INPUT_BYTES`), 2 usage errors (unreadable file, bad --input,
inputs of the wrong type or missing, a negative --timeout), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.facade import EngineApi
    from engine.host import EngineServices
    from engine.read_models import Run

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run", help="publish a flow file and run it",
        description="Publish FILE (refused on validation errors) and run it on the engine of the data folder.")
    parser.add_argument("file", metavar="FILE", help="a *.flow.json file")
    parser.add_argument("--input", action="append", default=[], metavar="KEY=JSON",
                        help="one run input as JSON, e.g. --input name='\"Ada\"' (repeatable)")
    parser.add_argument("--inputs-file", metavar="F", help="a JSON object of inputs (--input entries override it)")
    parser.add_argument("--json", action="store_true", help="print the run as a JSON object")
    parser.add_argument("--detach", action="store_true",
                        help="return once the run is accepted or first parks; it continues with the next engine")
    parser.add_argument("--timeout", type=float, default=None, help="give up waiting after this many seconds")
    parser.set_defaults(handler=run_command)


def parse_inputs(pairs: list[str], inputs_file: str | None) -> dict[str, Any]:
    """Inputs from --inputs-file and --input KEY=JSON; raises ValueError with a fix-it message."""
    from engine import json_bounds

    inputs: dict[str, Any] = {}
    if inputs_file:
        try:
            data = json_bounds.loads(Path(inputs_file).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"--inputs-file {inputs_file}: cannot be read ({exc.strerror or exc})") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"--inputs-file {inputs_file}: not JSON ({exc.msg} at line {exc.lineno})") from None
        except (RecursionError, UnicodeDecodeError):
            raise ValueError(f"--inputs-file {inputs_file}: not JSON the engine can read (nested too deeply, or "
                             "not UTF-8 text)") from None
        if not isinstance(data, dict):
            raise ValueError(f"--inputs-file {inputs_file}: must hold a JSON object of input names to values")
        inputs.update(data)
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--input {pair!r}: write KEY=JSON, e.g. --input name='\"Ada\"'")
        try:
            inputs[key] = json_bounds.loads(text)
        except json.JSONDecodeError:
            raise ValueError(f"--input {key}: {text!r} is not JSON; quote strings, e.g. --input {key}='\"{text}\"'"
                             ) from None
        except RecursionError:
            raise ValueError(f"--input {key}: nested too deeply to read; flatten it") from None
    return inputs


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "a decision"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class RunProgress:
    """Prints each step's new status, with its node's type (unless `steps` is False), and the run's, with where it
    parks, on stderr."""

    def __init__(self, *, steps: bool = True) -> None:
        self.steps = steps
        self.seen: dict[str, str] = {}
        self.status = ""

    def __call__(self, run: Run) -> None:
        for step in run.steps if self.steps else ():
            if self.seen.get(step.step) != step.status:
                self.seen[step.step] = step.status
                extra = f": {step.error}" if step.error and step.status == "failed" else ""
                kind = step.type or "?"
                print(f"  {step.step} ({kind}): {step.status}{extra}", file=sys.stderr)
        if run.status != self.status:
            self.status = run.status
            waiting = run.waiting_on if isinstance(run.waiting_on, dict) else None
            if run.status == "waiting" and waiting:
                print(f"run {run.id} parked at {waiting['node']} ({waiting['reason']}) until "
                      f"{_when(waiting.get('due_at'))}", file=sys.stderr)
            else:
                print(f"run {run.id}: {run.status}", file=sys.stderr)


def print_run(run: Run | None, as_json: bool) -> None:
    from engine.money.amounts import format_usd

    if as_json:
        # The run as `GET /api/v1/runs/{id}` answers it (and `lockgate runs show --json` prints it).
        print(run.model_dump_json(indent=2) if run is not None else "{}")
        return
    if run is None:
        return
    print(f"run {run.id} {run.status} (flow {run.flow_id} v{run.version})")
    if run.result is not None:
        result = run.result
        print(f"result: {result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)}")
    if run.error:
        print(f"error: {run.error}")
    waiting = run.waiting_on if isinstance(run.waiting_on, dict) else None
    if waiting:
        child = waiting.get("child_run_id")
        print(f"waiting on: {waiting['node']} ({waiting['reason']}" + (f" {child})" if child else ")"))
    if run.parent_run_id:
        print(f"called by run {run.parent_run_id}")
    if run.rerun_of:
        print(f"rerun of run {run.rerun_of} from node {run.from_node}")
    if run.child_run_ids:
        print(f"child runs: {', '.join(run.child_run_ids)}")
    if run.cost_micros or run.tokens_in or run.tokens_out:
        print(f"cost: {format_usd(run.cost_micros or 0)}, tokens: {run.tokens_in or 0:,} in, "
              f"{run.tokens_out or 0:,} out")
    errors = run.errors if isinstance(run.errors, dict) else {}
    for step, failure in errors.items():
        print(f"went on past {step}: {failure.get('type')}: {failure.get('message')}")


def run_command(args: argparse.Namespace) -> int:
    from engine.cli.settings import command_config, command_settings
    from engine.cli.validate import FileReport, print_human
    from engine.config import InputLimits
    from engine.host import EngineServices
    from engine.runtime.create import RunRefused
    from engine.runtime.inputs import InputBoundsError, InputError, check_input_bounds, check_inputs, cli_hint, hinted
    from engine.runtime.transitions import TERMINAL
    from engine.validation import has_errors, validate_document

    if args.timeout is not None and (math.isnan(args.timeout) or args.timeout < 0):
        print(f"lockgate run: --timeout {args.timeout:g} is not a number of seconds to wait; give 0 or more, or leave "
              "it out to wait until the run ends", file=sys.stderr)
        return EXIT_USAGE
    try:
        content = Path(args.file).read_bytes()
    except OSError as exc:
        print(f"lockgate run: {args.file}: cannot be read ({exc.strerror or exc}); check the path", file=sys.stderr)
        return EXIT_USAGE
    try:
        inputs = parse_inputs(args.input, args.inputs_file)
    except ValueError as exc:
        print(f"lockgate run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    flow, diagnostics = validate_document(content)
    if flow is None or has_errors(diagnostics):
        print(f"lockgate run: {args.file} was not published; fix these and run again:", file=sys.stderr)
        print_human([FileReport(args.file, [d.to_dict() for d in diagnostics])], out=sys.stderr)
        return EXIT_FAILED
    settings = command_settings()
    limits = InputLimits.from_settings(settings)
    try:
        check_input_bounds(flow.id, inputs, limits)  # refuse before starting anything; create_run checks again
        check_inputs(flow, inputs)
    except InputBoundsError as exc:
        print(f"lockgate run: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except InputError as exc:
        print(f"lockgate run: {hinted(exc, cli_hint)}", file=sys.stderr)
        return EXIT_USAGE
    services = EngineServices(command_config(), settings=settings)
    api: EngineApi | None = None
    previous = stop_on_signals()
    run_id: str | None = None
    try:
        services.start()
        api = live_api(services)
        published = api.publish(flow)
        try:
            created = api.create_run(flow.id, inputs)
            run_id = created.run_id
        except InputBoundsError as exc:
            print(f"lockgate run: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except InputError as exc:
            print(f"lockgate run: {hinted(exc, cli_hint)}", file=sys.stderr)
            return EXIT_USAGE
        except RunRefused as exc:
            print(f"lockgate run: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"run {created.run_id} queued (flow {flow.id} v{published.version})", file=sys.stderr)
        wait_for = frozenset({"waiting", *TERMINAL}) if args.detach else TERMINAL
        progress = RunProgress()
        try:
            run = api.wait_for_run(created.run_id, timeout=args.timeout, statuses=wait_for, on_change=progress)
        except TimeoutError as exc:
            print(f"lockgate run: {exc}; it continues with the next engine on this data folder", file=sys.stderr)
            print_run(api.get_run(created.run_id), args.json)
            return EXIT_FAILED
        print_run(run, args.json)
        if run.status == "succeeded" or (args.detach and run.status not in TERMINAL):
            return EXIT_OK
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("lockgate run: interrupted; a parked or queued run continues with the next engine on this data folder",
              file=sys.stderr)
        current = api.get_run(run_id) if api is not None and run_id is not None else None
        if current is not None:
            print_run(current, args.json)
        return EXIT_INTERRUPTED
    finally:
        if api is not None:
            api.close()
        services.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def live_api(services: EngineServices) -> EngineApi:
    """The facade of a command's started engine for waiting on a run: woken by the projector's live channel
    (whichever process projects) and by this process's projector, it reads the store on a change of the run
    instead of every few milliseconds. `close()` it before stopping the services."""
    from engine.facade import EngineApi

    api = EngineApi.on_live_channel(services)
    services.add_batch_listener(api.watch.on_batch)
    return api


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_on_signals() -> dict[int, Any]:
    """SIGINT and SIGTERM end the wait cleanly (the engine stops; a parked run continues later)."""
    return {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
