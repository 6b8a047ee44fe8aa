"""Waking a parent whose child ended before the parent's park was written: the write that seals the park sees
the child's end mark in the same atomic step and enqueues the resume itself, so the parent goes on at once
instead of waiting for its suspended-step limit. And the recorded conditional write on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from engine.runtime import crashpoints
from engine.runtime.fencing import CommandRecorder, FencedWriter, JobFence
from engine.runtime.jobs import decode_job
from engine.runtime.worker import PlanCache, Worker
from engine.transport.keys import Keyspace
from tests.catalog_flow_call.flows import child_flow, parent_flow
from tests.engine.conftest import start_engine, wait_until


def test_a_conditional_xadd_runs_only_when_its_key_exists(redis_url: str, key_prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    writer = FencedWriter(client, keys)
    stream = f"{key_prefix}:test:stream"
    mark = f"{key_prefix}:test:mark"
    recorder = CommandRecorder()
    recorder.set(f"{key_prefix}:test:before", "1")
    recorder.xadd_if_exists(mark, stream, {"job": "first"})
    assert writer.write(JobFence("origin-1", 1), recorder) == 1
    assert client.get(f"{key_prefix}:test:before") == b"1"
    assert client.xlen(stream) == 0
    client.set(mark, "1")
    assert writer.write(JobFence("origin-1", 1), recorder) == 1
    assert [fields for _id, fields in client.xrange(stream)] == [{b"job": b"first"}]


def _read_one(client: redis.Redis, keys: Keyspace, consumer: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    reply: Any = client.xreadgroup(keys.jobs_group, consumer, {keys.jobs: ">"}, count=1, block=2000)
    return [entry for _stream, entries in reply for entry in entries]


def test_a_child_that_ends_before_its_parent_parks_wakes_the_parent(tmp_path: Path, redis_url: str, sqlite_url: str,
                                                                    key_prefix: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    services, _sleeps = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=0)
    try:
        from engine.flow import flow_from_data

        services.publish_flow(flow_from_data(child_flow()))
        services.publish_flow(flow_from_data(parent_flow()))
        api = services.require_handles()
        client, keys = api.client, api.keys
        plans = PlanCache(api.sql)
        parent_worker = Worker(client, keys, plans, services.clock, "manual-parent", box=services.box)
        child_worker = Worker(client, keys, plans, services.clock, "manual-child", box=services.box)
        parent_id = services.create_run("parent", {"n": 2}).run_id
        ended_first: list[str] = []
        real_reached = crashpoints.reached

        def child_runs_first(point: str) -> None:
            # At the end of the parent's batch, before its park is written: run the child to its end and wait
            # until the waker has marked it ended (it finds no parked parent to resume yet).
            if point == "worker.before_ack" and not ended_first:
                run = services.get_run(parent_id)
                assert run is not None
                [child_id] = run["child_run_ids"] or [None]
                ended_first.append(str(child_id))
                assert child_worker.handle_batch(_read_one(client, keys, "manual-child")) == ["succeeded"]
                wait_until(lambda: client.exists(keys.run_ended(str(child_id))), what="the child's end mark")
                assert client.get(keys.run_checkpoint(parent_id)) is None
            real_reached(point)

        monkeypatch.setattr(crashpoints, "reached", child_runs_first)
        assert parent_worker.handle_batch(_read_one(client, keys, "manual-parent")) == ["parked"]
        monkeypatch.setattr(crashpoints, "reached", real_reached)
        assert ended_first
        [(_message_id, fields)] = client.xrange(keys.jobs)
        resume = decode_job(fields)
        assert resume.action == "resume" and resume.run_id == parent_id and resume.park.startswith("call#")
        assert parent_worker.handle_batch(_read_one(client, keys, "manual-parent")) == ["succeeded"]
        run = services.wait_for_run(parent_id)
        assert run["status"] == "succeeded"
        assert run["result"] == {"doubled": 6}
        assert run["child_run_ids"] == ended_first
    finally:
        services.stop()


def test_a_parent_whose_childs_end_was_never_handled_is_woken_at_start(tmp_path: Path, redis_url: str,
                                                                       sqlite_url: str, key_prefix: str) -> None:
    """The process applying the child's end died before its waker ran: the next start's sweep wakes the parent."""
    import threading

    from engine.flow import flow_from_data
    from engine.runtime.projector import Projector

    first, _sleeps = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, projector=False)
    api = first.require_handles()
    bare = Projector(api.client, api.keys, api.sql, block_ms=50)  # applies events, wakes nobody
    stop = threading.Event()
    thread = threading.Thread(target=bare.run, args=(stop,), daemon=True)
    thread.start()
    try:
        first.publish_flow(flow_from_data(child_flow()))
        first.publish_flow(flow_from_data(parent_flow()))
        parent_id = first.create_run("parent", {"n": 5}).run_id
        waiting = wait_until(lambda: (r := first.get_run(parent_id)) and r["status"] == "waiting" and r,
                             what="the parent parked")
        [child_id] = waiting["child_run_ids"]
        assert first.wait_for_run(child_id)["status"] == "succeeded"
        assert api.client.get(api.keys.run_ended(child_id)) is None
        assert first.get_run(parent_id, with_steps=False)["status"] == "waiting"  # type: ignore[index]
    finally:
        stop.set()
        thread.join(5)
        first.stop()
    second, _sleeps = start_engine(tmp_path, redis_url, sqlite_url, key_prefix)
    try:
        run = second.wait_for_run(parent_id)
        assert run["status"] == "succeeded" and run["result"] == {"doubled": 12}
    finally:
        second.stop()
