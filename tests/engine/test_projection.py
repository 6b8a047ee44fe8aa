"""The projector: idempotent application, the state machine's refusals, poison events, the lease."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from engine.clock import ManualClock
from engine.events import EventBase, EventStamper, ExternalStamper, RerunSeed, encode_event
from engine.flow import flow_from_data
from engine.publish import publish
from engine.runtime.emitter import EVENT_FIELD, RedisEmitter, entry_fields
from engine.runtime.live_change import LiveChange
from engine.runtime.projection import apply_batch
from engine.runtime.projector import LeaseLost, Projector, ProjectorLease, batch_summary, linger
from engine.store.db import init_db, make_engine
from engine.store.models import AppliedEvent, DeadLetter, Run, Step
from engine.transport.keys import Keyspace
from engine.transport.streams import ensure_group
from tests.engine.conftest import Engine, make_flow, wait_until


@pytest.fixture
def sql(db_url: str) -> Any:
    engine = make_engine(db_url)
    init_db(engine)
    doc = make_flow("proj", [{"id": "start", "type": "trigger.manual"},
                             {"id": "a", "type": "set", "config": {"values": {"x": "1"}}},
                             {"id": "done", "type": "terminal"}], [("start", "a"), ("a", "done")])
    publish(engine, flow_from_data(doc))
    yield engine
    engine.dispose()


def _queued(sql: sa.Engine, run_id: str) -> None:
    now = datetime.now(UTC)
    with sql.begin() as conn:
        conn.execute(sa.insert(Run).values(id=run_id, flow_id="proj", version=1, status="queued", trigger="start",
                                           inputs={}, state={}, cost_micros=0, last_seq=0, created_at=now,
                                           updated_at=now))


def _stream_of_one_run(sql: sa.Engine, redis_url: str, key_prefix: str) -> tuple[redis.Redis, Keyspace]:
    """A client and keyspace with the events stream's group made, and run `r1` queued in SQL."""
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    ensure_group(client, keys.events, keys.events_group)
    _queued(sql, "r1")
    return client, keys


def _snapshot(sql: sa.Engine) -> dict[str, Any]:
    with sql.connect() as conn:
        return {
            "runs": sorted(tuple(r) for r in conn.execute(sa.select(Run.__table__))),
            "steps": sorted(tuple(r) for r in conn.execute(sa.select(Step.__table__))),
            "applied": conn.execute(sa.select(sa.func.count()).select_from(AppliedEvent)).scalar(),
            "dead": conn.execute(sa.select(sa.func.count()).select_from(DeadLetter)).scalar(),
        }


def _every_event_type(run_id: str) -> list[EventBase]:
    clock = ManualClock(1_800_000_000.0)
    s = EventStamper(run_id, clock)
    return [
        s.run_started("proj", 1, "start", {}), s.step_started("start", "start", "trigger.manual"),
        s.step_completed("start", "start", ["out"], {}, 0.1), s.step_started("a", "a", "set"),
        s.step_failed("a", "a", "boom", will_retry=True, retry_in=1.0), s.step_started("a", "a", "set", 2),
        s.step_completed("a", "a", ["out"], {"x": "1"}, 1.0, 2), s.step_skipped("b", "b"),
        s.hold_placed("a", "h1", "default", 0.5, 1_800_001_000.0), s.hold_charged("a", "h1", 0.1),
        s.hold_released("a", "h1", 0.4), s.approval_requested("done", "ap1", 1_800_086_400.0),
        s.run_parked("done", "approval", None), s.approval_decided("done", "ap1", "approved", "ada"),
        s.run_resumed("done"), s.step_started("done", "done", "terminal"),
        s.step_completed("done", "done", [], {}, 0.2), s.run_succeeded("fine"),
    ]


def _messages(events: list[EventBase]) -> list[tuple[str, bytes]]:
    return [(f"{i}-0", encode_event(e)) for i, e in enumerate(events)]


def test_a_batch_names_the_parent_of_each_child_run_it_ended(sql: sa.Engine) -> None:
    """The child-run waker reads parents from the batch instead of querying SQL, so every ended child must be
    named with its parent, and no run without one."""
    _queued(sql, "parent")
    _queued(sql, "child")
    _queued(sql, "alone")
    with sql.begin() as conn:
        conn.execute(sa.update(Run).where(Run.id == "child").values(parent_run_id="parent", call_depth=1))
    clock = ManualClock(1_800_000_000.0)
    events: list[EventBase] = []
    for run_id in ("child", "alone"):
        s = EventStamper(run_id, clock)
        events += [s.run_started("proj", 1, "start", {}), s.run_succeeded(None)]
    result = apply_batch(sql, _messages(events))
    assert sorted(result.terminal_runs) == [("alone", "succeeded"), ("child", "succeeded")]
    assert result.parents == {"child": "parent"}


def test_applying_every_event_twice_or_a_batch_again_changes_nothing(sql: sa.Engine) -> None:
    _queued(sql, "r1")
    events = _every_event_type("r1")
    first = apply_batch(sql, _messages(events))
    assert first.applied == len(events) and first.dead == 0
    after = _snapshot(sql)
    run = after["runs"][0]
    assert "succeeded" in run and "fine" in run
    for event in events:  # each one again, alone
        again = apply_batch(sql, _messages([event]))
        assert again.applied == 0 and again.duplicates == 1
    assert apply_batch(sql, _messages(events)).duplicates == len(events)  # the whole batch redelivered
    assert _snapshot(sql) == after
    with sql.connect() as conn:
        steps = {r.step: (r.status, r.attempts) for r in conn.execute(sa.select(Step.step, Step.status, Step.attempts))}
    assert steps == {"start": ("succeeded", 1), "a": ("succeeded", 2), "b": ("skipped", 0), "done": ("succeeded", 1)}


def test_events_applied_one_by_one_equal_one_batch(sql: sa.Engine) -> None:
    _queued(sql, "r1")
    _queued(sql, "r2")
    for event in _every_event_type("r1"):
        apply_batch(sql, _messages([event]))
    apply_batch(sql, _messages(_every_event_type("r2")))
    with sql.connect() as conn:
        rows = {r.id: (r.status, r.result, r.state, r.last_seq) for r in
                conn.execute(sa.select(Run.id, Run.status, Run.result, Run.state, Run.last_seq))}
    assert rows["r1"] == rows["r2"] == ("succeeded", "fine", {"x": "1"}, 18)


def test_a_rerun_takes_its_seed_state_and_reused_steps_from_its_events(sql: sa.Engine) -> None:
    """A rerun's row is created with no state: its run_started carries the seed, each step_reused a step row."""
    _queued(sql, "r1")
    s = EventStamper("r1", ManualClock(1_800_000_000.0))
    flop = {"message": "HTTP 500", "type": "http_status", "attempts": 1}
    events: list[EventBase] = [
        s.run_started("proj", 1, "start", {}, rerun=RerunSeed(rerun_of="r0", from_node="done", state={"x": "1"},
                                                              errors={"flop": flop})),
        s.step_reused("start", "start", "trigger.manual", "r0", ["out"], {}),
        s.step_reused("flop", "flop", "http.request", "r0", None, {}, error="HTTP 500", error_type="http_status"),
        s.step_reused("a", "a", "set", "r0", ["out"], {"x": "1"}),
        s.step_started("done", "done", "terminal"), s.step_completed("done", "done", [], {"y": 2}, 0.2),
        s.run_succeeded("fine"),
    ]
    assert apply_batch(sql, _messages(events)).applied == len(events)
    after = _snapshot(sql)
    assert apply_batch(sql, _messages(events)).duplicates == len(events)
    assert _snapshot(sql) == after
    with sql.connect() as conn:
        run = conn.execute(sa.select(Run.state, Run.errors, Run.last_seq).where(Run.id == "r1")).one()
        steps = {r.step: (r.status, r.attempts, r.node_type, r.ports, r.output, r.error_type) for r in
                 conn.execute(sa.select(Step.__table__).where(Step.run_id == "r1"))}
        seqs = list(conn.execute(sa.select(AppliedEvent.seq).where(AppliedEvent.run_id == "r1")
                                 .order_by(AppliedEvent.seq)).scalars())
    assert (run.state, run.errors, run.last_seq) == ({"x": "1", "y": 2}, {"flop": flop}, len(events))
    assert seqs == list(range(1, len(events) + 1))
    assert steps == {"start": ("succeeded", 0, "trigger.manual", ["out"], {}, None),
                     "flop": ("failed", 0, "http.request", None, None, "http_status"),
                     "a": ("succeeded", 0, "set", ["out"], {"x": "1"}, None),
                     "done": ("succeeded", 1, "terminal", [], {"y": 2}, None)}


def test_the_state_machine_refuses_illegal_transitions_into_dead_letters(sql: sa.Engine) -> None:
    _queued(sql, "r1")
    clock = ManualClock()
    s = EventStamper("r1", clock)
    refused = apply_batch(sql, _messages([s.run_succeeded("too soon"), s.step_started("a", "a", "set")]))
    assert refused.applied == 0 and refused.dead == 2
    apply_batch(sql, _messages([s.run_started("proj", 1, "start", {}), s.run_failed("boom")]))
    late = apply_batch(sql, _messages([s.run_started("proj", 1, "start", {}), s.run_resumed("a"),
                                       ExternalStamper("r1", clock).run_cancelled()]))
    assert late.dead == 3
    with sql.connect() as conn:
        assert conn.execute(sa.select(Run.status).where(Run.id == "r1")).scalar() == "failed"
        errors = list(conn.execute(sa.select(DeadLetter.error)).scalars())
    assert len(errors) == 5
    assert any("from queued to succeeded" in e for e in errors)
    assert any("from failed to running" in e for e in errors)
    assert any("from failed to cancelled" in e for e in errors)
    assert any("not accepted while the run is queued" in e for e in errors)


def test_poison_events_are_dead_lettered_and_acknowledged(sql: sa.Engine, redis_url: str, key_prefix: str) -> None:
    client, keys = _stream_of_one_run(sql, redis_url, key_prefix)
    good = EventStamper("r1", ManualClock()).run_started("proj", 1, "start", {})
    unknown_run = EventStamper("nope", ManualClock()).run_started("proj", 1, "start", {})
    for payload in (b"{not json", encode_event(good), b'{"type": "run_started"}', encode_event(unknown_run)):
        client.xadd(keys.events, {EVENT_FIELD: payload})
    projector = Projector(client, keys, sql)
    assert projector.lease.acquire_or_renew()
    result = projector.step(block_ms=100)
    assert (result.applied, result.dead) == (1, 3)
    assert client.xpending(keys.events, keys.events_group)["pending"] == 0
    assert projector.step(block_ms=10).applied == 0  # nothing is retried forever
    with sql.connect() as conn:
        dead = list(conn.execute(sa.select(DeadLetter.payload, DeadLetter.error)))
    assert len(dead) == 3
    assert any(row.payload == b"{not json" and "does not match the contract" in row.error for row in dead)
    assert any("names a run the store does not have" in row.error for row in dead)


def test_one_entry_carries_a_flush_of_several_events_and_each_is_applied_in_order(
        sql: sa.Engine, redis_url: str, key_prefix: str) -> None:
    client, keys = _stream_of_one_run(sql, redis_url, key_prefix)
    stamper = EventStamper("r1", ManualClock())
    emitter = RedisEmitter(client, keys.events)
    for event in (stamper.run_started("proj", 1, "start", {}), stamper.step_started("a", "a", "set"),
                  stamper.step_completed("a", "a", ["out"], {"x": "1"}, 0.5)):
        emitter.emit(event)
    emitter.flush()
    assert client.xlen(keys.events) == 1
    poisoned = [encode_event(stamper.step_started("done", "done", "terminal")), b"{not json",
                encode_event(stamper.run_succeeded(None))]
    client.xadd(keys.events, entry_fields(poisoned))
    projector = Projector(client, keys, sql)
    assert projector.lease.acquire_or_renew()
    result = projector.step(block_ms=100)
    assert (projector.entries_read, result.applied, result.dead) == (2, 5, 1)
    assert [change.event for change in result.changes] == ["run_started", "step_started", "step_completed",
                                                           "step_started", "run_succeeded"]
    assert [change.seq for change in result.changes] == [1, 2, 3, 4, 5]
    assert client.xpending(keys.events, keys.events_group)["pending"] == 0
    with sql.connect() as conn:
        assert conn.execute(sa.select(Run.status).where(Run.id == "r1")).scalar() == "succeeded"
        assert list(conn.execute(sa.select(DeadLetter.payload)).scalars()) == [b"{not json"]


def test_applied_changes_are_published_live(sql: sa.Engine, redis_url: str, key_prefix: str) -> None:
    import orjson

    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    ensure_group(client, keys.events, keys.events_group)
    pubsub = client.pubsub()
    pubsub.subscribe(keys.live, keys.live_batches)
    assert [pubsub.get_message(timeout=2)["type"] for _ in range(2)] == ["subscribe", "subscribe"]
    _queued(sql, "r1")
    s = EventStamper("r1", ManualClock())
    for event in (s.run_started("proj", 1, "start", {}), s.step_started("a", "a", "set"),
                  s.run_parked("a", "queue_delay", 1_800_000_060.0)):
        client.xadd(keys.events, {EVENT_FIELD: encode_event(event)})
    projector = Projector(client, keys, sql)
    assert projector.lease.acquire_or_renew()
    projector.step(block_ms=100)
    received = [pubsub.get_message(timeout=2) for _ in range(4)]
    assert [m["channel"].decode() for m in received] == [keys.live] * 3 + [keys.live_batches]
    messages = [orjson.loads(m["data"]) for m in received[:3]]
    # the batch's summary, after its changes: each run's latest change (its sequence and the status it left)
    assert orjson.loads(received[3]["data"]) == [["r1", 3, "waiting"]]
    assert [m["event"] for m in messages] == ["run_started", "step_started", "run_parked"]
    parked = messages[-1]
    assert parked["status"] == "waiting" and parked["flow_id"] == "proj" and parked["version"] == 1
    assert parked["waiting_on"] == {"node": "a", "reason": "queue_delay", "due_at": 1_800_000_060.0}
    assert messages[1]["step_status"] == "running" and messages[1]["seq"] == 2
    pubsub.close()


def test_exactly_one_projector_holds_the_lease(redis_url: str, key_prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    key = Keyspace(key_prefix).projector_lease
    first = ProjectorLease(client, key, "one", seconds=0.3)
    second = ProjectorLease(client, key, "two", seconds=0.3)
    assert first.acquire_or_renew() and not second.acquire_or_renew()
    assert first.acquire_or_renew()  # renewing keeps it
    first.release()
    assert second.acquire_or_renew() and not first.acquire_or_renew()
    time.sleep(0.4)  # the holder stopped renewing: its lease lapses and a standby takes over
    assert first.acquire_or_renew()
    assert client.get(key) == b"one"


def test_applied_events_written_raw_read_back_like_orm_rows(sql: sa.Engine) -> None:
    from engine.runtime.projection import _insert_applied

    now = datetime.now(UTC)
    with sql.begin() as conn:
        _insert_applied(conn, [{"event_id": "raw", "run_id": "r", "seq": 1, "event_type": "x", "applied_at": now,
                                "change": '{"seq": 1}'}])
        conn.execute(sa.insert(AppliedEvent), [{"event_id": "orm", "run_id": "r", "seq": 2, "event_type": "x",
                                                "applied_at": now, "change": '{"seq": 2}'}])
    with sql.connect() as conn:
        typed = dict(conn.execute(sa.select(AppliedEvent.event_id, AppliedEvent.applied_at)).all())
        stored: dict[Any, Any] = dict(conn.exec_driver_sql("SELECT event_id, applied_at FROM applied_events").all())
    assert typed["raw"] == typed["orm"] == now
    assert stored["raw"] == stored["orm"]


def _run_tokens(sql: sa.Engine, run_id: str) -> tuple[Any, ...]:
    with sql.connect() as conn:
        return tuple(conn.execute(sa.select(Run.tokens_in, Run.tokens_out, Run.errors).where(Run.id == run_id)).one())


def _step_tokens(sql: sa.Engine, run_id: str) -> dict[str, tuple[int | None, int | None]]:
    with sql.connect() as conn:
        rows = conn.execute(sa.select(Step.step, Step.tokens_in, Step.tokens_out).where(Step.run_id == run_id))
        return {row.step: (row.tokens_in, row.tokens_out) for row in rows}


def test_run_tokens_are_the_sum_of_its_steps_under_redelivery_and_rerun(sql: sa.Engine) -> None:
    _queued(sql, "rt")
    s = EventStamper("rt", ManualClock(1_800_000_000.0))
    first = [s.run_started("proj", 1, "start", {}), s.step_started("a", "a", "ai.model"),
             s.step_completed("a", "a", ["out"], {"x": "1"}, 1.0, tokens_in=120, tokens_out=30),
             s.step_started("each", "m[0]", "ai.model"),
             s.step_completed("each", "m[0]", ["out"], {}, 1.0, tokens_in=7, tokens_out=2),
             s.step_started("plain", "plain", "set"), s.step_completed("plain", "plain", ["out"], {}, 0.1)]
    apply_batch(sql, _messages(first))
    assert _run_tokens(sql, "rt") == (127, 32, None)
    apply_batch(sql, _messages(first))  # the same batch delivered again
    assert _run_tokens(sql, "rt") == (127, 32, None)
    # A reclaimed job runs `a` again: the same step completes under new event ids, and a later batch adds a step.
    again = [s.step_started("a", "a", "ai.model", 2),
             s.step_completed("a", "a", ["out"], {"x": "1"}, 1.0, 2, tokens_in=120, tokens_out=31),
             s.step_started("each", "m[1]", "ai.model"),
             s.step_completed("each", "m[1]", ["out"], {}, 1.0, tokens_in=5, tokens_out=1),
             s.step_failed("b", "b", "HTTP 503", error_type="http_status", step_attempt=2, continued=True)]
    apply_batch(sql, _messages(again))
    apply_batch(sql, _messages(again))
    assert _step_tokens(sql, "rt") == {"a": (120, 31), "m[0]": (7, 2), "m[1]": (5, 1), "plain": (None, None),
                                       "b": (None, None)}
    assert _run_tokens(sql, "rt") == (132, 34, {"b": {"message": "HTTP 503", "type": "http_status", "attempts": 2}})


def test_a_database_error_leaves_the_batch_pending_and_it_is_applied_once_the_database_is_back(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    services = engine.services
    assert services.sql is not None and services.handles is not None
    client, keys = services.handles.client, services.keys
    caplog.set_level(logging.WARNING, logger="lockgate.projector")
    services.publish_flow(flow_from_data(make_flow("outage", [{"id": "start", "type": "trigger.manual"},
                                                              {"id": "done", "type": "terminal"}],
                                                   [("start", "done")])))
    with services.sql.begin() as conn:  # the projector's bookkeeping table goes away: its batch cannot commit
        conn.exec_driver_sql("ALTER TABLE applied_events RENAME TO applied_events_away")
    run_id = services.create_run("outage").run_id

    def refusals() -> int:
        return sum("database error, batch left pending for retry" in r.getMessage() for r in caplog.records)

    wait_until(lambda: refusals() >= 2, what="the projector to fail its batch and try it again")
    assert services.get_run(run_id, with_steps=False)["status"] == "queued"  # type: ignore[index]
    assert client.xpending(keys.events, keys.events_group)["pending"] > 0  # delivered, not acknowledged
    with services.sql.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE applied_events_away RENAME TO applied_events")
    run = services.wait_for_run(run_id, timeout=10)
    assert run["status"] == "succeeded"
    with services.sql.connect() as conn:
        applied = conn.execute(sa.select(AppliedEvent.seq).where(AppliedEvent.run_id == run_id)).scalars().all()
        last_seq = conn.execute(sa.select(Run.last_seq).where(Run.id == run_id)).scalar_one()
        dead = conn.execute(sa.select(sa.func.count()).select_from(DeadLetter)).scalar_one()
    assert sorted(applied) == list(range(1, last_seq + 1)) and dead == 0  # each event once, none lost
    wait_until(lambda: client.xpending(keys.events, keys.events_group)["pending"] == 0, what="the batch's ack")


def test_an_active_projector_keeps_its_lease_renewed_and_a_standby_never_gets_it(
        redis_url: str, key_prefix: str, sql: sa.Engine) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    projector = Projector(client, keys, sql, holder="active", block_ms=20, lease_seconds=0.5)
    standby = ProjectorLease(client, keys.projector_lease, "standby", seconds=0.5)
    stop = threading.Event()
    thread = threading.Thread(target=projector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: client.get(keys.projector_lease) == b"active", what="the projector to take the lease")
        deadline = time.monotonic() + 2.0  # four lease lifetimes: only renewals keep it
        while time.monotonic() < deadline:
            assert not standby.acquire_or_renew()
            assert client.get(keys.projector_lease) == b"active"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(5)
    assert client.get(keys.projector_lease) is None  # released on stop


def test_a_read_that_reaches_redis_after_the_lease_passed_on_hands_nothing_to_the_former_holder(
        sql: sa.Engine, redis_url: str, key_prefix: str) -> None:
    """A projector cut off from the network while its read is on the way: when the read reaches Redis the lease is
    another's. It must get nothing (else it would apply those entries beside the new holder, out of order), and the
    new holder must get every entry."""
    client, keys = _stream_of_one_run(sql, redis_url, key_prefix)
    s = EventStamper("r1", ManualClock())
    for event in (s.run_started("proj", 1, "start", {}), s.step_started("a", "a", "set"),
                  s.run_parked("a", "queue_delay", 1_800_000_060.0)):
        client.xadd(keys.events, {EVENT_FIELD: encode_event(event)})
    former = Projector(client, keys, sql, holder="former")
    assert former.lease.acquire_or_renew()
    client.set(keys.projector_lease, "successor")
    with pytest.raises(LeaseLost):
        former.step(block_ms=100)
    assert client.xpending(keys.events, keys.events_group)["pending"] == 0  # delivered to nobody
    successor = Projector(client, keys, sql, holder="successor")
    result = successor.step(block_ms=100)
    assert [change.event for change in result.changes] == ["run_started", "step_started", "run_parked"]
    with sql.connect() as conn:
        assert conn.execute(sa.select(Run.status, Run.last_seq).where(Run.id == "r1")).one() == ("waiting", 3)
        assert conn.execute(sa.select(sa.func.count()).select_from(DeadLetter)).scalar() == 0


def test_a_projector_that_finds_the_lease_another_s_stands_by_and_reads_nothing_more(
        sql: sa.Engine, redis_url: str, key_prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    projector = Projector(client, keys, sql, holder="former", block_ms=20, lease_seconds=30)
    stop = threading.Event()
    thread = threading.Thread(target=projector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: projector.active, what="the projector to take the lease")
        client.set(keys.projector_lease, "successor")  # as a standby would once this holder's lease lapsed
        _queued(sql, "r1")
        client.xadd(keys.events, {EVENT_FIELD: encode_event(
            EventStamper("r1", ManualClock()).run_started("proj", 1, "start", {}))})
        wait_until(lambda: not projector.active, what="the former holder to stand by")
        time.sleep(0.2)
        assert client.xpending(keys.events, keys.events_group)["pending"] == 0
        assert client.xlen(keys.events) == 1
    finally:
        stop.set()
        thread.join(5)
    assert client.get(keys.projector_lease) == b"successor"  # a standby releases nothing it does not hold


def test_an_idle_projector_wakes_for_an_entry_that_arrives_while_it_waits(
        sql: sa.Engine, redis_url: str, key_prefix: str) -> None:
    client, keys = _stream_of_one_run(sql, redis_url, key_prefix)
    projector = Projector(client, keys, sql)
    assert projector.lease.acquire_or_renew()
    assert projector.step(block_ms=10).applied == 0
    event = EventStamper("r1", ManualClock()).run_started("proj", 1, "start", {})
    timer = threading.Timer(0.3, lambda: client.xadd(keys.events, {EVENT_FIELD: encode_event(event)}))
    timer.start()
    try:
        result = projector.step(block_ms=20_000)
    finally:
        timer.join()
    assert [change.event for change in result.changes] == ["run_started"]


def test_the_wait_after_a_batch_follows_the_time_it_took_up_to_the_interval() -> None:
    assert linger(0.001, interval=0.01, ratio=1.0) == pytest.approx(0.001)
    assert linger(0.004, interval=0.01, ratio=2.0) == pytest.approx(0.006)
    assert linger(0.003, interval=0.01, ratio=1.0) == pytest.approx(0.003)
    assert linger(0.007, interval=0.01, ratio=1.0) == pytest.approx(0.003)
    assert linger(0.02, interval=0.01, ratio=1.0) == 0.0


def test_a_quick_batch_lets_the_next_events_through_within_milliseconds(
        sql: sa.Engine, redis_url: str, key_prefix: str) -> None:
    """One run's events in two flushes a few milliseconds apart: the second is applied without waiting out
    the batch interval that followed the first (a sync wait's answer hangs on it)."""
    client, keys = _stream_of_one_run(sql, redis_url, key_prefix)
    applied: list[float] = []
    projector = Projector(client, keys, sql, block_ms=50, batch_interval=0.5,
                          on_batch=lambda result: applied.append(time.monotonic()) if result.applied else None)
    stop = threading.Event()
    thread = threading.Thread(target=projector.run, args=(stop,), daemon=True)
    thread.start()
    try:
        stamper = EventStamper("r1", ManualClock())
        emitter = RedisEmitter(client, keys.events)
        emitter.emit(stamper.run_started("proj", 1, "start", {}))
        emitter.flush()
        wait_until(lambda: len(applied) == 1, timeout=5)
        time.sleep(0.005)
        sent = time.monotonic()
        emitter.emit(stamper.run_succeeded(None))
        emitter.flush()
        wait_until(lambda: len(applied) == 2, timeout=5)
        assert applied[1] - sent < 0.25, "the second flush waited out the 0.5 s interval"
    finally:
        stop.set()
        thread.join(5)


def test_a_batch_summary_names_each_run_once_as_its_latest_change_left_it() -> None:
    def change(run_id: str, seq: int, status: str) -> LiveChange:
        return LiveChange(run_id=run_id, flow_id="f", version=1, status=status, seq=seq, event="e")

    changes = [change("a", 1, "running"), change("b", 4, "running"), change("a", 2, "waiting"),
               change("b", 5, "succeeded"), change("a", 3, "running"), change("c", 1, "running")]
    assert batch_summary(changes) == [("a", 3, "running"), ("b", 5, "succeeded"), ("c", 1, "running")]
    # told twice or out of order (the live channel and this process's projector both tell), the later sequence wins
    assert batch_summary([change("a", 2, "succeeded"), change("a", 1, "running")]) == [("a", 2, "succeeded")]
    assert batch_summary([]) == []
