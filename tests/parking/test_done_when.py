"""The issue's done-when flow on the injected clock: trigger → queue 24h → approval (2h) → terminal."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from engine.approvals.decide import decide_with_key
from engine.approvals.keys import create_key
from engine.store.models import Approval, ApprovalAttempt
from tests.engine.conftest import wait_until
from tests.parking.conftest import HOUR, START, Parked, approval_flow

MS = 0.001


def _approval(parked: Parked, run_id: str) -> dict[str, Any]:
    with parked.handles.sql.connect() as conn:
        row = conn.execute(sa.select(Approval.__table__).where(Approval.run_id == run_id)).mappings().first()
    assert row is not None, f"no approval row for run {run_id}"
    return dict(row)


def test_parks_resumes_after_24h_parks_for_approval_and_a_key_decides(parked_any_db: Parked) -> None:
    parked = parked_any_db
    parked.publish(approval_flow())
    key = create_key(parked.handles.sql, "ops-bot")
    run_id = parked.start("gate")
    run = parked.waiting_on(run_id, "hold")
    assert run["waiting_on"] == {"node": "hold", "reason": "queue_delay", "due_at": START + 24 * HOUR}
    # The park is projected as the worker acknowledges its job; the worker lets go right after.
    wait_until(lambda: all(not worker.active for worker in parked.services.workers), timeout=20,
               what="every worker to let go of the parked run")
    parked.advance(24 * HOUR - MS)  # 1 ms before the due time: still parked
    parked.still_waiting(run_id, "hold")
    parked.advance(MS)
    run = parked.waiting_on(run_id, "ask")
    assert run["waiting_on"]["reason"] == "approval" and run["waiting_on"]["due_at"] == START + 26 * HOUR
    approval = _approval(parked, run_id)
    assert approval["status"] == "pending" and approval["message"] == "Ship order-7?"
    assert approval["flow_id"] == "gate" and approval["node_id"] == "ask"
    assert approval["expires_at"].timestamp() == START + 26 * HOUR
    parked.advance(HOUR)
    result = decide_with_key(parked.handles, approval["id"], "approve", key, comment="looks fine")
    assert result.accepted and result.port == "approved" and result.actor == "key:ops-bot", result.message
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "succeeded" and run["result"] == "shipped order-7"
    assert run["state"]["ask"]["decided_by"] == "key:ops-bot" and run["state"]["ask"]["comment"] == "looks fine"
    assert {s["step"]: s["status"] for s in run["steps"]}["dropped"] == "skipped"
    decided = _approval(parked, run_id)
    assert (decided["status"], decided["decision"], decided["decided_by"]) == ("approved", "approve", "key:ops-bot")
    with parked.handles.sql.connect() as conn:
        attempts = conn.execute(sa.select(ApprovalAttempt.actor, ApprovalAttempt.outcome)).all()
    assert [tuple(a) for a in attempts] == [("key:ops-bot", "accepted")]


def test_no_decision_takes_rejected_at_the_timeout(parked_any_db: Parked) -> None:
    parked = parked_any_db
    parked.publish(approval_flow())
    run_id = parked.start("gate")
    parked.waiting_on(run_id, "hold")
    parked.advance(24 * HOUR)
    parked.waiting_on(run_id, "ask")
    parked.advance(2 * HOUR - MS)
    parked.still_waiting(run_id, "ask")
    parked.advance(MS)
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["result"] == "dropped by timeout"
    assert {s["step"]: s["status"] for s in run["steps"]}["shipped"] == "skipped"
    approval = _approval(parked, run_id)
    assert (approval["status"], approval["decision"], approval["decided_by"]) == ("expired", "reject", "timeout")


def test_a_run_kept_waiting_past_72h_fails_parked_expired(parked: Parked) -> None:
    # 71h queue, then a 71h approval: the approval would time out at 142h, but max_wait ends the run at 72h.
    parked.publish(approval_flow("long", delay="71h", timeout="71h"))
    run_id = parked.start("long")
    parked.waiting_on(run_id, "hold")
    parked.advance(71 * HOUR - MS)
    parked.still_waiting(run_id, "hold")
    parked.advance(MS)  # the 71h queue is due
    run = parked.waiting_on(run_id, "ask")
    parked.advance(HOUR - MS)  # 72h minus 1 ms since the first park
    parked.still_waiting(run_id, "ask")
    parked.advance(MS)
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "failed" and run["error_type"] == "parked_expired", run["error"]
    assert "max_wait (3d)" in run["error"] or "max_wait (72h)" in run["error"], run["error"]
    assert {s["step"]: s["status"] for s in run["steps"]}["ask"] == "failed"
    assert run["waiting_on"] is None
