"""Flow-test fixtures: the money area's engine (real Redis, SQLite or PostgreSQL, the provider simulator, the
manual clock) running the ticket-triage example, and helpers that record its runs as tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.approvals.body import approval_id_for
from engine.approvals.decide import decide
from engine.flowtest.model import FlowTest, save_test
from engine.flowtest.record import record_test
from tests.engine.conftest import any_db_engine, site  # noqa: F401  (fixtures)
from tests.money.conftest import (  # noqa: F401  (fixtures)
    MoneyEngine,
    clock,
    money_engine,
    start_money_engine,
    triage_document,
)

QUESTION = {"ticket": {"id": "T-7", "body": "How do I export my invoices?"}}
REFUND = {"ticket": {"id": "T-8", "body": "I was charged twice, please refund me"}}
DAY = 24 * 3600


def write_flow(directory: Path, document: dict[str, Any]) -> Path:
    path = directory / f"{document['id']}.flow.json"
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


def question_run(engine: MoneyEngine) -> str:
    """A question ticket: classified, routed to the follow-up, which waits a day, then done."""
    engine.publish(triage_document())
    run_id = engine.start("ticket-triage", QUESTION, trigger="hook")
    engine.wait_parked(run_id, "queue_delay")
    engine.advance(DAY)
    assert engine.wait(run_id)["status"] == "succeeded"
    return run_id


def refund_run(engine: MoneyEngine, decide_after: float | None) -> str:
    """A refund ticket at the approval: decided by "ada" after `decide_after` seconds, or (None) timed out."""
    engine.publish(triage_document())
    run_id = engine.start("ticket-triage", REFUND, trigger="hook")
    engine.wait_parked(run_id, "approval")
    if decide_after is None:
        engine.advance(DAY)
    else:
        engine.advance(decide_after)
        handles = engine.services.handles
        assert handles is not None
        result = decide(handles, approval_id_for(run_id, "approve"), "approve", "ada", "refund it")
        assert result.accepted, result.message
    engine.wait(run_id)
    return run_id


def record(engine: MoneyEngine, run_id: str, name: str, directory: Path) -> tuple[FlowTest, Path]:
    assert engine.services.sql is not None
    test = record_test(engine.services.sql, run_id, name)
    return test, save_test(test, directory)
