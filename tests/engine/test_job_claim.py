"""Claiming a worker's next jobs in the round trip of its last batch's writes (`engine.runtime.claim`).

A claimed job is marked exactly as a read one is (heartbeat, running entry), its cancel flag decides whether
it runs, and a job the claim cannot read is dead-lettered with its marks taken back. A real worker on real
Redis and SQL; the projector applies the events."""

from __future__ import annotations

from pathlib import Path

import orjson

from engine.clock import ManualClock
from engine.flow import flow_from_data
from engine.runtime.claim import UNMARKED, claimed, queue_claim
from engine.runtime.worker import PlanCache, Worker
from engine.transport.streams import ensure_group
from tests.engine.conftest import make_flow, start_engine

START = 1_800_000_000.0


def test_claimed_jobs_are_marked_run_dropped_and_dead_lettered_like_read_ones(
        tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> None:
    clock = ManualClock(START)
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock, workers=0)
    try:
        services.publish_flow(flow_from_data(make_flow("quick", [
            {"id": "start", "type": "trigger.manual"},
            {"id": "done", "type": "terminal", "config": {"output": "ok"}},
        ], [("start", "done")])))
        assert services.sql is not None and services.redis is not None
        keys = services.keys
        client = services.redis.client()
        worker = Worker(client, keys, PlanCache(services.sql), clock, "claim-test", box=services.box)
        ensure_group(client, keys.jobs, keys.jobs_group)
        first = services.create_run("quick").run_id
        kept = services.create_run("quick").run_id
        cancelled = services.create_run("quick").run_id
        client.set(keys.run_cancel(cancelled), "test")
        client.xadd(keys.jobs, {b"j": b"not a job"})

        pipe = client.pipeline(transaction=False)
        queue_claim(pipe, keys, worker.name, 1, clock.now())
        one = claimed(pipe.execute()[0])
        assert len(one.entries) == 1 and one.flags == [0]
        origin = one.entries[0][0]
        running = orjson.loads(client.hget(keys.running_jobs, origin) or b"null")
        assert running == {"message": origin.decode(), "run": first, "attempt": 1, "worker": "claim-test"}
        assert float(client.hget(keys.heartbeats, origin) or 0) == START

        outcomes, rest = worker._handle(one.entries, 1, one.flags, claim_next=True)
        assert outcomes == ["succeeded"]
        assert rest.flags == [0, 1, UNMARKED]
        outcomes, after = worker._handle(rest.entries, 1, rest.flags, claim_next=True)
        assert outcomes == ["succeeded", "dropped", "bad_job"]
        assert after.entries == []
        assert client.hlen(keys.heartbeats) == 0 and client.hlen(keys.running_jobs) == 0
        assert client.xpending(keys.jobs, keys.jobs_group)["pending"] == 0
        assert client.xlen(keys.jobs_dead) == 1
        for run_id in (first, kept):
            assert services.wait_for_run(run_id, timeout=30)["status"] == "succeeded"
    finally:
        services.stop()
