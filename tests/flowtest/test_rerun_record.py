"""A rerun saved as a flow test: its reused steps are in its record (their answers and its path), so the test
replays the whole flow as the rerun saw it; on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from engine.flow import flow_from_data
from engine.flowtest.record import record_test
from engine.flowtest.suite import run_test
from tests.engine.conftest import Engine, Site, make_flow


def test_a_rerun_saved_as_a_test_replays_with_its_reused_steps(any_db_engine: Engine, site: Site,
                                                               tmp_path: Path) -> None:
    document = make_flow("charge-then-notify", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "charge", "type": "http.request",
         "config": {"method": "POST", "url": site.url + "/charge", "output_key": "charged"}},
        {"id": "notify", "type": "http.request",
         "config": {"method": "POST", "url": site.url + "/notify", "output_key": "notified"}},
        {"id": "done", "type": "terminal", "config": {"output": "#{{ state.charged.body.count }}"}},
    ], [("start", "charge"), ("charge", "notify"), ("notify", "done")])
    first = any_db_engine.run(document)
    created, _plan = any_db_engine.services.rerun_run(first["id"], "notify")
    rerun = any_db_engine.services.wait_for_run(created.run_id)
    assert (rerun["status"], rerun["result"]) == ("succeeded", "#1"), rerun
    assert any_db_engine.services.sql is not None
    test = record_test(any_db_engine.services.sql, rerun["id"], "rerun")
    assert test.expected.path == ["start", "charge", "notify", "done"]
    charge = next(answer for answer in test.answers if answer.step == "charge")
    assert charge.writes == any_db_engine.step(first, "charge")["output"]
    site.close()  # replay never calls out
    report = run_test(test, flow_from_data(document), "rerun")
    assert report.verdict == "passed", report.differences
