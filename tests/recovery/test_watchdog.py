"""The watchdog compares heartbeats with the injected clock, and reclaims only jobs whose worker stayed silent."""

from __future__ import annotations

import sqlalchemy as sa
from redis import Redis

from engine.clock import ManualClock
from engine.runtime.reclaim import Reclaimer, RecoveryThresholds
from engine.runtime.watchdog import Watchdog
from engine.transport.keys import Keyspace
from engine.transport.streams import ensure_group


def test_a_heartbeat_is_stale_only_past_the_threshold_by_the_injected_clock(redis_url: str, key_prefix: str,
                                                                             sqlite_url: str) -> None:
    client = Redis.from_url(redis_url, socket_timeout=5)
    keys = Keyspace(key_prefix)
    clock = ManualClock()
    sql = sa.create_engine(sqlite_url)
    watchdog = Watchdog(Reclaimer(client, keys, sql, clock, RecoveryThresholds(heartbeat_timeout=15.0)))
    client.hset(keys.heartbeats, mapping={"fresh": clock.now(), "old": clock.now() - 10})
    assert watchdog.stale_jobs() == {}
    clock.advance(6)
    assert watchdog.stale_jobs() == {"old": 16.0}
    clock.advance(10)
    assert set(watchdog.stale_jobs()) == {"fresh", "old"}


def test_a_stale_heartbeat_without_a_running_job_is_cleared_and_nothing_is_claimed(
        redis_url: str, key_prefix: str, sqlite_url: str) -> None:
    client = Redis.from_url(redis_url, socket_timeout=5)
    keys = Keyspace(key_prefix)
    ensure_group(client, keys.jobs, keys.jobs_group)
    clock = ManualClock()
    watchdog = Watchdog(Reclaimer(client, keys, sa.create_engine(sqlite_url), clock,
                                  RecoveryThresholds(heartbeat_timeout=1.0)))
    client.hset(keys.heartbeats, "ended", clock.now())
    clock.advance(5)
    assert watchdog.tick() == []
    assert not client.hexists(keys.heartbeats, "ended")
    assert client.xlen(keys.jobs) == 0
