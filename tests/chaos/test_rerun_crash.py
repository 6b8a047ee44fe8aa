"""A worker killed for real while it executes a rerun: the redelivered job continues the rerun, and the
upstream POST the rerun reuses is never sent again (the counting server), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from engine.runtime.queries import get_run
from tests.chaos.conftest import Deployment, effect_flow

CRASHES = ["step.before_effect:1", "step.after_effect:1", "worker.before_ack:1"]


@pytest.mark.parametrize(("deployment", "crash"), [("sqlite", c) for c in CRASHES] + [("postgres", CRASHES[1])],
                         indirect=["deployment"])
def test_a_rerun_whose_worker_dies_repeats_no_upstream_effect(deployment: Deployment, crash: str) -> None:
    deployment.publish(effect_flow(deployment.counter.url))
    [original] = deployment.create("first", 1)
    worker = deployment.start()
    deployment.wait_for([original], frozenset({"succeeded"}))
    deployment.stop(worker)
    assert deployment.counter.effects(original) == 1

    created, plan = deployment.handle.rerun_run(original, "end")
    assert [step.node for step in plan.reused] == ["start", "post"]
    deployment.expect_crash(deployment.start(crash), crash.partition(":")[0])
    deployment.start()
    rerun = deployment.wait_for([created.run_id], frozenset({"succeeded", "failed"}))[created.run_id]
    assert (rerun["status"], rerun["result"], rerun["rerun_of"]) == ("succeeded", "done", original), deployment.logs()
    assert deployment.counter.effects(original) == 1
    assert deployment.counter.effects(created.run_id) == 0
    assert rerun["state"] == deployment.runs([original])[original]["state"]
    shown = get_run(deployment.sql, created.run_id)
    assert shown is not None
    reused = {step["step"]: step for step in shown["steps"] if step["reused_from"] == original}
    assert sorted(reused) == ["post", "start"]
    assert reused["post"]["status"] == "succeeded" and reused["post"]["output"]
    deployment.check_projection()  # the seed state and the reused steps are in the rerun's events
