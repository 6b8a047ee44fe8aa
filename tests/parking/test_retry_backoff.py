"""A retry's backoff parks the run (`retry_backoff`) instead of holding a worker, and resumes at its next attempt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from engine.clock import ManualClock
from engine.flow import flow_from_data
from engine.publish import PublishRefused
from engine.store.models import Run, Step
from tests.engine.conftest import Site, make_flow, start_engine, wait_until
from tests.idle import Idle
from tests.parking.conftest import HOUR, START, TRIGGER, Parked

MS = 0.001
MINUTE = 60.0


@pytest.fixture
def one_worker(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> Iterator[Parked]:
    """A single worker on a ManualClock, on SQLite and on PostgreSQL: a busy worker would stall every other run."""
    clock = ManualClock(START)
    services, sleeps = start_engine(tmp_path, redis_url, db_url, key_prefix, clock=clock, workers=1)
    try:
        yield Parked(services, clock, Idle(services))
    finally:
        services.stop()
    assert sleeps == []  # no top-level retry waited in the worker


def _retrying(flow_id: str, url: str, **retry: Any) -> dict[str, Any]:
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": url, "output_key": "got"},
            "retry": retry}
    return make_flow(flow_id, [TRIGGER, call, {"id": "done", "type": "terminal",
                                               "config": {"output": "{{ state.got.body.count }}"}}],
                     [("start", "call"), ("call", "done")])


def _stored(parked: Parked, run_id: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The run row's `waiting_on` and its `call` step row, read straight from SQL."""
    assert parked.services.sql is not None
    with parked.services.sql.connect() as conn:
        waiting = conn.execute(sa.select(Run.waiting_on).where(Run.id == run_id)).scalar_one()
        step = conn.execute(sa.select(Step.status, Step.attempts, Step.error_type)
                            .where(Step.run_id == run_id, Step.step == "call")).one()
    return waiting, dict(step._mapping)


def _checkpoint(parked: Parked, run_id: str) -> dict[str, Any]:
    raw = parked.handles.client.get(parked.handles.keys.run_checkpoint(run_id))
    assert raw is not None
    return dict(orjson.loads(raw))


def _backing_off_for(parked: Parked, run_id: str, attempt: int) -> dict[str, Any]:
    """The run once it waits out the backoff before `attempt`."""
    def there() -> dict[str, Any] | None:
        run = parked.services.get_run(run_id, with_steps=False)
        assert run is not None and run["status"] in ("queued", "running", "waiting"), run
        waiting = run["waiting_on"] or {}
        return run if run["status"] == "waiting" and waiting.get("attempt") == attempt else None

    return dict(wait_until(there, what=f"run {run_id} to wait for attempt {attempt}"))


def test_a_backoff_parks_the_run_holding_no_worker_and_resumes_at_the_next_attempt(one_worker: Parked,
                                                                                   site: Site) -> None:
    parked = one_worker
    parked.publish(_retrying("flaky", site.url + "/flaky", max_attempts=3, base_delay="10m", max_interval="1h"))
    parked.publish(make_flow("quick", [TRIGGER, {"id": "done", "type": "terminal", "config": {"output": "ok"}}],
                             [("start", "done")]))
    run_id = parked.start("flaky")
    parked.waiting_on(run_id, "call")
    waiting, step = _stored(parked, run_id)
    assert waiting == {"node": "call", "reason": "retry_backoff", "attempt": 2, "due_at": START + 10 * MINUTE}
    assert step == {"status": "suspended", "attempts": 1, "error_type": "http_status"}
    assert _checkpoint(parked, run_id)["retry_attempt"] == 2

    # The only worker is free while the run waits: another run goes start to end.
    other = parked.services.wait_for_run(parked.start("quick"), timeout=10)
    assert other["status"] == "succeeded" and other["result"] == "ok"

    parked.advance(10 * MINUTE - MS)
    parked.still_waiting(run_id, "call")
    assert site.hits["/flaky"] == 1
    parked.advance(MS)  # attempt 2 fails too: exponential, the next wait is 20 minutes
    _backing_off_for(parked, run_id, 3)
    waiting, step = _stored(parked, run_id)
    assert waiting == {"node": "call", "reason": "retry_backoff", "attempt": 3, "due_at": START + 30 * MINUTE}
    assert step["attempts"] == 2 and site.hits["/flaky"] == 2

    parked.advance(20 * MINUTE)
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "succeeded" and run["result"] == 3  # the server's third hit answered
    waiting, step = _stored(parked, run_id)
    assert waiting is None and step == {"status": "succeeded", "attempts": 3, "error_type": None}


def test_exponential_waits_stop_growing_at_max_interval(parked: Parked, site: Site) -> None:
    parked.publish(_retrying("down", site.url + "/fail", max_attempts=5, base_delay="1m", max_interval="3m"))
    run_id = parked.start("down")
    due_times = []
    for attempt in range(2, 6):
        run = _backing_off_for(parked, run_id, attempt)
        due_times.append(run["waiting_on"]["due_at"])
        parked.advance(run["waiting_on"]["due_at"] - parked.clock.now())
    assert [due - START for due in due_times] == [60, 60 + 120, 180 + 180, 360 + 180]  # 1m, 2m, then 3m, 3m
    run = parked.wait_status(run_id, "failed", "succeeded")
    assert run["error_type"] == "http_status" and site.hits["/fail"] == 5
    assert parked.services.get_run(run_id)["steps"][1]["attempts"] == 5  # type: ignore[index]


def test_publish_refuses_retry_waits_longer_than_max_wait(parked: Parked, site: Site) -> None:
    document = _retrying("patient", site.url + "/fail", max_attempts=4, base_delay="1h", max_interval="1h")
    document["settings"] = {"max_wait": "2h59m59s"}
    with pytest.raises(PublishRefused) as refused:
        parked.services.publish_flow(flow_from_data(document))
    assert [(d.code, d.node) for d in refused.value.diagnostics if d.severity == "error"] == [
        ("retry_exceeds_max_wait", "call")]
    document["settings"] = {"max_wait": "3h"}
    parked.services.publish_flow(flow_from_data(document))  # 3 retries of 1h fit


def test_an_approval_past_24h_is_governed_by_its_own_timeout(parked: Parked) -> None:
    parked.publish(make_flow("slow-gate", [
        TRIGGER,
        {"id": "ask", "type": "approval", "config": {"timeout": "30h"}},
        {"id": "yes", "type": "terminal", "config": {"output": "approved"}},
        {"id": "no", "type": "terminal", "config": {"output": "{{ state.ask.decided_by }}"}},
    ], [("start", "ask"), ("ask", "approved", "yes"), ("ask", "rejected", "no")]))
    run_id = parked.start("slow-gate")
    parked.waiting_on(run_id, "ask")
    parked.advance(24 * HOUR + MS)
    parked.still_waiting(run_id, "ask")
    assert _checkpoint(parked, run_id)["wake_kind"] == "due"
    parked.advance(START + 30 * HOUR - MS - parked.clock.now())
    parked.still_waiting(run_id, "ask")
    parked.advance(START + 30 * HOUR - parked.clock.now())
    run = parked.wait_status(run_id, "succeeded", "failed")
    assert run["status"] == "succeeded" and run["result"] == "timeout"
