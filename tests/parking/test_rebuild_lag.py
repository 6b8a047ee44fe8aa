"""The due set's rebuild at engine start, for waiting runs whose checkpoint is gone: a run that cannot resume is
reported, one that resumed while SQL lags behind the events stream is not."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
import redis
import sqlalchemy as sa

from engine.clock import ManualClock
from engine.events import EventStamper, encode_event
from engine.flow import flow_from_data
from engine.parking.rebuild import rebuild_due_set
from engine.publish import publish
from engine.runtime.emitter import EVENT_FIELD
from engine.store.db import init_db, make_engine
from engine.store.models import Run
from engine.transport.keys import Keyspace
from engine.transport.streams import ensure_group
from tests.engine.conftest import make_flow


def test_a_waiting_run_without_checkpoint_is_reported_unless_its_newer_events_await_the_projector(
        sqlite_url: str, redis_url: str, key_prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    sql = make_engine(sqlite_url)
    init_db(sql)
    publish(sql, flow_from_data(make_flow("lag", [{"id": "start", "type": "trigger.manual"},
                                                  {"id": "hold", "type": "queue", "config": {"delay": "1m"}},
                                                  {"id": "done", "type": "terminal"}],
                                          [("start", "hold"), ("hold", "done")])))
    now = datetime.now(UTC)
    with sql.begin() as conn:
        for run_id in ("lost", "lagging"):
            conn.execute(sa.insert(Run).values(id=run_id, flow_id="lag", version=1, status="waiting", trigger="start",
                                               inputs={}, state={}, cost_micros=0, last_seq=3, created_at=now,
                                               updated_at=now, waiting_on={"node": "hold", "reason": "queue_delay"}))
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    ensure_group(client, keys.events, keys.events_group)
    # "lagging" resumed (its checkpoint went with that); the projector has not applied that yet
    client.xadd(keys.events, {EVENT_FIELD: encode_event(EventStamper("lagging", ManualClock()).run_resumed("hold"))})
    with caplog.at_level(logging.INFO, logger="lockgate.parking"):
        assert rebuild_due_set(sql, client, keys) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "run lost is waiting but has no checkpoint" in warnings[0]
    assert any("run lagging: SQL still says waiting" in r.getMessage() for r in caplog.records
               if r.levelno == logging.INFO)
    sql.dispose()
