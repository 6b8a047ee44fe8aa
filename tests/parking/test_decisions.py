"""Decisions: one winner under concurrency, refusals recorded and harmless, rights, the resume at the decision
(its latency on the system clock: tests/bench/decision_resume.py)."""

from __future__ import annotations

import threading
from datetime import UTC
from typing import Any

import pytest
import sqlalchemy as sa

from engine.approvals.decide import DecisionResult, decide, decide_with_key
from engine.approvals.keys import DECIDE_SCOPE, create_key, revoke_key
from engine.approvals.pending import list_pending
from engine.store.models import Approval, ApprovalAttempt, Step
from tests.parking.conftest import HOUR, Parked, approval_flow


def _park_at_approval(parked: Parked, **flow: Any) -> tuple[str, str]:
    parked.publish(approval_flow(delay="1s", **flow))
    run_id = parked.start("gate")
    parked.waiting_on(run_id, "hold")
    parked.advance(1)
    parked.waiting_on(run_id, "ask")
    pending = list_pending(parked.handles)
    assert [p.run_id for p in pending] == [run_id]
    return run_id, pending[0].id


def _attempts(parked: Parked) -> list[tuple[str, str, str]]:
    with parked.handles.sql.connect() as conn:
        rows = conn.execute(sa.select(ApprovalAttempt.actor, ApprovalAttempt.outcome, ApprovalAttempt.reason)
                            .order_by(ApprovalAttempt.id)).all()
    return [(r.actor, r.outcome, (r.reason or "").split(":", 1)[0]) for r in rows]


def _approval_row(parked: Parked, approval_id: str) -> dict[str, Any]:
    with parked.handles.sql.connect() as conn:
        return dict(conn.execute(sa.select(Approval.__table__).where(Approval.id == approval_id)).mappings().one())


def test_exactly_one_of_many_concurrent_decisions_wins(parked: Parked) -> None:
    run_id, approval_id = _park_at_approval(parked)
    results: list[DecisionResult] = []
    barrier = threading.Barrier(8)

    def attempt(index: int) -> None:
        barrier.wait()
        results.append(decide(parked.handles, approval_id, "approve" if index % 2 else "reject", f"user:p{index}"))

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [r for r in results if r.accepted]
    assert len(winners) == 1, [r.message for r in results]
    assert {r.reason for r in results if not r.accepted} == {"already_decided"}
    run = parked.wait_status(run_id, "succeeded", "failed")
    expected = "shipped order-7" if winners[0].port == "approved" else f"dropped by {winners[0].actor}"
    assert run["result"] == expected
    outcomes = [a[1] for a in _attempts(parked)]
    assert outcomes.count("accepted") == 1 and outcomes.count("refused") == 7
    assert _approval_row(parked, approval_id)["decided_by"] == winners[0].actor


def test_refusals_are_recorded_and_change_nothing(parked: Parked) -> None:
    run_id, approval_id = _park_at_approval(parked, approvers=["ops-bot", "user:ada"])
    sql = parked.handles.sql
    good = create_key(sql, "ops-bot")
    outsider = create_key(sql, "outsider")
    revoked = create_key(sql, "old-bot")
    revoke_key(sql, "old-bot")
    no_rights = create_key(sql, "runner", scopes=("runs:create",))
    checks = [
        (decide_with_key(parked.handles, approval_id, "approve", "not-a-key"), "malformed_key"),
        (decide_with_key(parked.handles, approval_id, "approve", good[:-1] + ("A" if good[-1] != "A" else "B")),
         "unknown_key"),
        (decide_with_key(parked.handles, approval_id, "approve", revoked), "revoked_key"),
        (decide_with_key(parked.handles, approval_id, "approve", no_rights), "key_without_rights"),
        (decide_with_key(parked.handles, approval_id, "approve", outsider), "not_allowed"),
        (decide(parked.handles, approval_id, "approve", "user:bob"), "not_allowed"),
        (decide(parked.handles, approval_id, "maybe", "user:ada"), "bad_decision"),
        (decide(parked.handles, "ap_missing", "approve", "user:ada"), "unknown_approval"),
    ]
    for result, reason in checks:
        assert not result.accepted and result.reason == reason, (reason, result.message)
        assert result.message
    assert "ops-bot, user:ada" in checks[4][0].message
    assert "lacks the decide right (approvals:decide)" in checks[3][0].message
    assert parked.services.get_run(run_id, with_steps=False)["status"] == "waiting"  # type: ignore[index]
    assert _approval_row(parked, approval_id)["status"] == "pending"
    assert parked.handles.client.get(parked.handles.keys.approval_decision(approval_id)) is None
    accepted = decide_with_key(parked.handles, approval_id, "reject", good, comment="not today")
    assert accepted.accepted and accepted.actor == "key:ops-bot" and accepted.port == "rejected"
    again = decide(parked.handles, approval_id, "approve", "user:ada")
    assert not again.accepted and again.reason == "already_decided" and "rejected by key:ops-bot" in again.message
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["result"] == "dropped by key:ops-bot"
    assert [a[:2] for a in _attempts(parked)] == [
        ("key:(unidentified)", "refused"), ("key:(unidentified)", "refused"), ("key:old-bot", "refused"),
        ("key:runner", "refused"), ("key:outsider", "refused"), ("user:bob", "refused"), ("user:ada", "refused"),
        ("user:ada", "refused"), ("key:ops-bot", "accepted"), ("user:ada", "refused")]
    assert DECIDE_SCOPE == "approvals:decide"


def test_a_decision_after_the_timeout_is_refused_even_before_the_run_resumed(parked: Parked) -> None:
    parked.services.waker.stop()  # type: ignore[union-attr]  # keep the run parked past its timeout
    run_id, approval_id = _park_at_approval_without_waker(parked)
    parked.clock.advance(2 * HOUR)
    late = decide(parked.handles, approval_id, "approve", "user:ada")
    assert not late.accepted and late.reason == "expired" and "counts as rejected" in late.message
    assert parked.handles.client.get(parked.handles.keys.approval_decision(approval_id)) is None
    assert list_pending(parked.handles) == [] and len(list_pending(parked.handles, include_expired=True)) == 1
    assert parked.services.get_run(run_id, with_steps=False)["status"] == "waiting"  # type: ignore[index]


def _park_at_approval_without_waker(parked: Parked) -> tuple[str, str]:
    parked.publish(approval_flow(delay="0s"))
    run_id = parked.start("gate")
    # A zero delay is due at once; the stopped waker never pops it, so resume it by hand.
    parked.waiting_on(run_id, "hold")
    from engine.runtime.jobs import encode_job, resume_job

    parked.handles.client.xadd(parked.handles.keys.jobs, encode_job(resume_job(run_id)))
    parked.waiting_on(run_id, "ask")
    pending = list_pending(parked.handles)
    return run_id, pending[0].id


def test_a_decided_run_resumes_at_once_with_the_clock_standing_still(parked: Parked) -> None:
    run_id, approval_id = _park_at_approval(parked, timeout="1h")
    decided_at = parked.clock.now()
    assert decide(parked.handles, approval_id, "approve", "user:ada").accepted
    run = parked.wait_status(run_id, "succeeded", "failed")  # no time passes: the decision itself woke it
    assert run["result"] == "shipped order-7"
    ask = next(step for step in run["steps"] if step["step"] == "ask")
    assert ask["status"] == "succeeded"
    with parked.handles.sql.connect() as conn:
        finished = conn.execute(sa.select(Step.finished_at).where(Step.run_id == run_id, Step.step == "ask")).scalar()
    stamp = finished if finished.tzinfo else finished.replace(tzinfo=UTC)
    assert stamp.timestamp() == pytest.approx(decided_at, abs=1e-3)  # resumed at the decision's instant
    assert parked.clock.now() == decided_at


def test_a_cancelled_run_leaves_no_pending_approval_and_refuses_decisions(parked: Parked) -> None:
    run_id, approval_id = _park_at_approval(parked)
    assert parked.services.cancel_run(run_id) == "cancelled"
    parked.wait_status(run_id, "cancelled")
    assert list_pending(parked.handles) == []
    refused = decide(parked.handles, approval_id, "approve", "user:ada")
    assert not refused.accepted and refused.reason == "run_not_waiting" and "cancelled" in refused.message
