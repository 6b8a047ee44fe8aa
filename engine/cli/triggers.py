"""`lockgate webhooks list|enable FLOW` and `lockgate schedules list|enable|disable FLOW`.

Webhook and schedule triggers start disabled; enabling a webhook the first time makes its token. `list` shows
what the app's Triggers dock shows, the "started nothing" counts included.
Exit codes: 0 done, 2 an unknown flow, a flow without such a trigger, or an unreachable store.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from engine.settings import DEFAULT_HTTP_URL

EXIT_OK = 0
EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    webhooks = subparsers.add_parser("webhooks", help="list or enable a flow's webhook triggers (URL and token)",
                                     description="Webhook triggers answer POST /webhooks/<token> once enabled.")
    hook_actions = webhooks.add_subparsers(dest="webhooks_action", metavar="ACTION", required=True)
    for action, text in (("list", "each webhook trigger of FLOW: enabled, URL, token"),
                         ("enable", "enable FLOW's webhook triggers (makes the token the first time)"),
                         ("disable", "disable FLOW's webhook triggers (the token is kept)")):
        parser = hook_actions.add_parser(action, help=text)
        parser.add_argument("flow", metavar="FLOW", help="id of a published flow")
        parser.add_argument("--base-url", default=None,
                            help="where the webhooks are reached (default: LOCKGATE_PUBLIC_URL, else "
                            "LOCKGATE_HTTP_URL, else where `lockgate serve` or `lockgate worker --http` last served "
                            f"from this data folder, else {DEFAULT_HTTP_URL})")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(handler=run_triggers_command, trigger_type="trigger.webhook", action=action)

    schedules = subparsers.add_parser("schedules", help="list, enable or disable a flow's schedule triggers",
                                      description="Schedule triggers start disabled until enabled here.")
    schedule_actions = schedules.add_subparsers(dest="schedules_action", metavar="ACTION", required=True)
    for action, text in (("list", "each schedule trigger of FLOW and whether it is enabled"),
                         ("enable", "enable FLOW's schedule triggers"),
                         ("disable", "disable FLOW's schedule triggers")):
        parser = schedule_actions.add_parser(action, help=text)
        parser.add_argument("flow", metavar="FLOW", help="id of a published flow")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.set_defaults(handler=run_triggers_command, trigger_type="trigger.schedule", action=action,
                            base_url=DEFAULT_HTTP_URL)


@contextmanager
def _store() -> Iterator[tuple[Any, Any, Any]]:
    from engine.cli.settings import command_config
    from engine.store.db import open_store
    from engine.transport.connection import open_redis
    from engine.transport.keys import Keyspace

    config = command_config()
    sql = open_store(config)
    handle = open_redis(config)
    try:
        yield sql, handle.client(), Keyspace(config.key_prefix)
    finally:
        handle.close()
        sql.dispose()


def _row(setting: Any, node: Any, base_url: str, counted: dict[str, int]) -> dict[str, Any]:
    label = f"{setting.flow_id}/{setting.node_id}"
    # The Triggers dock's "started nothing" counts: fires or deliveries while disabled, and runs refused.
    started_nothing = {"disabled": counted.get(f"{label}:disabled", 0),
                       "refused": counted.get(f"{label}:refused", 0) + counted.get(f"{label}:bad_schedule", 0)}
    data: dict[str, Any] = {"flow_id": setting.flow_id, "trigger": setting.node_id,
                            "enabled": setting.enabled, "started_nothing": started_nothing}
    if setting.type == "trigger.webhook":
        data["url"] = f"{base_url.rstrip('/')}/webhooks/{setting.token}" if setting.token else None
        data["token"] = setting.token
    else:
        config = node.config
        data["schedule"] = f"cron {config['cron']} ({config.get('timezone', 'UTC')})" if config.get("cron") \
            else f"every {config.get('every')}"
    return data


def _base_url(given: str | None) -> str:
    """Where webhooks are reached: `given` (`--base-url`), else the settings' public or HTTP URL, else where this
    data folder's server last served, else the default."""
    from engine.cli.served_url import served_url
    from engine.cli.settings import command_settings
    from engine.config import default_data_dir

    settings = command_settings()
    configured = given or settings.public_url or settings.http_url
    return configured or served_url(default_data_dir(settings)) or DEFAULT_HTTP_URL


def run_triggers_command(args: argparse.Namespace) -> int:
    from engine.clock import SystemClock
    from engine.publish import UnknownFlowVersion, get_version
    from engine.triggers.settings import TriggerProblem, counters, set_enabled, settings_of

    try:
        with _store() as (sql, client, keys):
            _, flow = get_version(sql, args.flow)
            if args.action == "list":
                settings = settings_of(client, keys, flow, args.trigger_type)
                if not settings:
                    kind = args.trigger_type.removeprefix("trigger.")
                    raise TriggerProblem(f'flow "{flow.id}" has no {kind} trigger; add a {args.trigger_type} node '
                                         "and publish the flow again")
            else:
                settings = set_enabled(client, keys, flow, args.trigger_type, args.action == "enable",
                                       SystemClock().now())
            nodes = {node.id: node for node in flow.nodes}
            counted = counters(client, keys)
            base_url = _base_url(args.base_url)
            rows = [_row(s, nodes[s.node_id], base_url, counted) for s in settings]
    except (UnknownFlowVersion, TriggerProblem) as exc:
        print(f"lockgate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    _print_rows(args, rows)
    return EXIT_OK


def _print_rows(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    """Like every list command: a table at a terminal, one tab-separated line a trigger piped; hints on stderr."""
    from engine.cli.output import note, print_table

    webhook = args.trigger_type == "trigger.webhook"
    columns = ("TRIGGER", "STATE", "URL", "TOKEN") if webhook else ("TRIGGER", "STATE", "SCHEDULE")
    table = []
    for row in rows:
        nothing = row["started_nothing"]
        started_nothing = (f"{nothing['disabled'] + nothing['refused']} ({nothing['disabled']} while disabled, "
                           f"{nothing['refused']} refused)")
        state = "enabled" if row["enabled"] else "disabled"
        detail = (row["url"], row["token"]) if webhook else (row["schedule"],)
        table.append((f"{row['flow_id']}/{row['trigger']}", state, *detail, started_nothing))
    print_table((*columns, "STARTED NOTHING"), table)
    if webhook:
        for row in rows:
            if not row["token"]:
                note(f"{row['flow_id']}/{row['trigger']} has no token yet: `lockgate webhooks enable "
                     f"{row['flow_id']}` makes one")
        if args.action != "disable" and any(r["enabled"] for r in rows):
            note("Sign each request: X-Hub-Signature-256: sha256=HMAC-SHA256(raw body, token) in hex.")
