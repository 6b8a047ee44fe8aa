"""`lockgate budgets list|set` and `lockgate holds list`: the money ledger from the command line.

Exit codes: 0 done, 2 bad input (a bad limit or period, an unknown budget) or an unreachable store.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

EXIT_OK = 0
EXIT_USAGE = 2


def register(subparsers: Any) -> None:
    budgets = subparsers.add_parser("budgets", help="list budgets or set one's limit and period",
                                    description="Budgets cap what model calls may spend per day, week or month.")
    actions = budgets.add_subparsers(dest="budgets_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="each budget's limit, spent, held and what is left")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=run_budgets_list)
    setting = actions.add_parser("set", help="create a budget or change its limit/period")
    setting.add_argument("name", help="budget name (what budget.reserve nodes name; 'default' when they name none)")
    setting.add_argument("--limit", required=True, metavar="USD", help="limit per period in USD, e.g. 25 or 2.50")
    setting.add_argument("--period", default=None, choices=("day", "week", "month"),
                         help="default: the budget's current period (month for a new budget)")
    setting.set_defaults(handler=run_budgets_set)

    holds = subparsers.add_parser("holds", help="list money holds (placed, charged, released)")
    hold_actions = holds.add_subparsers(dest="holds_action", metavar="ACTION", required=True)
    hold_list = hold_actions.add_parser("list", help="every hold, newest first")
    hold_list.add_argument("--state", choices=("placed", "charged", "released"), help="only holds in this state")
    hold_list.add_argument("--json", action="store_true", help="print JSON")
    hold_list.set_defaults(handler=run_holds_list)


@contextmanager
def _services() -> Iterator[tuple[Any, Any]]:
    """(SQL engine, ledger) of the configured data folder, the ledger restored from SQL."""
    from engine.cli.settings import command_config
    from engine.money.ledger import BudgetLedger
    from engine.money.sql_sync import restore_ledger
    from engine.store.db import open_store
    from engine.transport.connection import open_redis
    from engine.transport.keys import Keyspace

    config = command_config()
    sql = open_store(config)
    handle = open_redis(config)
    try:
        ledger = BudgetLedger(handle.client(), Keyspace(config.key_prefix))
        restore_ledger(sql, ledger)
        yield sql, ledger
    finally:
        handle.close()
        sql.dispose()


def _budget_dict(state: Any) -> dict[str, Any]:
    from engine.money.amounts import format_usd

    return {
        "name": state.name, "period": state.period,
        "limit_micros": state.limit_micros, "spent_micros": state.spent_micros,
        "held_micros": state.held_micros, "remaining_micros": state.remaining_micros,
        "limit": format_usd(state.limit_micros), "spent": format_usd(state.spent_micros),
        "held": format_usd(state.held_micros), "remaining": format_usd(state.remaining_micros),
        "exhausted": state.exhausted,
    }


def _print_rows(rows: list[dict[str, Any]], columns: list[str]) -> None:
    from engine.cli.output import print_table

    print_table([c.upper() for c in columns], [[row[c] for c in columns] for row in rows])


def run_budgets_list(args: argparse.Namespace) -> int:
    from engine.cli.output import note

    with _services() as (_, ledger):
        rows = [_budget_dict(b) for b in ledger.budgets()]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        note("no budgets; create one with `lockgate budgets set NAME --limit USD --period month`")
    else:
        _print_rows(rows, ["name", "period", "limit", "spent", "held", "remaining"])
    return EXIT_OK


def run_budgets_set(args: argparse.Namespace) -> int:
    from engine.clock import SystemClock
    from engine.money.ledger import BudgetError
    from engine.money.sql_sync import save_budget_definition

    with _services() as (sql, ledger):
        try:
            state = ledger.set_budget(args.name, args.limit, args.period)
        except BudgetError as exc:
            print(f"lockgate budgets set: {exc}", file=sys.stderr)
            return EXIT_USAGE
        save_budget_definition(sql, state, SystemClock().now())
    row = _budget_dict(state)
    print(f"budget {row['name']}: {row['limit']} per {row['period']} ({row['remaining']} left)")
    return EXIT_OK


def run_holds_list(args: argparse.Namespace) -> int:
    from engine.cli.output import note
    from engine.money.amounts import format_usd
    from engine.money.sql_sync import hold_rows

    with _services() as (sql, _):
        rows = hold_rows(sql, args.state)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        note("no holds" + (f" in state {args.state}" if args.state else ""))
    else:
        for row in rows:
            row["amount"] = format_usd(row["amount_micros"])
            row["charged"] = format_usd(row["charged_micros"]) if row["charged_micros"] is not None else "-"
        _print_rows(rows, ["id", "run_id", "node_id", "budget", "state", "amount", "charged", "expires_at"])
    return EXIT_OK
