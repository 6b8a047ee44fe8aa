"""A worker killed for real while `flow.call` steps start their child runs: each parent still gets exactly one
child (the redelivered step finds the child its lost attempt created, by its idempotency key) and ends with the
child's result.

One worker thread runs the parents' batch in order, so the n-th pass of a point is a known step: with three
parents, `step.after_effect:4` is the second parent's call returning its new child (the first parent's child
exists too, its park not yet written), and `worker.before_ack:1` is the end of the batch, every child created
and no park written.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from engine.store.models import Run
from tests.catalog_flow_call.flows import child_flow, parent_flow
from tests.chaos.conftest import Deployment

PARENTS = 3


@pytest.mark.parametrize(("deployment", "crash", "children_at_crash"), [("sqlite", "step.after_effect:4", 2),
                                                                      ("sqlite", "worker.before_ack:1", 3),
                                                                      ("postgres", "step.after_effect:4", 2)],
                         indirect=["deployment"])
def test_a_worker_killed_while_starting_child_runs_leaves_one_child_each(deployment: Deployment, crash: str,
                                                                        children_at_crash: int) -> None:
    deployment.publish(child_flow())
    deployment.publish(parent_flow())
    parents = [deployment.handle.create_run("parent", {"n": n}).run_id for n in range(PARENTS)]
    deployment.expect_crash(deployment.start(crash, workers=1), crash.partition(":")[0])
    with deployment.sql.connect() as conn:
        started = conn.execute(sa.select(sa.func.count()).select_from(Run).where(Run.flow_id == "child")).scalar()
    assert started == children_at_crash, "the crash did not come where the case says"
    with deployment.sql.connect() as conn:
        assert set(conn.execute(sa.select(Run.status).where(Run.id.in_(parents))).scalars()) <= {"queued", "running"}
    deployment.start()
    runs = deployment.wait_for(parents, frozenset({"succeeded", "failed", "cancelled"}))
    with deployment.sql.connect() as conn:
        children = conn.execute(sa.select(Run.parent_run_id, Run.status, Run.result)
                                .where(Run.flow_id == "child")).all()
    by_parent: dict[str, list[tuple[str, object]]] = {}
    for parent_id, status, result in children:
        by_parent.setdefault(parent_id, []).append((status, result))
    for n, parent_id in enumerate(parents):
        assert runs[parent_id]["status"] == "succeeded", (runs[parent_id], deployment.logs())
        assert runs[parent_id]["result"] == {"doubled": (n + 1) * 2}
        assert by_parent[parent_id] == [("succeeded", {"doubled": (n + 1) * 2})], by_parent
    assert len(children) == PARENTS
    deployment.check_projection()
