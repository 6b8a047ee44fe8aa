"""The sync wait of `POST /api/v1/runs` wakes on the projector's live channel, also when the projector runs in
another engine process: the waiting request reads the store once per wake, never on a polling beat."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import sqlalchemy as sa

from engine.api.run_watch import RunWatch
from engine.api.server import ApiServer
from engine.approvals.keys import create_key
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.projection import BatchResult, LiveChange
from engine.store.models import AppliedEvent
from tests.api.conftest import HELLO
from tests.engine.conftest import start_engine, wait_until


def test_a_waiting_request_is_woken_by_a_projector_in_another_process(tmp_path: Path, redis_url: str,
                                                                       sqlite_url: str, key_prefix: str) -> None:
    front, _ = start_engine(tmp_path / "front", redis_url, sqlite_url, key_prefix, workers=0, projector=False,
                            scheduler=False)
    backs: list[EngineServices] = []
    server = ApiServer(front, "127.0.0.1", 0).start()
    try:
        assert front.sql is not None
        front.publish_flow(flow_from_data(HELLO))
        key = create_key(front.sql, "tests")
        reads: list[str] = []

        def count(statement: str) -> None:
            if "FROM runs" in statement and threading.current_thread().name != "MainThread":
                reads.append(statement)

        # Counted by the driver, so that reads sent straight to it (`engine.store.driver_reads`) count too: every
        # connection the pool opens from now on traces its statements.
        sa.event.listen(front.sql, "connect", lambda connection, _record: connection.set_trace_callback(count))
        front.sql.pool.dispose()
        answer: list[httpx.Response] = []

        def post() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                answer.append(http.post("/api/v1/runs", headers={"Authorization": f"Bearer {key}"},
                                        json={"flow_id": "hello", "inputs": {"name": "Ada"}, "wait": 60}))

        caller = threading.Thread(target=post)
        caller.start()
        watch = server.watch
        assert watch is not None
        # Subscribed: the request sleeps until woken.
        wait_until(lambda: watch.waiting == 1 and watch.poll_seconds is None, what="the request to wait on its run")
        waiting_reads = len(reads)
        # Only now do a projector and then a worker exist, in other engine processes' services; starting them takes
        # many polling beats, and the run does not change until the worker is there.
        projector, _ = start_engine(tmp_path / "projector", redis_url, sqlite_url, key_prefix, workers=0,
                                    scheduler=False)
        backs.append(projector)
        wait_until(lambda: projector.projector is not None and projector.projector.active, what="the projector")
        backs.append(start_engine(tmp_path / "worker", redis_url, sqlite_url, key_prefix, workers=1, projector=False,
                                  scheduler=False)[0])
        caller.join(60)
        [response] = answer
        assert response.status_code == 201 and response.json()["result"] == "Hello, Ada!"
        with front.sql.connect() as conn:
            changes = conn.execute(sa.select(sa.func.count()).select_from(AppliedEvent)
                                   .where(AppliedEvent.run_id == response.json()["run_id"])).scalar_one()
        woken_reads = len(reads) - waiting_reads
        assert 1 <= woken_reads <= changes + 2, (woken_reads, changes)  # one read per wake, and the full answer
    finally:
        server.stop()
        for services in backs:
            services.stop()
        front.stop()


def test_a_watch_without_the_channel_polls_and_one_that_lost_it_falls_back(redis_url: str, key_prefix: str) -> None:
    import redis

    assert RunWatch().poll_seconds == 0.05
    client = redis.Redis.from_url(redis_url)
    watch = RunWatch(client, f"{key_prefix}:live-test")
    with watch.watching("r1") as changed:
        assert watch.poll_seconds is None
        client.publish(f"{key_prefix}:live-test", b'[["r2", 1, "running"]]')
        client.publish(f"{key_prefix}:live-test", b'not json')
        client.publish(f"{key_prefix}:live-test", b'[{"run_id": "r1"}, ["r1"], ["r1", 2, "succeeded"]]')
        assert changed.wait(10)
    watch.close()
    assert watch.poll_seconds == 0.05
    client.close()


def _change(run_id: str, seq: int, status: str) -> LiveChange:
    return LiveChange(run_id=run_id, flow_id="hello", version=1, status=status, seq=seq, event="e")


def test_a_waiter_wakes_only_for_its_statuses_and_at_once_for_an_end_heard_before_it_came() -> None:
    watch = RunWatch()
    with watch.watching("r1", frozenset({"succeeded"})) as changed:
        watch.on_batch(BatchResult(changes=[_change("r1", 1, "running")]))
        assert not changed.is_set()
        watch.on_batch(BatchResult(changes=[_change("r1", 3, "succeeded")]))
        assert changed.is_set()
    watch.on_batch(BatchResult(changes=[_change("r1", 2, "running")]))  # told again, late: the end stands
    with watch.watching("r1", frozenset({"succeeded"})) as changed:
        assert changed.is_set()
    with watch.watching("r2", frozenset({"succeeded"})) as changed:
        assert not changed.is_set()
    assert watch.live_since() is None  # no channel: a caller reads the store before it waits
