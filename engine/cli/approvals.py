"""`lockgate approvals list [--json]`, `lockgate approvals decide ID approve|reject [--comment TEXT] --key K` and
`lockgate approvals notify-secret` (the secret `notify_url` notices are signed with).

A quorum approval lists its progress (`2 of 3 approved`), who decided, `escalated` and the reminders sent;
a vote short of the quorum is accepted (exit 0) and says how many more are needed.

Exit codes: 0 listed / decision accepted, 1 decision refused (unknown or already decided approval,
after the timeout, bad or revoked key, no rights), 2 usage (no key given), 3 the store's schema is not current.
`list` and `decide` go through `EngineApi`, so `--json` prints the API's `ApprovalList` and `Decision`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.read_models import Approval

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
KEY_ENV = "LOCKGATE_API_KEY"
LIST_COLUMNS = ("ID", "FLOW", "NODE", "RUN", "EXPIRES", "MESSAGE", "PROGRESS")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("approvals", help="list pending approvals or decide one with an API key")
    commands = parser.add_subparsers(dest="approvals_command", metavar="list|decide|notify-secret", required=True)
    listing = commands.add_parser("list", help="pending approvals, soonest to time out first")
    listing.add_argument("--json", action="store_true", help="print the ApprovalList as the HTTP API answers it")
    listing.set_defaults(handler=list_command)
    decide = commands.add_parser("decide", help="approve or reject a pending approval")
    decide.add_argument("approval_id", metavar="ID")
    decide.add_argument("decision", choices=("approve", "reject"))
    decide.add_argument("--comment", metavar="TEXT", help="recorded with the decision")
    decide.add_argument("--key", metavar="K", help=f"an API key from `lockgate keys create` (or set {KEY_ENV})")
    decide.add_argument("--json", action="store_true", help="print the Decision as the HTTP API answers it")
    decide.set_defaults(handler=decide_command)
    secret = commands.add_parser("notify-secret", help="print the secret approvals' notify_url notices are signed "
                                 "with (X-Hub-Signature-256)")
    secret.set_defaults(handler=notify_secret_command)


@contextmanager
def open_handles() -> Iterator[Any]:
    """Redis (configured or the data folder's embedded one) and the store, closed afterwards."""
    from engine.cli.settings import command_config
    from engine.runtime.handles import EngineHandles
    from engine.store.db import init_db, make_engine
    from engine.transport.connection import open_redis
    from engine.transport.keys import Keyspace

    config = command_config()
    config.data_dir.mkdir(parents=True, exist_ok=True)
    sql = make_engine(config.sql_url)
    init_db(sql)
    redis_handle = open_redis(config)
    try:
        yield EngineHandles(redis_handle.client(), Keyspace(config.key_prefix), sql)
    finally:
        redis_handle.close()
        sql.dispose()


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def list_command(args: argparse.Namespace) -> int:
    from engine.cli.output import for_people, note, print_json, print_table
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable

    try:
        with engine_api("lockgate approvals list") as api:
            pending = api.pending_approvals()
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    if args.json:
        print_json(pending)
        return EXIT_OK
    if not pending.approvals:
        note("no pending approvals")
        return EXIT_OK
    people = for_people()
    print_table(
        LIST_COLUMNS,
        [
            (item.id, item.flow_id, _node_shown(item, people), item.run_id, _when(item.expires_at), item.message,
             "; ".join(progress_lines(item)))
            for item in pending.approvals
        ],
    )
    return EXIT_OK



def _node_shown(item: Approval, people: bool) -> str:
    """At a terminal the node's title with its id (`Refund approval (approve)`); piped, the id alone, as scripts
    read that column."""
    return f"{item.node_title} ({item.node_id})" if people and item.node_title else item.node_id

def progress_lines(item: Approval) -> list[str]:
    """Quorum progress, each decision, the escalation and reminders of a pending approval (none for a plain v1 one)."""
    lines = []
    if item.required != 1 or item.decisions:
        lines.append(f"{item.approved_count} of {item.required} approved")
    for vote in item.decisions:
        comment = f": {vote.comment}" if vote.comment else ""
        lines.append(f"{vote.decision}d by {vote.by} at {_when(vote.at)}{comment}")
    if item.escalated:
        lines.append("escalated: escalate_to may decide as well")
    if item.reminders_sent:
        lines.append(f"reminders sent: {item.reminders_sent}")
    return lines


def notify_secret_command(args: argparse.Namespace) -> int:
    from engine.approvals.notices import notice_secret

    with open_handles() as handles:
        print(notice_secret(handles))
    return EXIT_OK


def decide_command(args: argparse.Namespace) -> int:
    from engine.cli.output import cli_hinted, print_json
    from engine.cli.session import EngineUnavailable, engine_api, report_unavailable
    from engine.cli.settings import command_settings

    configured = command_settings().api_key
    key = args.key or (configured.get_secret_value() if configured is not None else None)
    if not key:
        print(f"lockgate approvals decide: no API key; pass --key K (or set {KEY_ENV}); create one with "
              "`lockgate keys create NAME`", file=sys.stderr)
        return EXIT_USAGE
    try:
        with engine_api("lockgate approvals decide") as api:
            result = api.decide_with_key(args.approval_id, args.decision, key, args.comment)
    except EngineUnavailable as exc:
        return report_unavailable(exc)
    if not result.accepted:
        result = result.model_copy(update={"message": cli_hinted(result.reason, result.message)})
    if args.json:
        print_json(result)
    if not result.accepted:
        print(f"lockgate approvals decide: refused ({result.reason}): {result.message}", file=sys.stderr)
        return EXIT_REFUSED
    if not args.json:
        print(result.message)
    return EXIT_OK
