"""Every named crash point (`engine.runtime.crashpoints`), on first runs, on resumes and on reclaims.

Each case makes a real `lockgate worker` process `os._exit` at the n-th pass of a point, starts the next one,
and checks what `Deployment.check` promises: every run ends, a non-idempotent POST is never sent twice, a run
either succeeded (its POST sent once) or failed with `step_not_idempotent`, and the SQL projection equals a
rebuild from the events journal. Resume cases give every parked run a duplicate resume job, as a late due
waker or a restart's rebuild would: dropping it must leave the live job's state alone.
"""

from __future__ import annotations

import time

import pytest

from engine.runtime.crashpoints import POINTS
from tests.chaos.conftest import Deployment, cases, effect_flow
from tests.chaos.test_delivery_crash import CRASHES as DELIVERY_CRASHES

RUNS = 6

FIRST_RUNS = ["worker.before_flush:2", "worker.after_flush:2", "step.before_effect:4", "step.after_effect:2",
              "step.after_effect:5", "worker.before_ack:1", "worker.after_ack:1", "projector.before_commit:2",
              "projector.after_commit:2"]
RESUMES = ["worker.before_flush:2", "worker.after_flush:2", "step.before_effect:3", "step.after_effect:2",
           "worker.in_drop:1", "worker.in_drop:3", "worker.before_ack:1", "worker.after_ack:1",
           "projector.before_commit:1", "projector.after_commit:1"]
"""The ack points at their first pass: a worker may read every resume job (the duplicates and the due waker's) in
one batch, and then acknowledges once."""
RECLAIMS = [("step.after_effect:2", "reclaim.before_requeue:1"), ("step.after_effect:2", "reclaim.after_requeue:1"),
            ("step.before_effect:4", "reclaim.before_requeue:2")]
REBUILDS = [(None, "rebuild.mid:1"), ("step.after_effect:2", "rebuild.mid:1")]


def _point(crash: str) -> str:
    return crash.partition(":")[0]


def test_every_crash_point_is_exercised() -> None:
    named = {_point(c) for c in FIRST_RUNS + RESUMES + DELIVERY_CRASHES}
    named |= {_point(c) for pair in RECLAIMS + REBUILDS for c in pair if c}
    assert named == set(POINTS)


def _park_all(deployment: Deployment) -> list[str]:
    """Runs of the parked flow, all parked by a clean worker that is then stopped; returns them once due."""
    deployment.publish(effect_flow(deployment.counter.url, delay="1s"))
    run_ids = deployment.create("parked", RUNS)
    parker = deployment.start()
    runs = deployment.wait_for(run_ids, frozenset({"waiting"}), timeout=30)
    deployment.stop(parker)
    due = max(float(run["waiting_on"]["due_at"]) for run in runs.values())
    time.sleep(max(0.0, due - time.time()) + 0.05)
    runs = deployment.runs(run_ids)
    assert all(run["status"] == "waiting" for run in runs.values()), "the parking worker resumed runs before its stop"
    return run_ids


@pytest.mark.parametrize(("deployment", "crash"), cases(FIRST_RUNS, ["step.after_effect:2", "worker.before_ack:1",
                                                                     "projector.before_commit:2"]),
                         indirect=["deployment"])
def test_a_crash_in_a_first_run(deployment: Deployment, crash: str) -> None:
    deployment.publish(effect_flow(deployment.counter.url))
    run_ids = deployment.create("first", RUNS)
    deployment.expect_crash(deployment.start(crash), _point(crash))
    deployment.start()
    deployment.check(run_ids)


@pytest.mark.parametrize(("deployment", "crash"), cases(RESUMES, ["worker.in_drop:1", "step.after_effect:2",
                                                                  "projector.after_commit:1"]),
                         indirect=["deployment"])
def test_a_crash_in_a_resume_with_duplicate_resume_jobs(deployment: Deployment, crash: str) -> None:
    run_ids = _park_all(deployment)
    deployment.duplicate_resumes(run_ids)
    deployment.expect_crash(deployment.start(crash), _point(crash))
    deployment.start()
    deployment.check(run_ids)


@pytest.mark.parametrize(("deployment", "first", "then"), cases(RECLAIMS, RECLAIMS[:1]), indirect=["deployment"])
def test_a_crash_while_reclaiming_a_dead_workers_jobs(deployment: Deployment, first: str, then: str) -> None:
    deployment.publish(effect_flow(deployment.counter.url))
    run_ids = deployment.create("first", RUNS)
    deployment.expect_crash(deployment.start(first), _point(first))
    deployment.expect_crash(deployment.start(then), _point(then))
    deployment.start()
    deployment.check(run_ids)


@pytest.mark.parametrize(("deployment", "first", "then"), cases(REBUILDS, REBUILDS[1:]), indirect=["deployment"])
def test_a_crash_during_the_due_set_rebuild(deployment: Deployment, first: str | None, then: str) -> None:
    run_ids = _park_all(deployment)
    deployment.duplicate_resumes(run_ids)
    if first is not None:
        deployment.expect_crash(deployment.start(first), _point(first))
    deployment.expect_crash(deployment.start(then), _point(then))
    deployment.start()
    deployment.check(run_ids)
