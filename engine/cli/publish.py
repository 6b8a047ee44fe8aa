"""`lockgate publish FILE... [--json]`: validate each flow file and store it as its flow's next version, as
`POST /api/v1/flows` does.

`--json` prints one `PublishedFlow` or `PublishRefusal` per file, one JSON object a line, in the files' order.
Exit codes: 0 every file published, 1 some file was refused or cannot be read, 3 a store whose schema is not
current.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_REFUSED = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "publish",
        help="validate flow files and publish each as its flow's next version",
        description="Validate each *.flow.json FILE as Publish does and store it as its flow's next version "
        "(the same content again is the same version). Exit 1 when any file is refused.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="flow file(s) to publish")
    parser.add_argument(
        "--json", action="store_true", help="print a PublishedFlow or PublishRefusal per file, one JSON object a line"
    )
    parser.set_defaults(handler=publish_command)


def publish_command(args: argparse.Namespace) -> int:
    from engine.cli.output import print_json
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable
    from engine.read_models import Diagnostic, ErrorDetail, PublishedFlow, PublishRefusal

    failed = 0
    try:
        with engine_api("lockgate publish") as api:
            for path in args.files:
                try:
                    content = Path(path).read_bytes()
                except OSError as exc:
                    problem = f"{path}: cannot be read ({exc.strerror or exc}); check the path"
                    answer: PublishedFlow | PublishRefusal = PublishRefusal(
                        error=ErrorDetail(code="unreadable_file", message=problem),
                        diagnostics=[Diagnostic(code="unreadable_file", severity="error", message=problem)],
                    )
                else:
                    answer = api.publish_document(content)
                if isinstance(answer, PublishRefusal):
                    failed += 1
                if args.json:
                    print_json(answer, compact=True)
                else:
                    _report(path, answer)
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    if not args.json and len(args.files) > 1:
        print(f"{len(args.files) - failed} of {len(args.files)} published", file=sys.stderr if failed else sys.stdout)
    return EXIT_REFUSED if failed else EXIT_OK


def _report(path: str, answer: Any) -> None:
    from engine.read_models import PublishedFlow

    if isinstance(answer, PublishedFlow):
        print(f"{path}: published flow {answer.flow_id} version {answer.version} ({answer.content_hash[:12]})")
        return
    print(f"{path}: not published ({answer.error.code}); fix these and publish again:", file=sys.stderr)
    for d in answer.diagnostics:
        node = f" [{d.node}]" if d.node else ""
        print(f"{path}: {d.severity} {d.code}{node}: {d.message}", file=sys.stderr)
