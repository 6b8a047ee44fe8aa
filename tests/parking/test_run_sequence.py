"""The stored per-run sequence is unique and gap-free (1..n in apply order), events from outside the worker
(an approval decision, a cancel) included."""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa

from engine.approvals.decide import decide
from engine.approvals.pending import list_pending
from engine.store.models import AppliedEvent, Run
from tests.parking.conftest import Parked, approval_flow


def _stored_sequence(parked: Parked, run_id: str) -> tuple[list[tuple[int, str]], int]:
    with parked.handles.sql.connect() as conn:
        rows = conn.execute(sa.select(AppliedEvent.seq, AppliedEvent.event_type)
                            .where(AppliedEvent.run_id == run_id).order_by(AppliedEvent.seq)).all()
        last_seq = conn.execute(sa.select(Run.last_seq).where(Run.id == run_id)).scalar_one()
    return [(row.seq, row.event_type) for row in rows], last_seq


def test_an_approval_decision_resuming_a_run_takes_its_own_place_in_the_sequence(parked_any_db: Parked) -> None:
    parked = parked_any_db
    parked.publish(approval_flow(delay="1s"))
    run_id = parked.start("gate")
    parked.waiting_on(run_id, "hold")
    parked.advance(1)
    parked.waiting_on(run_id, "ask")
    [pending] = list_pending(parked.handles)
    assert decide(parked.handles, pending.id, "approve", "user:ada").accepted
    assert parked.wait_status(run_id, "succeeded")["result"] == "shipped order-7"
    events, last_seq = _stored_sequence(parked, run_id)
    seqs = [seq for seq, _type in events]
    assert [seq for seq, count in Counter(seqs).items() if count > 1] == [], events
    assert seqs == list(range(1, len(events) + 1)) and last_seq == len(events)
    kinds = [kind for _seq, kind in events]
    decided, resumed = kinds.index("approval_decided"), kinds.index("run_resumed", kinds.index("approval_decided"))
    assert decided < resumed and kinds[-1] == "run_succeeded"


def test_runs_decided_and_cancelled_concurrently_each_keep_a_sequence_of_one_to_n(parked: Parked) -> None:
    import threading

    parked.publish(approval_flow(delay="1s"))
    run_ids = [parked.start("gate") for _ in range(8)]
    for run_id in run_ids:
        parked.waiting_on(run_id, "hold")
    parked.advance(1)
    for run_id in run_ids:
        parked.waiting_on(run_id, "ask")
    approvals = {item.run_id: item.id for item in list_pending(parked.handles)}
    barrier = threading.Barrier(len(run_ids))

    def settle(index: int, run_id: str) -> None:
        barrier.wait()
        if index % 4 == 3:
            parked.services.cancel_run(run_id, "cancelled while a decision is made")
        else:
            decide(parked.handles, approvals[run_id], "approve" if index % 2 else "reject", f"user:p{index}")

    threads = [threading.Thread(target=settle, args=(i, run_id)) for i, run_id in enumerate(run_ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for run_id in run_ids:
        parked.wait_status(run_id, "succeeded", "cancelled")
    parked.idle.wait()
    for run_id in run_ids:
        events, last_seq = _stored_sequence(parked, run_id)
        assert [seq for seq, _ in events] == list(range(1, last_seq + 1)), events
        assert events[-1][1] in ("run_succeeded", "run_cancelled")
