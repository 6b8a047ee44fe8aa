"""The reaper against a real Redis and SQLite: abandoned job messages are redelivered up to the retry cap, then
dead-lettered and their run interrupted; a live worker's long job is left alone; stale attempts are fenced."""

from __future__ import annotations

from typing import Any

import redis

from engine.clock import ManualClock
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.fencing import CommandRecorder, FencedWriter, JobFence
from engine.runtime.jobs import ATTEMPT_FIELD, ORIGIN_FIELD
from engine.runtime.reaper import Reaper
from engine.runtime.reclaim import Reclaimer, RecoveryThresholds
from engine.runtime.watchdog import Watchdog
from engine.transport.keys import Keyspace
from tests.engine.conftest import make_flow
from tests.recovery.conftest import HoldingSite, wait_until

T = {"id": "start", "type": "trigger.manual"}
DONE = {"id": "done", "type": "terminal", "config": {"output": "ok"}}


def _read_as_dead_consumer(client: redis.Redis, keys: Keyspace) -> tuple[bytes, dict[bytes, bytes]]:
    """Take one job message as a consumer that then dies (never acknowledges it)."""
    def read() -> Any:
        reply: Any = client.xreadgroup(keys.jobs_group, "dead-consumer", {keys.jobs: ">"}, count=1, block=50)
        return reply[0][1][0] if reply else None

    return wait_until(read, timeout=10, what="a job message")  # type: ignore[no-any-return,unused-ignore]


def test_a_job_lost_past_the_retry_cap_is_dead_lettered_and_its_run_interrupted(recovery_config: EngineConfig) -> None:
    thresholds = RecoveryThresholds(heartbeat_timeout=5.0, idle_timeout=0.3, retry_cap=1, tick=0.05)
    with EngineServices(recovery_config, workers=0, scheduler=False, block_ms=100, recovery=thresholds) as engine:
        engine.publish_flow(flow_from_data(make_flow("lost", [T, DONE], [("start", "done")])))
        run_id = engine.create_run("lost", {}).run_id
        client, keys = engine.require_handles().client, engine.keys

        first_id, first = _read_as_dead_consumer(client, keys)
        assert ATTEMPT_FIELD not in first
        _second_id, second = _read_as_dead_consumer(client, keys)  # the reaper's redelivery
        assert second[ATTEMPT_FIELD] == b"2" and second[ORIGIN_FIELD] == first_id
        assert second[b"j"] == first[b"j"]

        run = engine.wait_for_run(run_id, timeout=10)
        assert run["status"] == "interrupted" and run["error_type"] == "interrupted"
        assert "retry cap 1" in run["error"] and keys.jobs_dead in run["error"]
        dead: Any = client.xrange(keys.jobs_dead)
        assert len(dead) == 1
        assert dead[0][1][b"j"] == first[b"j"] and dead[0][1][ORIGIN_FIELD] == first_id
        assert client.xpending(keys.jobs, keys.jobs_group)["pending"] == 0
        assert client.xlen(keys.jobs) == 0
        assert int(client.get(keys.job_attempt(first_id.decode())) or 0) == 3  # any zombie of attempt 1 or 2 is fenced


def test_a_live_worker_holding_a_long_step_keeps_its_job(recovery_config: EngineConfig,
                                                        holding_site: HoldingSite) -> None:
    """The reaper and watchdog passes are made here, each once the worker's heartbeat has just refreshed the job:
    so the test sees a job older than every threshold kept, whatever a loaded machine does to the heartbeat."""
    clock = ManualClock()
    thresholds = RecoveryThresholds(heartbeat_timeout=1.0, idle_timeout=1.0, retry_cap=2, tick=0.05)
    with EngineServices(recovery_config, clock=clock, workers=1, scheduler=False, block_ms=100, reaper=False,
                        heartbeat_seconds=0.1) as engine:
        assert engine.sql is not None and engine.handles is not None
        client, keys = engine.handles.client, engine.keys
        reclaimer = Reclaimer(client, keys, engine.sql, clock, thresholds)
        reaper, watchdog = Reaper(reclaimer), Watchdog(reclaimer)
        doc = make_flow("long", [T, {"id": "call", "type": "http.request",
                                     "config": {"method": "POST", "url": holding_site.url + "/hold"}}, DONE],
                        [("start", "call"), ("call", "done")])
        engine.publish_flow(flow_from_data(doc))
        run_id = engine.create_run("long", {}).run_id
        wait_until(lambda: holding_site.count("/hold") == 1, what="the step to start")
        [pending] = client.xpending_range(keys.jobs, keys.jobs_group, "-", "+", 10)
        job_id = pending["message_id"]
        born_ms = int(job_id.decode().split("-")[0])

        def just_refreshed(older_than: float) -> bool:
            """The job is older than `older_than` seconds (Redis's clock) and its idle time was reset a moment ago."""
            seconds, micros = client.time()
            entries = client.xpending_range(keys.jobs, keys.jobs_group, job_id, job_id, 1)
            assert len(entries) == 1, "the job left the pending list before the step was released"
            [entry] = entries
            return bool(seconds * 1000 + micros // 1000 - born_ms > older_than * 1000 and
                        entry["time_since_delivered"] < 200)

        for older_than in (2.0, 3.0):  # two and three idle thresholds
            wait_until(lambda older_than=older_than: just_refreshed(older_than), what="a heartbeat refresh")
            assert reaper.tick() == []
        clock.advance(10 * thresholds.heartbeat_timeout)
        wait_until(lambda: float(client.hget(keys.heartbeats, job_id) or 0) >= clock.now(),
                   what="a heartbeat at the advanced time")
        assert watchdog.stale_jobs() == {} and watchdog.tick() == []
        holding_site.release.set()
        run = engine.wait_for_run(run_id, timeout=15)
        assert run["status"] == "succeeded", run
        assert holding_site.count("/hold") == 1
        assert client.xlen(keys.jobs_dead) == 0
        assert not list(client.scan_iter(match=f"{keys.prefix}:job:*"))  # never reclaimed


def test_a_write_of_a_stale_attempt_is_refused_whole(redis_url: str, key_prefix: str) -> None:
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    keys = Keyspace(key_prefix)
    writer = FencedWriter(client, keys)

    def write(attempt: int, marker: str) -> Any:
        recorder = CommandRecorder()
        recorder.xadd(keys.events, {EVENT_FIELD: marker})
        recorder.set(keys.run_progress("r1", "1-0"), marker)
        return writer.write(JobFence("1-0", attempt), recorder)

    assert write(1, "first") == 1  # no attempt key yet: attempt 1 is current
    client.set(keys.job_attempt("1-0"), 2)
    assert write(1, "zombie") == 0
    assert client.get(keys.run_progress("r1", "1-0")) == b"first"
    events: Any = client.xrange(keys.events)
    assert [fields[EVENT_FIELD] for _id, fields in events] == [b"first"]
    assert write(2, "second") == 1
    assert client.get(keys.run_progress("r1", "1-0")) == b"second"


def test_consumers_long_gone_with_nothing_pending_leave_the_group(redis_url: str, key_prefix: str, sqlite_url: str,
                                                                  monkeypatch: Any) -> None:
    import sqlalchemy as sa

    from engine.clock import SystemClock
    from engine.runtime import reaper as reaper_module
    from engine.runtime.reclaim import Reclaimer
    from engine.transport.streams import ensure_group

    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    keys = Keyspace(key_prefix)
    ensure_group(client, keys.jobs, keys.jobs_group)
    done_id = client.xadd(keys.jobs, {"j": b"{}"})
    client.xreadgroup(keys.jobs_group, "gone", {keys.jobs: ">"}, count=1)
    client.xack(keys.jobs, keys.jobs_group, done_id)  # finished its job, then its process went away
    client.xadd(keys.jobs, {"j": b"{}"})
    client.xreadgroup(keys.jobs_group, "holding", {keys.jobs: ">"}, count=1)
    reaper = reaper_module.Reaper(Reclaimer(client, keys, sa.create_engine(sqlite_url), SystemClock(),
                                            RecoveryThresholds(idle_timeout=60)))
    assert reaper.forget_idle_consumers() == []  # both read just now
    monkeypatch.setattr(reaper_module, "FORGET_CONSUMER_AFTER_SECONDS", 0.2)
    wait_until(lambda: reaper.forget_idle_consumers() == ["gone"], timeout=30, what="the idle consumer to go")
    consumers: Any = client.xinfo_consumers(keys.jobs, keys.jobs_group)
    assert [c["name"] for c in consumers] == [b"holding"]  # its pending message keeps it


def test_redeliveries_after_a_redis_outage_do_not_count_against_the_retry_cap(redis_url: str, key_prefix: str,
                                                                             sqlite_url: str) -> None:
    import sqlalchemy as sa

    from engine.runtime.jobs import encode_job, start_job
    from engine.runtime.reclaim import RECLAIMER_CONSUMER
    from engine.store.db import init_db
    from engine.transport.streams import ensure_group

    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    keys = Keyspace(key_prefix)
    ensure_group(client, keys.jobs, keys.jobs_group)
    sql = sa.create_engine(sqlite_url)
    init_db(sql)
    reclaimer = Reclaimer(client, keys, sql, ManualClock(), RecoveryThresholds(retry_cap=1))
    client.xadd(keys.jobs, encode_job(start_job("r1", "f", 1, "start", {}, False)))

    def lose(counted: bool) -> str:
        reply: Any = client.xreadgroup(keys.jobs_group, RECLAIMER_CONSUMER, {keys.jobs: ">"}, count=1)
        [(_stream, [(message_id, fields)])] = reply
        return reclaimer.reclaim(message_id, fields, "test", counted=counted).outcome

    assert [lose(counted=False) for _ in range(5)] == ["redelivered"] * 5  # five outages: never dead
    assert lose(counted=True) == "redelivered"  # the first real loss is within the cap of 1
    assert lose(counted=True) == "dead"  # the second is past it, whatever the attempt number says
    assert client.xlen(keys.jobs_dead) == 1
