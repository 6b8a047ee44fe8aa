"""flow.call end to end on the real engine (Redis, SQLite and PostgreSQL): a child run through create_run(),
the parent parked on it and resumed by its end."""

from __future__ import annotations

import pytest

from engine.calls.body import child_idempotency_key
from engine.flow import flow_from_data
from tests.catalog_flow_call.flows import child_flow, parent_flow
from tests.engine.conftest import Engine


def _publish(engine: Engine, *documents: dict) -> None:
    for document in documents:
        engine.services.publish_flow(flow_from_data(document))


@pytest.mark.postgres
def test_child_success_puts_its_result_under_output_key(any_db_engine: Engine) -> None:
    _publish(any_db_engine, child_flow())
    run = any_db_engine.run(parent_flow(), {"n": 4})
    assert run["status"] == "succeeded", run
    assert run["result"] == {"doubled": 10}
    assert run["state"]["sub"] == {"doubled": 10}
    assert run["parent_run_id"] is None
    [child_id] = run["child_run_ids"]
    child = any_db_engine.services.get_run(child_id)
    assert child is not None
    assert child["status"] == "succeeded"
    assert child["parent_run_id"] == run["id"]
    assert child["inputs"] == {"n": 5}
    step = any_db_engine.step(run, "call")
    assert step["status"] == "succeeded"
    assert step["given"] == {"flow": "child", "version": None, "inputs": {"n": 5}}
