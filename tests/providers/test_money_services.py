"""Budget preflight for create_run, the ledger's durable copy in SQL, and `lockgate budgets|holds`."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from sqlalchemy.orm import Session

from engine.cli import budgets as budgets_cli
from engine.clock import ManualClock
from engine.flow import load_flow
from engine.money.ledger import BudgetLedger, Reserved, UnknownBudget
from engine.money.preflight import BudgetExhausted, budgets_used, ledger_preflight
from engine.money.sql_sync import hold_rows, restore_ledger, save_budget_definition
from engine.store.db import init_db, make_engine, session_scope
from engine.store.models import FlowRecord, FlowVersion, Hold, Run
from engine.transport.keys import Keyspace
from tests.conftest import EXAMPLES


@pytest.fixture
def ledger(redis_url: str, key_prefix: str, clock: ManualClock) -> BudgetLedger:
    return BudgetLedger(redis.Redis.from_url(redis_url), Keyspace(key_prefix), clock)


def test_preflight_refuses_exhausted_and_unknown_budgets(ledger: BudgetLedger) -> None:
    flow = load_flow(EXAMPLES / "ticket-triage.flow.json")
    assert budgets_used(flow) == ["default"]
    preflight = ledger_preflight(ledger)
    with pytest.raises(UnknownBudget, match=r'flow "ticket-triage" reserves from no budget \'default\''):
        preflight(flow, {})
    ledger.set_budget("default", "0.20")
    preflight(flow, {})  # room left: no error
    assert isinstance(ledger.reserve("default", "h", "0.20", ledger._clock.now() + 60), Reserved)
    with pytest.raises(BudgetExhausted, match="budget \"default\" is exhausted for this month") as caught:
        preflight(flow, {})
    assert caught.value.reason == "budget_exhausted" and caught.value.budget == "default"


def _run_row(session: Session, run_id: str, now: datetime) -> None:
    session.add(FlowRecord(id="ticket-triage", name="Ticket triage", latest_version=1, enabled=True,
                           created_at=now, updated_at=now))
    session.add(FlowVersion(flow_id="ticket-triage", version=1, content_hash="x", document="{}", published_at=now))
    session.flush()
    session.add(Run(id=run_id, flow_id="ticket-triage", version=1, created_at=now, updated_at=now))


def test_redis_loss_is_restored_from_sql(db_url: str, ledger: BudgetLedger, redis_url: str, key_prefix: str,
                                         clock: ManualClock) -> None:
    sql = make_engine(db_url)
    init_db(sql)
    state = ledger.set_budget("ops", 2, "month")
    save_budget_definition(sql, state, clock.now())
    now = datetime.fromtimestamp(clock.now(), UTC)
    with session_scope(sql) as session:
        _run_row(session, "run-1", now)
        session.flush()
        session.add(Hold(id="run-1:reserve", run_id="run-1", node_id="classify", budget_name="ops",
                         amount_micros=500_000, state="placed",
                         expires_at=datetime.fromtimestamp(clock.now() + 60, UTC),
                         created_at=now, updated_at=now))
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.keys(f"{key_prefix}:*"))  # Redis restarted without persistence
    with pytest.raises(UnknownBudget):
        ledger.budget("ops")
    report = restore_ledger(sql, ledger)
    assert (report.budgets, report.holds) == (1, 1)
    restored = ledger.budget("ops")
    assert (restored.limit_micros, restored.held_micros) == (2_000_000, 500_000)
    assert restore_ledger(sql, ledger).budgets == 0  # never overwrites what Redis has
    assert ledger.charge("run-1:reserve", cost_micros=100_000).applied
    assert ledger.budget("ops").spent_micros == 100_000
    clock.advance(61)
    assert ledger.sweep_expired() == []  # charged already: nothing to sweep
    assert [row["id"] for row in hold_rows(sql, "placed")] == ["run-1:reserve"]  # SQL is the projector's to move
    sql.dispose()


def main(argv: list[str]) -> int:
    """`lockgate ARGV` for the money commands (the real parser pieces, without the app's other commands)."""
    parser = argparse.ArgumentParser(prog="lockgate")
    budgets_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.handler(args))


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, redis_url: str, key_prefix: str) -> Path:
    monkeypatch.setenv("LOCKGATE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LOCKGATE_REDIS_URL", redis_url)
    monkeypatch.setenv("LOCKGATE_KEY_PREFIX", key_prefix)
    monkeypatch.delenv("LOCKGATE_DB_URL", raising=False)
    return tmp_path


def test_budgets_cli_set_list_and_bad_input(cli_env: Path, capsys: pytest.CaptureFixture[str], redis_url: str,
                                            key_prefix: str) -> None:
    assert main(["budgets", "set", "ops", "--limit", "12.5", "--period", "week"]) == 0
    assert "budget ops: $12.50 per week" in capsys.readouterr().out
    assert main(["budgets", "set", "ops", "--limit", "lots"]) == 2
    assert "'lots' is not a number of US dollars" in capsys.readouterr().err
    assert main(["budgets", "set", "ops", "--limit", "-1"]) == 2
    assert "negative" in capsys.readouterr().err
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.keys(f"{key_prefix}:*"))  # the definition survives in SQL
    assert main(["budgets", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["period"], row["limit_micros"], row["remaining"]) == ("ops", "week", 12_500_000, "$12.50")
    assert main(["budgets", "list"]) == 0
    assert "ops\tweek\t$12.50\t$0.00\t$0.00\t$12.50\n" in capsys.readouterr().out
    assert main(["holds", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
