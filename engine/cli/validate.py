"""`lockgate validate FILE... [--json]`: the Publish button's checks, from the command line.

Exit codes: 0 no file has an error, 1 some file has one, 2 usage error or a path that cannot be read (the files
that can be read are still checked and reported; with `--json` a path that cannot be read is reported too, as a
file with one `unreadable_file` error, the code `lockgate publish --json` gives it).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


@dataclass(frozen=True)
class FileReport:
    """The diagnostics of one flow file, as the CLI prints them."""

    file: str
    diagnostics: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return not any(d["severity"] == "error" for d in self.diagnostics)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "ok": self.ok, "diagnostics": self.diagnostics}


def register(subparsers: Any) -> None:
    """Add the `validate` command to the `lockgate` parser."""
    parser = subparsers.add_parser(
        "validate",
        help="check flow files exactly as Publish does",
        description="Check *.flow.json files with the publish-time validation. "
        "Exit 0 when no file has an error, 1 when any has, 2 for usage errors or unreadable paths.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="flow file(s) to check")
    parser.add_argument("--json", action="store_true", help="print diagnostics as JSON")
    parser.set_defaults(handler=run_validate)


UNREADABLE = "unreadable_file"
"""The code of a path that cannot be read, in `--json` (as `lockgate publish --json` reports one)."""


def read_flow_file(path: str) -> bytes | str:
    """The file's bytes, or why it cannot be read (a message without the path)."""
    try:
        return Path(path).read_bytes()
    except IsADirectoryError:
        return "is a directory; pass the *.flow.json files inside it"
    except FileNotFoundError:
        return "no such file; check the path"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc}); check its permissions"


def unreadable_report(path: str, problem: str) -> FileReport:
    """A path that cannot be read, as `--json` reports it: one `unreadable_file` error."""
    return FileReport(path, [{"code": UNREADABLE, "severity": "error", "node": None, "message": problem}])


def check_file(path: str, content: bytes) -> FileReport:
    """Validate one file's bytes; never raises on bad content."""
    from engine.validation import validate_document

    flow, diagnostics = validate_document(content)
    if flow is not None:
        diagnostics += store_call_warnings(flow)
    return FileReport(path, [d.to_dict() for d in diagnostics])


def store_call_warnings(flow: Any) -> list[Any]:
    """`call_target_unknown` and `call_cycle` as warnings, against the store of this environment when it has
    one (`LOCKGATE_DB_URL`, or the data folder's SQLite file); [] without a `flow.call` or a readable store."""
    if not any(node.type == "flow.call" for node in flow.nodes):
        return []
    import sqlalchemy as sa

    from engine.calls.graph import call_diagnostics
    from engine.cli.settings import command_locations
    from engine.publish import UnknownFlowVersion, get_version
    from engine.store.db import make_engine
    from engine.validation import Diagnostic

    config = command_locations()
    if config.db_url is None and not (config.data_dir / "lockgate.db").is_file():
        return []
    store = make_engine(config.sql_url)

    def resolve(flow_id: str, version: int | None) -> Any:
        try:
            return get_version(store, flow_id, version)[1]
        except UnknownFlowVersion:
            return None

    try:
        found = call_diagnostics(flow, resolve, unknown_severity="warning")
    except sa.exc.SQLAlchemyError:
        return []
    finally:
        store.dispose()
    return [Diagnostic(d.code, "warning", d.node, d.message) for d in found]


def run_validate(args: argparse.Namespace) -> int:
    """Handler of `lockgate validate`."""
    reports: list[FileReport] = []
    unreadable = False
    for path in args.files:  # the files that can be read are checked whatever becomes of the others
        content = read_flow_file(path)
        if isinstance(content, str):
            unreadable = True
            print(f"lockgate validate: {path}: {content}", file=sys.stderr)
            if args.json:  # stdout stays one JSON document: the path is in it, with why it was not checked
                reports.append(unreadable_report(path, content))
        else:
            reports.append(check_file(path, content))
    if reports:
        if args.json:
            print_json(reports, several=len(args.files) > 1, out=sys.stdout)
        else:
            print_human(reports, out=sys.stdout)
    if unreadable:
        return EXIT_USAGE
    return EXIT_OK if all(report.ok for report in reports) else EXIT_INVALID


def print_json(reports: list[FileReport], several: bool, out: TextIO) -> None:
    """One object for one file, a list for several."""
    data: Any = [r.to_dict() for r in reports] if several else reports[0].to_dict()
    out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _tick(out: TextIO) -> str:
    # A terminal that cannot show ✓ (e.g. an ASCII-only locale) gets a word instead of a UnicodeEncodeError.
    try:
        "✓".encode(out.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "ok"
    return "✓"


def print_human(reports: list[FileReport], out: TextIO) -> None:
    """`✓ file`, or one line per diagnostic, then a summary line."""
    tick = _tick(out)
    errors = warnings = 0
    for report in reports:
        if report.ok:
            out.write(f"{tick} {report.file}\n")
        for d in report.diagnostics:
            node = f" [{d['node']}]" if d["node"] else ""
            line = f"{report.file}: {d['severity']} {d['code']}{node}: {d['message']}\n"
            out.write(line.encode(out.encoding or "utf-8", "replace").decode(out.encoding or "utf-8"))
            if d["severity"] == "error":
                errors += 1
            else:
                warnings += 1
    failed = sum(1 for r in reports if not r.ok)
    files = f"{len(reports)} file{'s' if len(reports) != 1 else ''}"
    verdict = "all ok" if failed == 0 else f"{failed} with errors"
    out.write(f"{files} checked, {verdict} ({_count(errors, 'error')}, {_count(warnings, 'warning')})\n")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"
