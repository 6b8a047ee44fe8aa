"""A callback POSTed while its run is sealing its park on the `wait.callback` node (the park computed, not yet
written) still resumes the run at once: the worker looks for the claim right after writing the park.

One real worker handles a batch of two start jobs: run A parks on its callback node, run B's `http.request`
POSTs A's callback URL to the real HTTP server before the batch writes A's park. Nothing moves the clock, so
without that look A would sit until its 1h timeout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.api.server import ApiServer
from engine.clock import ManualClock
from engine.flow import flow_from_data
from engine.runtime.worker import PlanCache, Worker
from engine.transport.streams import ensure_group
from tests.engine.conftest import make_flow, start_engine
from tests.parking.conftest import START, TRIGGER


def _read(worker: Worker) -> list[tuple[bytes, dict[bytes, bytes]]]:
    reply: Any = worker.client.xreadgroup(worker.keys.jobs_group, worker.name, {worker.keys.jobs: ">"}, count=16,
                                          block=2000)
    return [entry for _stream, entries in reply or [] for entry in entries]


def test_a_callback_during_the_park_write_wakes_the_run(tmp_path: Path, redis_url: str, sqlite_url: str,
                                                        key_prefix: str) -> None:
    clock = ManualClock(START)
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, clock=clock, workers=0)
    server = ApiServer(services, "127.0.0.1", 0).start()
    try:
        services.publish_flow(flow_from_data(make_flow("waits", [
            TRIGGER,
            {"id": "wait", "type": "wait.callback", "config": {"timeout": "1h", "output_key": "reply"}},
            {"id": "done", "type": "terminal", "config": {"output": "{{ state.reply.n }}"}},
            {"id": "late", "type": "terminal", "config": {"output": "late"}},
        ], [("start", "wait"), ("wait", "received", "done"), ("wait", "timed_out", "late")])))
        services.publish_flow(flow_from_data(make_flow("caller", [
            TRIGGER,
            {"id": "call", "type": "http.request", "config": {
                "method": "POST", "url": "{{ inputs.url }}", "body": '{"n": 7}',
                "headers": {"content-type": "application/json"}}},
            {"id": "done", "type": "terminal"},
        ], [("start", "call"), ("call", "done")], {"url": {"type": "string", "required": True}})))
        waiting = services.create_run("waits").run_id
        url = services.callback_links.url(waiting, "wait")
        assert url.startswith(server.url + "/callbacks/")
        caller = services.create_run("caller", {"url": url}).run_id

        assert services.sql is not None and services.redis is not None
        worker = Worker(services.redis.client(), services.keys, PlanCache(services.sql), clock, "sealing-test",
                        box=services.box, links=services.callback_links)
        ensure_group(worker.client, worker.keys.jobs, worker.keys.jobs_group)
        batch = _read(worker)
        assert len(batch) == 2
        assert worker.handle_batch(batch) == ["parked", "succeeded"]
        resumes = _read(worker)
        assert len(resumes) == 1, "the parked run got no resume job"
        assert worker.handle_batch(resumes) == ["succeeded"]
        run = services.wait_for_run(waiting, timeout=10)
        assert (run["status"], run["result"], run["state"]["reply"]) == ("succeeded", 7, {"n": 7})
        assert services.wait_for_run(caller, timeout=10)["status"] == "succeeded"
        assert clock.now() == START
    finally:
        server.stop()
        services.stop()
