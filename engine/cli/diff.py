"""`lockgate diff A.flow.json B.flow.json` and `lockgate flows diff ID V1 V2`: node-level changes.

Exit status as diff(1) has it: 0 the flows are the same, 1 they differ, 2 trouble (a file or version
that cannot be read). Usable as a git difftool: `git difftool -x 'lockgate diff' -y -- '*.flow.json'`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from engine.flow_diff import FieldChange, FlowDiff

EXIT_SAME = 0
EXIT_DIFFERENT = 1
EXIT_TROUBLE = 2

_NODE_MARK = {"added": "+", "removed": "-", "changed": "~", "moved": "~"}
_NODE_STYLE = {"added": "green", "removed": "red", "changed": "yellow", "moved": "dim"}


def _add_output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the changes as JSON")
    parser.add_argument("--ignore-layout", action="store_true", help="leave out nodes that only moved")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diff", help="what changed between two flow files, node by node",
        description="Node-level changes from A to B. Exit 0 when the flows are the same, 1 when they differ, "
        "2 when a file cannot be read. As a git difftool: git difftool -x 'lockgate diff' -y -- '*.flow.json'",
    )
    parser.add_argument("before", metavar="A", help="the older flow file")
    parser.add_argument("after", metavar="B", help="the newer flow file")
    _add_output_flags(parser)
    parser.set_defaults(handler=diff_files_command)


def register_flows_diff(commands: Any) -> None:
    """`flows diff`, added to the `flows` command's subparsers."""
    parser = commands.add_parser("diff", help="what changed between two published versions of a flow")
    parser.add_argument("flow_id", metavar="ID")
    parser.add_argument("before", metavar="V1", type=int, help="the older version number")
    parser.add_argument("after", metavar="V2", type=int, help="the newer version number")
    _add_output_flags(parser)
    parser.set_defaults(handler=diff_versions_command)


def diff_files_command(args: argparse.Namespace) -> int:
    from engine.flow import FlowLoadError, load_flow
    from engine.flow_diff import diff_flows

    flows = []
    for path in (args.before, args.after):
        try:
            flows.append(load_flow(path))
        except FileNotFoundError:
            print(f"lockgate diff: {path}: no such file; check the path", file=sys.stderr)
            return EXIT_TROUBLE
        except OSError as exc:
            print(f"lockgate diff: {path}: cannot be read ({exc.strerror or exc})", file=sys.stderr)
            return EXIT_TROUBLE
        except FlowLoadError as exc:
            print(f"lockgate diff: {path}: not a flow file: {exc}", file=sys.stderr)
            return EXIT_TROUBLE
    diff = diff_flows(flows[0], flows[1])
    return _print(diff, args, (args.before, args.after))


def diff_versions_command(args: argparse.Namespace) -> int:
    from engine.cli.settings import command_config
    from engine.flow_diff import diff_flows
    from engine.publish import UnknownFlowVersion, get_version
    from engine.store.db import init_db, make_engine

    sql = make_engine(command_config().sql_url)
    init_db(sql)
    try:
        _, before = get_version(sql, args.flow_id, args.before)
        _, after = get_version(sql, args.flow_id, args.after)
    except UnknownFlowVersion as exc:
        print(f"lockgate flows diff: {exc}", file=sys.stderr)
        return EXIT_TROUBLE
    diff = diff_flows(before, after)
    return _print(diff, args, (f"{args.flow_id} v{args.before}", f"{args.flow_id} v{args.after}"))


def _print(diff: FlowDiff, args: argparse.Namespace, names: tuple[str, str]) -> int:
    if args.ignore_layout:
        diff = diff.model_copy(update={"nodes": [node for node in diff.nodes if node.status != "moved"]})
    if args.json:
        print(json.dumps(diff.model_dump(mode="json", by_alias=True), indent=2, ensure_ascii=False))
    else:
        print_diff(diff, names, sys.stdout)
    return EXIT_SAME if diff.empty else EXIT_DIFFERENT


def _value(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _field_line(change: FieldChange) -> str:
    if change.kind == "added":
        return f"{change.path}: + {_value(change.after)}"
    if change.kind == "removed":
        return f"{change.path}: - {_value(change.before)}"
    return f"{change.path}: {_value(change.before)} → {_value(change.after)}"


def print_diff(diff: FlowDiff, names: tuple[str, str], out: TextIO) -> None:
    """People's form: colour on a terminal, plain lines otherwise."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=out, highlight=False, soft_wrap=True)
    console.print(f"[bold]--- {escape(names[0])}[/]\n[bold]+++ {escape(names[1])}[/]")
    if diff.empty:
        console.print("no changes")
        return
    for change in diff.flow_fields:
        console.print(f"[yellow]~ flow {escape(_field_line(change))}[/]")
    for node in diff.nodes:
        style = _NODE_STYLE[node.status]
        title = f" \"{node.title}\"" if node.title and node.title != node.node_id else ""
        console.print(f"[{style}]{_NODE_MARK[node.status]} node {escape(node.node_id)} "
                      f"({escape(node.type)}{escape(title)}){' moved' if node.status == 'moved' else ''}[/]")
        if node.status == "changed":
            for field in node.fields:
                console.print(f"    {escape(_field_line(field))}")
    for edge in diff.edges:
        style = "green" if edge.status == "added" else "red"
        port = f" [{edge.port}]" if edge.port else ""
        console.print(f"[{style}]{'+' if edge.status == 'added' else '-'} edge "
                      f"{escape(edge.from_)}{escape(port)} → {escape(edge.to)}[/]")
