"""A real process death on the way out of an outgoing delivery: every one still arrives, once.

Runs' `execution.finished` callbacks:
- `projector.after_commit`: the runs' ends are committed, and the process dies before any sender hears of them;
  the next process finds them in its start-up sweep of the registered callbacks.
- `callback.claimed`: a sender claimed a callback and died before sending it; once the claim expires, the next
  process's sweep sends it.

Event triggers: `projector.after_commit`, the ends are committed and the batch not acknowledged; the next projector
applies it again and writes the ends it replays to the event triggers' stream.

Approval notices (`notify_url`):
- `projector.after_commit`: the requests are committed and the batch not acknowledged; the next projector applies
  the batch again, finds only duplicates, and writes their stored changes to the notices stream.
- `notice.claimed`: a reader took a notice from the stream and died before sending it; the next process's reader
  takes the entry over once it was left the claim's time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from engine.api.callbacks import register_callback
from engine.runtime.transitions import TERMINAL
from engine.store.models import AppliedEvent, Run
from tests.chaos.conftest import TRIGGER, Deployment, cases
from tests.engine.conftest import make_flow

RUNS = 4
CLAIM_SECONDS = 2.0
CALLBACK_CRASHES = ["projector.after_commit:1", "callback.claimed:1"]
NOTICE_CRASHES = ["projector.after_commit:1", "notice.claimed:1"]
TRIGGER_CRASHES = ["projector.after_commit:1"]
CRASHES = CALLBACK_CRASHES + NOTICE_CRASHES + TRIGGER_CRASHES


def _finished_path(run_id: str) -> str:
    return f"/finished/{run_id}"


def _notice_path(run_id: str) -> str:
    return f"/notice/{run_id}"


@pytest.mark.parametrize(("deployment", "crash"), cases(CALLBACK_CRASHES, CALLBACK_CRASHES[:1]),
                         indirect=["deployment"])
def test_a_process_killed_before_a_callback_went_out_leaves_it_to_the_next(deployment: Deployment,
                                                                            crash: str) -> None:
    deployment.worker_env["LOCKGATE_DELIVERY_CLAIM_TIMEOUT"] = str(CLAIM_SECONDS)
    deployment.publish(make_flow("quick", [TRIGGER, {"id": "end", "type": "terminal", "config": {"output": "ok"}}],
                                 [("start", "end")]))
    run_ids = deployment.create("quick", RUNS)
    handles = deployment.handle.require_handles()
    for run_id in run_ids:
        register_callback(handles, run_id, deployment.counter.url + _finished_path(run_id))

    deployment.expect_crash(deployment.start(crash), crash.partition(":")[0])
    ended = [run_id for run_id, run in deployment.runs(run_ids).items() if run["status"] in TERMINAL]
    assert ended, "the crash came before any run had ended: it tests nothing"
    assert _sent(deployment, run_ids, _finished_path) == dict.fromkeys(run_ids, 0)

    survivor = deployment.start()
    deployment.wait_for(run_ids, TERMINAL)
    _expect_each_once(deployment, run_ids, _finished_path)
    client = deployment.wait_projected()
    assert client.zcard(deployment.handle.keys.run_callbacks) == 0
    assert not [run_id for run_id in run_ids if client.exists(deployment.handle.keys.run_callback(run_id),
                                                              deployment.handle.keys.run_callback_claim(run_id))]
    deployment.stop(survivor)


@pytest.mark.parametrize(("deployment", "crash"), cases(NOTICE_CRASHES, NOTICE_CRASHES[:1]),
                         indirect=["deployment"])
def test_a_process_killed_before_an_approval_notice_went_out_leaves_it_to_the_next(deployment: Deployment,
                                                                                    crash: str) -> None:
    deployment.worker_env["LOCKGATE_DELIVERY_CLAIM_TIMEOUT"] = str(CLAIM_SECONDS)
    ask = {"id": "ask", "type": "approval",
           "config": {"timeout": "1h", "message": "Ship it?",
                      "notify_url": deployment.counter.url + "/notice/{{ run.id }}"}}
    deployment.publish(make_flow("gate", [TRIGGER, ask, {"id": "end", "type": "terminal", "config": {"output": "ok"}}],
                                 [("start", "ask"), ("ask", "approved", "end"), ("ask", "rejected", "end")]))
    run_ids = deployment.create("gate", RUNS)
    # The steps run in a process of their own that lives on, so no request is made again: each notice the crash
    # put at risk has only the dead process's batch to come from.
    executor = deployment.start(role="executor")
    deployment.wait_for_events(lambda event: event["type"] == "approval_requested", RUNS)

    deployment.expect_crash(deployment.start(crash, role="projector"), crash.partition(":")[0])
    with deployment.sql.connect() as conn:
        asked = conn.execute(sa.select(AppliedEvent.run_id)
                             .where(AppliedEvent.event_type == "approval_requested")).all()
    assert asked, "the crash came before any run's request was applied: it tests nothing"
    assert _sent(deployment, run_ids, _notice_path) == dict.fromkeys(run_ids, 0)

    survivor = deployment.start(role="projector")
    deployment.wait_for(run_ids, frozenset({"waiting"}))
    _expect_each_once(deployment, run_ids, _notice_path)
    client = deployment.wait_projected()
    assert client.xlen(deployment.handle.keys.approval_notices) == 0, "a notice was left on its stream"
    deployment.stop(survivor)
    deployment.stop(executor)


@pytest.mark.parametrize(("deployment", "crash"), [("sqlite", crash) for crash in TRIGGER_CRASHES],
                         indirect=["deployment"])
def test_a_projector_killed_before_its_ends_fired_their_event_triggers_leaves_them_to_the_next(
        deployment: Deployment, crash: str) -> None:
    end = {"id": "end", "type": "terminal", "config": {"output": "ok"}}
    deployment.publish(make_flow("quick", [TRIGGER, end], [("start", "end")]))
    listen = {"id": "on", "type": "trigger.event", "config": {"event_type": "run.succeeded"}}
    deployment.publish(make_flow("listener", [listen, end], [("on", "end")]))
    run_ids = deployment.create("quick", RUNS)
    executor = deployment.start(role="executor")
    deployment.wait_for_events(lambda event: event["type"] == "run_succeeded", RUNS)

    deployment.expect_crash(deployment.start(crash, role="projector"), crash.partition(":")[0])
    assert [run for run in deployment.runs(run_ids).values() if run["status"] == "succeeded"], \
        "the crash came before any run's end was applied: it tests nothing"
    assert _listener_runs(deployment) == []

    survivor = deployment.start(role="projector")
    deployment.wait_for(run_ids, TERMINAL)
    deadline = time.monotonic() + 20
    while len(_listener_runs(deployment)) < RUNS and time.monotonic() < deadline:
        time.sleep(0.05)
    started = _listener_runs(deployment)
    assert len(started) == RUNS, deployment.logs()
    deployment.wait_for(started, TERMINAL)
    time.sleep(0.5)  # a second start of one run's trigger would come now
    assert len(_listener_runs(deployment)) == RUNS
    assert deployment.wait_projected().xlen(deployment.handle.keys.event_trigger_changes) == 0
    deployment.stop(survivor)
    deployment.stop(executor)


@pytest.mark.parametrize("deployment", ["sqlite"], indirect=True)
def test_a_request_made_again_after_a_crash_is_noticed_and_fires_its_trigger_once(deployment: Deployment) -> None:
    """The whole engine dies after the projector committed the requests and before the workers acknowledged their
    jobs: the next process's workers run the parking steps again, which (in most runs of this case, as the jobs'
    timing falls) request the same approvals again, as new events of the same approval."""
    deployment.worker_env["LOCKGATE_DELIVERY_CLAIM_TIMEOUT"] = str(CLAIM_SECONDS)
    ask = {"id": "ask", "type": "approval",
           "config": {"timeout": "1h", "message": "Ship it?",
                      "notify_url": deployment.counter.url + "/notice/{{ run.id }}"}}
    end = {"id": "end", "type": "terminal", "config": {"output": "ok"}}
    deployment.publish(make_flow("gate", [TRIGGER, ask, end], [("start", "ask"), ("ask", "approved", "end"),
                                                                ("ask", "rejected", "end")]))
    listen = {"id": "on", "type": "trigger.event", "config": {"event_type": "approval.requested"}}
    deployment.publish(make_flow("listener", [listen, end], [("on", "end")]))
    run_ids = deployment.create("gate", RUNS)

    deployment.expect_crash(deployment.start("projector.after_commit:1"), "projector.after_commit")
    survivor = deployment.start()
    deployment.wait_for(run_ids, frozenset({"waiting"}))
    _expect_each_once(deployment, run_ids, _notice_path)
    deadline = time.monotonic() + 20
    while len(_listener_runs(deployment)) < RUNS and time.monotonic() < deadline:
        time.sleep(0.05)
    deployment.wait_for(_listener_runs(deployment), TERMINAL)
    time.sleep(0.5)
    assert len(_listener_runs(deployment)) == RUNS, deployment.logs()
    deployment.stop(survivor)


def _listener_runs(deployment: Deployment) -> list[str]:
    with deployment.sql.connect() as conn:
        return [str(row[0]) for row in conn.execute(sa.select(Run.id).where(Run.flow_id == "listener"))]


def _expect_each_once(deployment: Deployment, run_ids: list[str], path: Callable[[str], str]) -> None:
    deadline = time.monotonic() + 20 + CLAIM_SECONDS
    while min(_sent(deployment, run_ids, path).values()) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # a second delivery would come now
    assert _sent(deployment, run_ids, path) == dict.fromkeys(run_ids, 1), deployment.logs()


def _sent(deployment: Deployment, run_ids: list[str], path: Callable[[str], str]) -> dict[str, int]:
    with deployment.counter.lock:
        return {run_id: deployment.counter.hits.get(path(run_id), 0) for run_id in run_ids}
