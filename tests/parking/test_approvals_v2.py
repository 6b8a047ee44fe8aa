"""Approvals v2 on the real engine (Redis, SQLite and PostgreSQL, a ManualClock): quorum under concurrent
decisions, forbid_self, reminders and escalation at their times, signed `notify_url` notices, validation."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from engine.approvals.decide import DecisionResult, decide, decide_with_key
from engine.approvals.keys import create_key
from engine.approvals.notices import notice_secret
from engine.approvals.pending import list_pending
from engine.store.models import AppliedEvent, Approval, ApprovalAttempt
from engine.triggers.webhooks import signature_ok
from engine.validation import validate
from tests.engine.conftest import LocalServer, QuietHandler, make_flow, wait_until
from tests.parking.conftest import TRIGGER, Parked

MINUTE = 60.0


def gate(flow_id: str = "gate2", **config: Any) -> dict[str, Any]:
    """trigger → approval (v2 config) → one terminal per port."""
    return make_flow(
        flow_id,
        [
            TRIGGER,
            {"id": "ask", "type": "approval", "config": {"timeout": "1h", "message": "Ship it?", **config}},
            {"id": "shipped", "type": "terminal", "config": {"output": "{{ 'shipped by ' ~ state.ask.decided_by }}"}},
            {"id": "dropped", "type": "terminal", "config": {"output": "{{ 'dropped by ' ~ state.ask.decided_by }}"}},
        ],
        [("start", "ask"), ("ask", "approved", "shipped"), ("ask", "rejected", "dropped")],
    )


def _park(parked: Parked, document: dict[str, Any], started_by: str | None = None) -> tuple[str, str]:
    parked.publish(document)
    run_id = parked.services.create_run(document["id"], {}, started_by=started_by).run_id
    parked.waiting_on(run_id, "ask")
    approval_id = wait_until(
        lambda: next((p.id for p in list_pending(parked.handles) if p.run_id == run_id), None),
        what="the pending approval row",
    )
    return run_id, str(approval_id)


def _row(parked: Parked, approval_id: str) -> dict[str, Any]:
    with parked.handles.sql.connect() as conn:
        return dict(conn.execute(sa.select(Approval.__table__).where(Approval.id == approval_id)).mappings().one())


def _events(parked: Parked, run_id: str, event_type: str) -> int:
    with parked.handles.sql.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count())
                .select_from(AppliedEvent)
                .where(AppliedEvent.run_id == run_id, AppliedEvent.event_type == event_type)
            ).scalar_one()
        )


def _keys(parked: Parked, count: int) -> list[str]:
    return [create_key(parked.handles.sql, f"k{index}") for index in range(count)]


@pytest.mark.parametrize("mixed", [False, True], ids=["all_approve", "one_key_rejects"])
def test_quorum_of_three_with_fifty_concurrent_decisions_from_five_keys_reaches_one_outcome(
    parked_any_db: Parked, mixed: bool
) -> None:
    parked = parked_any_db
    keys = _keys(parked, 5)
    run_id, approval_id = _park(parked, gate(required=3, approvers=[f"k{i}" for i in range(5)]))
    results: list[DecisionResult] = []
    lock = threading.Lock()
    barrier = threading.Barrier(50)

    def attempt(index: int) -> None:
        word = "reject" if mixed and index % 5 == 4 else "approve"
        barrier.wait()
        result = decide_with_key(parked.handles, approval_id, word, keys[index % 5], comment=f"attempt {index}")
        with lock:
            results.append(result)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    deciding = [r for r in results if r.port is not None]
    assert len(deciding) == 1, [r.message for r in results]
    accepted = [r for r in results if r.accepted]
    assert len({r.actor for r in accepted}) == len(accepted) <= 5  # each key counted at most once
    approvals = [r for r in accepted if r.decision == "approve"]
    if deciding[0].port == "approved":
        assert len(approvals) == 3 and deciding[0].approved_count == 3
    else:
        assert mixed and deciding[0].decision == "reject" and len(approvals) < 3
    assert {r.reason for r in results if not r.accepted} <= {"already_voted", "already_decided"}
    run = parked.wait_status(run_id, "succeeded", "failed")
    expected = "shipped by " if deciding[0].port == "approved" else "dropped by "
    assert run["result"] == expected + deciding[0].actor
    assert _events(parked, run_id, "approval_decided") == 1
    assert _events(parked, run_id, "step_completed") == 3  # trigger, ask, one terminal
    row = _row(parked, approval_id)
    assert row["status"] == deciding[0].port and row["required"] == 3
    with parked.handles.sql.connect() as conn:
        votes = conn.execute(
            sa.select(ApprovalAttempt.actor, ApprovalAttempt.comment).where(
                ApprovalAttempt.approval_id == approval_id, ApprovalAttempt.outcome == "accepted"
            )
        ).all()
    assert sorted(v.actor for v in votes) == sorted(r.actor for r in accepted)
    assert all(v.comment and v.comment.startswith("attempt ") for v in votes)
    ask = run["state"]["ask"]
    assert ask["required"] == 3 and len(ask["votes"]) == len(accepted)


def test_a_quorum_counts_distinct_approvers_and_the_first_rejection_rejects(parked: Parked) -> None:
    run_id, approval_id = _park(parked, gate(required=2, approvers=["ada", "bob", "cy"]))
    first = decide(parked.handles, approval_id, "approve", "user:ada", "fine by me")
    assert first.accepted and first.port is None and first.approved_count == 1 and "1 of 2" in first.message
    again = decide(parked.handles, approval_id, "approve", "user:ada")
    assert not again.accepted and again.reason == "already_voted" and "1 of 2 approved" in again.message
    parked.still_waiting(run_id, "ask")
    assert [p.id for p in list_pending(parked.handles)] == [approval_id]
    rejected = decide(parked.handles, approval_id, "reject", "user:bob", "not yet")
    assert rejected.accepted and rejected.port == "rejected"
    late = decide(parked.handles, approval_id, "approve", "user:cy")
    assert not late.accepted and late.reason == "already_decided"
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["result"] == "dropped by user:bob"
    assert [(v["by"], v["decision"], v["comment"]) for v in run["state"]["ask"]["votes"]] == [
        ("user:ada", "approved", "fine by me"),
        ("user:bob", "rejected", "not yet"),
    ]


def test_a_quorum_short_at_the_timeout_rejects(parked: Parked) -> None:
    run_id, approval_id = _park(parked, gate(required=2, timeout="30m"))
    assert decide(parked.handles, approval_id, "approve", "user:ada").approved_count == 1
    parked.advance(30 * MINUTE)
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["result"] == "dropped by timeout"
    assert _row(parked, approval_id)["status"] == "expired"


def test_forbid_self_refuses_the_key_that_started_the_run(parked: Parked) -> None:
    starter, other = _keys(parked, 2)
    run_id, approval_id = _park(parked, gate(forbid_self=True), started_by="key:k0")
    refused = decide_with_key(parked.handles, approval_id, "approve", starter)
    assert not refused.accepted and refused.reason == "self_decision" and "forbid_self" in refused.message
    parked.still_waiting(run_id, "ask")
    assert decide_with_key(parked.handles, approval_id, "approve", other).port == "approved"
    assert parked.wait_status(run_id, "succeeded", "failed")["result"] == "shipped by key:k1"


def test_without_forbid_self_the_starter_may_decide(parked: Parked) -> None:
    [starter] = _keys(parked, 1)
    run_id, approval_id = _park(parked, gate(), started_by="key:k0")
    assert decide_with_key(parked.handles, approval_id, "approve", starter).port == "approved"
    assert parked.wait_status(run_id, "succeeded", "failed")["result"] == "shipped by key:k0"


def test_reminders_come_at_each_interval_and_none_after_the_decision(parked: Parked) -> None:
    run_id, approval_id = _park(parked, gate(remind_every="10m", timeout="1h"))
    parked.still_waiting(run_id, "ask")
    assert _events(parked, run_id, "approval_reminded") == 0
    for number in (1, 2, 3):
        parked.advance(10 * MINUTE - 1)
        parked.still_waiting(run_id, "ask")
        assert _events(parked, run_id, "approval_reminded") == number - 1
        parked.advance(1)
        wait_until(lambda n=number: _row(parked, approval_id)["reminders_sent"] == n, what=f"reminder {number}")
        parked.still_waiting(run_id, "ask")
        assert _events(parked, run_id, "approval_reminded") == number
    assert decide(parked.handles, approval_id, "approve", "user:ada").port == "approved"
    parked.wait_status(run_id, "succeeded", "failed")
    parked.advance(60 * MINUTE)
    assert parked.services.waker is not None
    parked.services.waker.deliver_due()
    parked.idle.wait()
    assert _events(parked, run_id, "approval_reminded") == 3 and _row(parked, approval_id)["reminders_sent"] == 3


def test_every_park_of_an_approval_is_woken_by_its_decision_key(parked: Parked) -> None:
    """A decision claimed while the run seals a park (after its body read no claim, before its checkpoint is written)
    resumes the old park's token, which is dropped; the sealing write resumes the run instead when the decision
    key exists by then (`Park.wake_on_key`), for the first park and for each one after a reminder."""
    run_id, approval_id = _park(parked, gate(remind_every="10m", timeout="1h"))
    keys = parked.handles.keys

    def wake_key() -> object:
        raw = parked.handles.client.get(keys.run_checkpoint(run_id))
        assert raw is not None
        return orjson.loads(raw).get("wake_on_key")

    assert wake_key() == keys.approval_decision(approval_id)
    parked.advance(10 * MINUTE)
    wait_until(lambda: _row(parked, approval_id)["reminders_sent"] == 1, what="the reminder")
    parked.still_waiting(run_id, "ask")
    assert wake_key() == keys.approval_decision(approval_id)
    assert decide(parked.handles, approval_id, "approve", "user:ada").port == "approved"
    assert parked.wait_status(run_id, "succeeded")["result"] == "shipped by user:ada"


def test_reminders_stop_before_the_timeout(parked: Parked) -> None:
    run_id, approval_id = _park(parked, gate(remind_every="20m", timeout="1h"))
    for number in (1, 2):
        parked.advance(20 * MINUTE)
        wait_until(lambda n=number: _row(parked, approval_id)["reminders_sent"] == n, what=f"reminder {number}")
    parked.advance(20 * MINUTE)
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["result"] == "dropped by timeout"
    assert _events(parked, run_id, "approval_reminded") == 2  # at 20m and 40m; the 60m one is the timeout


def test_escalation_comes_at_exactly_escalate_after(parked_any_db: Parked) -> None:
    parked = parked_any_db
    run_id, approval_id = _park(parked, gate(approvers=["ada"], escalate_after="30m", escalate_to=["boss"]))
    parked.advance(30 * MINUTE - 1)
    parked.still_waiting(run_id, "ask")
    early = decide(parked.handles, approval_id, "approve", "user:boss")
    assert not early.accepted and early.reason == "not_allowed" and "escalate_to may decide from" in early.message
    assert _events(parked, run_id, "approval_escalated") == 0
    parked.advance(1)
    wait_until(lambda: _row(parked, approval_id)["escalated_at"] is not None, what="the escalation")
    assert _row(parked, approval_id)["escalated_at"].timestamp() == parked.clock.now()
    parked.still_waiting(run_id, "ask")
    assert _events(parked, run_id, "approval_escalated") == 1
    assert decide(parked.handles, approval_id, "approve", "user:boss", "covering").port == "approved"
    assert parked.wait_status(run_id, "succeeded", "failed")["result"] == "shipped by user:boss"


class Recorder(LocalServer):
    """A real HTTP server recording every POST (headers and body); `/flaky` fails its first request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        recorder = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with recorder.lock:
                    recorder.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    tries = sum(1 for path, _h, _b in recorder.requests if path == self.path)
                self.send_json(503 if self.path == "/flaky" and tries == 1 else 200, {"ok": True})

        super().__init__(Handler)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    try:
        yield server
    finally:
        server.close()


def test_notify_url_gets_signed_notices_on_request_reminder_escalation_and_decision(
    parked: Parked, recorder: Recorder
) -> None:
    document = gate(
        notify_url=recorder.url + "/notice/{{ run.id }}",
        remind_every="10m",
        escalate_after="15m",
        escalate_to="any",
        approvers=["ada"],
    )
    run_id, approval_id = _park(parked, document)
    parked.advance(10 * MINUTE)
    wait_until(lambda: _row(parked, approval_id)["reminders_sent"] == 1, what="the reminder")
    parked.advance(5 * MINUTE)
    wait_until(lambda: _row(parked, approval_id)["escalated_at"] is not None, what="the escalation")
    assert decide(parked.handles, approval_id, "approve", "user:grace", "ok").port == "approved"
    parked.wait_status(run_id, "succeeded")

    def events() -> list[str]:
        return [json.loads(body)["event"] for _p, _h, body in recorder.requests]

    try:
        wait_until(lambda: len(events()) == 4, what="four notices")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; received {events()}") from None
    assert events() == ["approval.requested", "approval.reminded", "approval.escalated", "approval.decided"]
    secret = notice_secret(parked.handles)
    for path, headers, body in recorder.requests:
        assert path == f"/notice/{run_id}"
        assert signature_ok(body, secret, headers["x-hub-signature-256"])
        assert headers["x-lockgate-event"] == json.loads(body)["event"]
    decided = json.loads(recorder.requests[-1][2])
    assert decided["status"] == "approved" and decided["decided_by"] == "user:grace" and decided["escalated"]
    assert decided["decisions"][0]["by"] == "user:grace" and decided["decisions"][0]["comment"] == "ok"
    assert not signature_ok(recorder.requests[0][2], "wrong-secret", recorder.requests[0][1]["x-hub-signature-256"])


def test_a_failed_notice_is_retried(parked: Parked, recorder: Recorder) -> None:
    run_id, _approval_id = _park(parked, gate(notify_url=recorder.url + "/flaky"))
    wait_until(lambda: len(recorder.requests) == 2, timeout=20, what="the retried notice")
    first, second = recorder.requests
    assert first[2] == second[2] and first[1]["x-delivery-id"] == second[1]["x-delivery-id"]
    # The server has answered the retry; the sender records the delivery once that answer reaches it.
    sender = parked.services.approval_notices
    wait_until(lambda: sender.delivered, timeout=20, what="the retried notice counted as delivered")
    assert sender.delivered == [second[1]["x-delivery-id"]]
    parked.still_waiting(run_id, "ask")


def _codes(document: dict[str, Any]) -> list[str]:
    return [d.code for d in validate(document)]


def test_validation_quorum_unreachable_and_escalation_after_timeout() -> None:
    assert "quorum_unreachable" in _codes(gate(required=3, approvers=["ada", "bob"]))
    assert "quorum_unreachable" not in _codes(
        gate(required=3, approvers=["ada", "bob"], escalate_after="10m", escalate_to=["cy"])
    )
    assert "quorum_unreachable" not in _codes(gate(required=3))  # approvers: any
    assert "quorum_unreachable" not in _codes(gate(required=2, approvers=["ada", "bob"]))
    assert "escalation_after_timeout" in _codes(gate(escalate_after="1h", escalate_to=["boss"]))
    assert "escalation_after_timeout" in _codes(gate(escalate_after="2h", escalate_to=["boss"]))
    assert "escalation_after_timeout" not in _codes(gate(escalate_after="59m", escalate_to=["boss"]))
    assert "bad_duration" in _codes(gate(remind_every="0s"))
    assert "bad_duration" not in _codes(gate(remind_every="10m"))
    problems = {d.code: d for d in validate(gate(required=3, approvers=["ada"]))}
    assert problems["quorum_unreachable"].severity == "error" and problems["quorum_unreachable"].node == "ask"


def test_reminders_and_escalations_are_engine_events_a_flow_can_listen_to(parked: Parked) -> None:
    for event_type in ("approval.reminded", "approval.escalated"):
        name = event_type.replace(".", "-")
        parked.publish(
            make_flow(
                name,
                [
                    {"id": "on", "type": "trigger.event", "config": {"event_type": event_type}},
                    {"id": "done", "type": "terminal", "config": {"output": "{{ 'heard' }}"}},
                ],
                [("on", "done")],
            )
        )
    run_id, _approval_id = _park(parked, gate(remind_every="10m", escalate_after="15m", escalate_to="any"))
    parked.advance(10 * MINUTE)
    wait_until(lambda: len(parked.services.list_runs(flow_id="approval-reminded")) == 1, what="a reminded run")
    assert parked.services.list_runs(flow_id="approval-escalated") == []
    parked.advance(5 * MINUTE)
    wait_until(lambda: len(parked.services.list_runs(flow_id="approval-escalated")) == 1, what="an escalated run")
    parked.still_waiting(run_id, "ask")
    assert len(parked.services.list_runs(flow_id="approval-reminded")) == 1


def test_a_pending_approval_names_its_nodes_title_in_its_runs_version(parked: Parked) -> None:
    titled = gate("titled")
    titled["nodes"][1]["title"] = "  Release approval "
    _park(parked, titled)
    untitled_run, _ = _park(parked, gate("untitled"))
    titles = {p.flow_id: p.node_title for p in list_pending(parked.handles)}
    assert titles == {"titled": "Release approval", "untitled": ""}
    titled["nodes"][1]["title"] = "Second look"  # a new version renames it; the parked run keeps its version's
    _park(parked, titled)
    assert sorted(p.node_title for p in list_pending(parked.handles) if p.flow_id == "titled") == [
        "Release approval", "Second look"]
    assert untitled_run in {p.run_id for p in list_pending(parked.handles)}
