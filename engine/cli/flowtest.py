"""`lockgate test FILE|DIR... [--flow F] [--json]` and `lockgate runs save-test ID --name N [--dir D] [--force]`.

`test` replays each `*.flowtest.json` in-process (no network, no money, no waiting) against the flow beside
it, or against `--flow`. Exit codes: 0 every test passed, 1 one failed or could not run, 2 usage errors.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "test",
        help="replay flow tests recorded from real runs",
        description="Replay *.flowtest.json files against the flow beside each (or --flow), in-process: "
        "boundary steps answer from the recording and waits take no time. Exit 1 on a mismatch.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="*.flowtest.json files, or folders holding them")
    parser.add_argument("--flow", metavar="F", help="replay against this *.flow.json instead of the one beside")
    parser.add_argument("--json", action="store_true", help="print the typed report as JSON")
    parser.set_defaults(handler=test_command)


def add_save_test(commands: Any) -> None:
    """`runs save-test`, added to the `runs` command's subcommands."""
    save = commands.add_parser("save-test", help="save a finished run as a flow test file")
    save.add_argument("run_id", metavar="ID")
    save.add_argument("--name", required=True, help="the test's name: <flow>.<name>.flowtest.json")
    save.add_argument("--dir", default=".", help="folder to write it in (default: the current one)")
    save.add_argument("--force", action="store_true", help="replace a test file of that name already in the folder")
    save.set_defaults(handler=save_test_command)


def _test_files(given: list[str]) -> list[Path]:
    from engine.flowtest.model import SUFFIX

    files: list[Path] = []
    for name in given:
        path = Path(name)
        files.extend(sorted(path.rglob(f"*{SUFFIX}")) if path.is_dir() else [path])
    return files


def test_command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from engine.flow import FlowLoadError, load_flow
    from engine.flowtest.report import print_report
    from engine.flowtest.suite import run_files

    flow = None
    if args.flow:
        try:
            flow = load_flow(args.flow)
        except (OSError, FlowLoadError) as exc:
            print(f"lockgate test: --flow {args.flow}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    files = _test_files(args.files)
    if not files:
        print(
            f"lockgate test: no *.flowtest.json in {' '.join(args.files)}; save one with "
            "`lockgate runs save-test RUN_ID --name NAME`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    suite = run_files(files, flow)
    if args.json:
        print(suite.model_dump_json(indent=2))
    else:
        print_report(suite, Console(highlight=False))
    return EXIT_OK if suite.passed else EXIT_FAILED


def save_test_command(args: argparse.Namespace) -> int:
    from engine.cli.output import cli_hinted
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable
    from engine.flowtest.model import file_name, save_test
    from engine.flowtest.record import RecordRefused

    try:
        with engine_api("lockgate runs save-test") as api:
            test = api.record_test(args.run_id, args.name)
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    except RecordRefused as exc:
        print(f"lockgate runs save-test: {cli_hinted(exc.reason, str(exc))}", file=sys.stderr)
        return EXIT_FAILED if exc.reason != "bad_name" else EXIT_USAGE
    directory = Path(args.dir)
    if not directory.is_dir():
        print(f"lockgate runs save-test: --dir {args.dir} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    replacing = args.force and (directory / file_name(test.flow_id, test.name)).exists()
    try:
        path = save_test(test, directory, replace=args.force)
    except FileExistsError as exc:
        print(
            f"lockgate runs save-test: {exc.filename} exists already; it is left as it was. Pass --force to "
            "replace it, or choose another --name",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except OSError as exc:
        print(f"lockgate runs save-test: cannot write the test in {args.dir}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    done = "replaced" if replacing else "saved"
    print(f"{done} {path} ({len(test.answers)} recorded answers, path {' → '.join(test.expected.path)})")
    return EXIT_OK
