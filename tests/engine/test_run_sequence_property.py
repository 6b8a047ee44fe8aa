"""Property: whatever the batching, interleaving, redelivery and refusals, each run's stored sequence is 1..n in
apply order, with one place per applied event, none for a dead letter, and the live changes carry the same
numbers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.clock import ManualClock
from engine.events import EventBase, EventStamper, ExternalStamper, encode_event
from engine.flow import flow_from_data
from engine.publish import publish
from engine.runtime.projection import apply_batch
from engine.store.db import init_db, make_engine
from engine.store.models import AppliedEvent, Run
from tests.engine.conftest import make_flow

_runs = itertools.count()


@pytest.fixture(scope="module")
def sql(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('seq') / 'lockgate.db'}")
    init_db(engine)
    publish(engine, flow_from_data(make_flow("seq", [{"id": "start", "type": "trigger.manual"},
                                                     {"id": "done", "type": "terminal"}], [("start", "done")])))
    yield engine
    engine.dispose()


def _queued(sql: sa.Engine, run_id: str) -> None:
    now = datetime.now(UTC)
    with sql.begin() as conn:
        conn.execute(sa.insert(Run).values(id=run_id, flow_id="seq", version=1, status="queued", trigger="start",
                                           inputs={}, state={}, cost_micros=0, last_seq=0, created_at=now,
                                           updated_at=now))


def _run_events(run_id: str, decided_outside: bool) -> list[EventBase]:
    """A run that parks on an approval and is resumed: the worker's count and the decision's collide."""
    clock = ManualClock(1_800_000_000.0)
    worker = EventStamper(run_id, clock)
    events: list[EventBase] = [
        worker.run_started("seq", 1, "start", {}), worker.step_started("start", "start", "trigger.manual"),
        worker.step_completed("start", "start", ["out"], {}, 0.1),
        worker.approval_requested("done", "ap-" + run_id, 1_800_086_400.0), worker.run_parked("done", "approval", None)]
    decider = ExternalStamper(run_id, clock, last_seq=worker.last_seq) if decided_outside else worker
    events.append(decider.approval_decided("done", "ap-" + run_id, "approved", "ada"))
    resumed = EventStamper(run_id, clock, attempt=1, last_seq=5)  # the worker continues from its checkpoint
    events += [resumed.run_resumed("done"), resumed.step_started("done", "done", "terminal"),
               resumed.step_completed("done", "done", [], {}, 0.2), resumed.run_succeeded("ok"),
               resumed.step_started("late", "late", "set")]  # after the end: refused, a dead letter
    return events


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), runs=st.integers(1, 4))
def test_each_run_is_numbered_one_to_n_whatever_the_batches(sql: sa.Engine, data: st.DataObject, runs: int) -> None:
    run_ids = [f"p{next(_runs)}" for _ in range(runs)]
    per_run = {run_id: _run_events(run_id, data.draw(st.booleans())) for run_id in run_ids}
    for run_id in run_ids:
        _queued(sql, run_id)
    # Interleave the runs' streams (each run's own order kept), as the events stream holds them.
    cursors = dict.fromkeys(run_ids, 0)
    order: list[EventBase] = []
    while any(cursors[run_id] < len(per_run[run_id]) for run_id in run_ids):
        run_id = data.draw(st.sampled_from([r for r in run_ids if cursors[r] < len(per_run[r])]))
        order.append(per_run[run_id][cursors[run_id]])
        cursors[run_id] += 1
    # Redelivery: a batch may be delivered again, whole or in part, before the stream moves on.
    published: list[dict[str, Any]] = []
    position = 0
    while position < len(order):
        size = data.draw(st.integers(1, 6))
        batch = order[position:position + size]
        if data.draw(st.booleans()) and position:
            batch = order[max(0, position - data.draw(st.integers(1, 4))):position] + batch
        result = apply_batch(sql, [(f"{i}-0", encode_event(event)) for i, event in enumerate(batch)])
        published += [orjson.loads(raw) for raw in result.published]
        assert [orjson.loads(raw) for raw in result.published] == [change.to_data() for change in result.changes]
        position += size
    with sql.connect() as conn:
        rows = conn.execute(sa.select(AppliedEvent.run_id, AppliedEvent.seq, AppliedEvent.event_type,
                                      AppliedEvent.change).where(AppliedEvent.run_id.in_(run_ids))).all()
        last = dict(conn.execute(sa.select(Run.id, Run.last_seq).where(Run.id.in_(run_ids))).all())
    for run_id in run_ids:
        mine = [row for row in rows if row.run_id == run_id]
        placed = sorted((row.seq, row.event_type) for row in mine if row.seq is not None)
        dead = [row for row in mine if row.seq is None]
        assert [seq for seq, _ in placed] == list(range(1, 11)), placed
        assert [kind for _, kind in placed] == [event.model_dump()["type"] for event in per_run[run_id][:10]]
        assert len(dead) == 1 and dead[0].event_type == "step_started" and dead[0].change is None
        assert last[run_id] == 10
        live = [change["seq"] for change in published if change["run_id"] == run_id]
        assert live == list(range(1, 11))  # each place published once, in order
        stored = {row.seq: orjson.loads(row.change) for row in mine if row.seq is not None}
        assert [stored[seq] for seq in live] == [c for c in published if c["run_id"] == run_id]
