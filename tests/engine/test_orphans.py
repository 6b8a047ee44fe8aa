"""The orphan sweep: a run that sits `queued` with no job message anywhere ends `failed` (`orphaned_run`) through an
event the projector applies; runs whose job is still waiting or held by a consumer are left alone."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa

from engine.clock import ManualClock
from engine.events import ExternalStamper, encode_event
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.jobs import decode_job
from engine.runtime.orphans import ORPHAN_GRACE_SECONDS, OrphanSweep
from engine.store.models import Run
from tests.engine.conftest import make_flow, start_engine, wait_until

T = {"id": "start", "type": "trigger.manual"}
FLOW = make_flow("plain", [T, {"id": "done", "type": "terminal"}], [("start", "done")])


def _status(services: EngineServices, run_id: str) -> str:
    run = services.get_run(run_id, with_steps=False)
    assert run is not None
    return str(run["status"])


def _message_of(services: EngineServices, run_id: str) -> bytes:
    handles = services.handles
    assert handles is not None
    entries: Any = handles.client.xrange(handles.keys.jobs)
    return next(mid for mid, fields in entries if decode_job(fields).run_id == run_id)


def _row_without_job(services: EngineServices, clock: ManualClock) -> str:
    """The run row a create_run leaves when its process dies between the insert and the enqueue."""
    assert services.sql is not None
    now = datetime.fromtimestamp(clock.now(), UTC)
    with services.sql.begin() as conn:
        conn.execute(sa.insert(cast(sa.Table, Run.__table__)).values(
            id="crashed-before-enqueue", flow_id="plain", version=1, status="queued", trigger="start", inputs={},
            state={}, cost_micros=0, last_seq=0, created_at=now, updated_at=now))
    return "crashed-before-enqueue"


def test_only_queued_runs_without_a_job_anywhere_are_failed(tmp_path: Path, redis_url: str, db_url: str,
                                                             key_prefix: str) -> None:
    clock = ManualClock()
    # No workers: jobs stay where the test puts them. No reaper: the test runs the sweep's passes itself.
    services, _ = start_engine(tmp_path, redis_url, db_url, key_prefix, clock=clock, workers=0, reaper=False)
    try:
        handles = services.handles
        assert handles is not None
        services.publish_flow(flow_from_data(FLOW))
        held = services.create_run("plain").run_id
        # A consumer took this job and has not acknowledged it: pending, which the reaper owns.
        handles.client.xreadgroup(handles.keys.jobs_group, "busy-worker", {handles.keys.jobs: ">"}, count=1)
        waiting = services.create_run("plain").run_id
        lost = services.create_run("plain").run_id
        handles.client.xdel(handles.keys.jobs, _message_of(services, lost))
        crashed = _row_without_job(services, clock)

        sweep = OrphanSweep(handles.client, handles.keys, handles.sql, clock)
        assert sweep.tick() == []  # younger than the grace period: a create_run may still be enqueueing
        clock.advance(ORPHAN_GRACE_SECONDS + 1)
        assert sorted(sweep.tick()) == sorted([lost, crashed])
        for run_id in (lost, crashed):
            wait_until(lambda run_id=run_id: _status(services, run_id) == "failed", what=f"{run_id} failed")  # type: ignore[misc]
            run = services.get_run(run_id, with_steps=False)
            assert run is not None and run["error_type"] == "orphaned_run"
            assert "no job" in run["error"] and "start it again" in run["error"]
        assert _status(services, held) == "queued" and _status(services, waiting) == "queued"
        assert sweep.tick() == []
    finally:
        services.stop()


def test_the_engine_sweeps_orphans_by_itself(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> None:
    clock = ManualClock()
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock, workers=0)
    try:
        services.publish_flow(flow_from_data(FLOW))
        crashed = _row_without_job(services, clock)
        clock.advance(ORPHAN_GRACE_SECONDS + 1)
        wait_until(lambda: _status(services, crashed) == "failed", timeout=20, what="the sweep to fail the orphan")
    finally:
        services.stop()


def test_a_run_redis_shows_parked_is_no_orphan_while_sql_still_says_queued(tmp_path: Path, redis_url: str,
                                                                            sqlite_url: str, key_prefix: str) -> None:
    """The projector lags under load: the row still says queued after the run's first job parked it (checkpoint and
    due entry written, job acknowledged and deleted). Found in the multi-host benchmark, where such a run was failed."""
    clock = ManualClock()
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock, workers=0, reaper=False)
    try:
        handles = services.handles
        assert handles is not None
        services.publish_flow(flow_from_data(FLOW))
        parked = _row_without_job(services, clock)
        handles.client.set(handles.keys.run_checkpoint(parked), b'{"parked_node": "wait"}')
        handles.client.zadd(handles.keys.due, {parked: clock.now() + 3600})
        clock.advance(ORPHAN_GRACE_SECONDS + 1)
        sweep = OrphanSweep(handles.client, handles.keys, handles.sql, clock)
        assert sweep.tick() == []
        handles.client.delete(handles.keys.run_checkpoint(parked))
        assert sweep.tick() == []  # the due entry alone says it will wake
        handles.client.zrem(handles.keys.due, parked)
        assert sweep.tick() == [parked]  # neither: an orphan after all
    finally:
        services.stop()


def test_a_run_whose_events_wait_for_the_projector_is_no_orphan(tmp_path: Path, redis_url: str, sqlite_url: str,
                                                                key_prefix: str) -> None:
    """A projector failing over (or cut off its database) applies nothing for a while: runs that ran to their end
    still say queued in SQL, their job long deleted. Their unapplied events say they are alive."""
    clock = ManualClock()
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock, workers=0, reaper=False,
                               projector=False)
    try:
        handles = services.handles
        assert handles is not None
        services.publish_flow(flow_from_data(FLOW))
        ended = _row_without_job(services, clock)
        # The run's end, on the events stream and not yet applied by any projector.
        event = ExternalStamper(ended, clock, 0).run_failed("ended elsewhere", "step_failed")
        handles.client.xadd(handles.keys.events, {EVENT_FIELD: encode_event(event)})
        clock.advance(ORPHAN_GRACE_SECONDS + 1)
        sweep = OrphanSweep(handles.client, handles.keys, handles.sql, clock)
        assert sweep.tick() == []
        # Once a projector has read and acknowledged the stream, the row is trusted again.
        read: Any = handles.client.xreadgroup(handles.keys.events_group, "projector", {handles.keys.events: ">"})
        for _stream, entries in read:
            for message_id, _fields in entries:
                handles.client.xack(handles.keys.events, handles.keys.events_group, message_id)
        assert sweep.tick() == [ended]
    finally:
        services.stop()
