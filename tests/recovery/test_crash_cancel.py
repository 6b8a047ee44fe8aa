"""A run cancelled while the worker holding its job is dead: the worker that takes the job over ends it."""

from __future__ import annotations

import signal
from collections.abc import Callable

import sqlalchemy as sa

from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.store.models import DeadLetter
from tests.engine.conftest import make_flow
from tests.recovery.conftest import HoldingSite, WorkerProcess, wait_until


def test_a_run_cancelled_after_its_worker_died_is_ended_by_the_next_worker_without_running_on(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    supervisor.publish_flow(flow_from_data(make_flow("cut", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "slow", "type": "http.request", "config": {"method": "GET", "url": holding_site.url + "/hold"}},
        {"id": "after", "type": "http.request", "config": {"method": "GET", "url": holding_site.url + "/after"}},
    ], [("start", "slow"), ("slow", "after")])))
    first = spawn_worker()
    run_id = supervisor.create_run("cut", {}).run_id
    wait_until(lambda: holding_site.count("/hold") == 1, what="the worker to be inside the slow step")
    wait_until(lambda: (supervisor.get_run(run_id, with_steps=False) or {}).get("status") == "running",
               what="the run to be projected running")
    first.signal(signal.SIGKILL)
    first.proc.wait(5)
    assert supervisor.cancel_run(run_id) == "cancelling"  # its job is still held in Redis, by a dead worker
    spawn_worker()
    run = supervisor.wait_for_run(run_id, timeout=20)
    assert (run["status"], run["error_type"]) == ("cancelled", "cancelled"), run
    assert holding_site.count("/hold") == 1 and holding_site.count("/after") == 0  # nothing ran after the cancel
    assert supervisor.sql is not None
    with supervisor.sql.connect() as conn:
        assert list(conn.execute(sa.select(DeadLetter.error)).scalars()) == []
