"""Recorded retries and foreach iterations: replay walks the retry policy as recorded (the failed attempts fail
again) and answers each iteration's boundary step by its item's index; on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from engine.flow import flow_from_data
from engine.flowtest.record import record_test
from engine.flowtest.suite import run_test
from tests.engine.conftest import Engine, Site, make_flow

T = {"id": "start", "type": "trigger.manual"}


def _flow(site: Site) -> dict[str, Any]:
    return make_flow(
        "fetch-all",
        [
            T,
            {
                "id": "probe",
                "type": "http.request",
                "config": {"method": "GET", "url": site.url + "/flaky", "output_key": "probe"},
                "retry": {"max_attempts": 3, "base_delay": "0s"},
            },
            {"id": "each", "type": "foreach", "config": {"items": "{{ inputs.ids }}", "output_key": "fetched"}},
            {
                "id": "fetch",
                "type": "http.request",
                "config": {"method": "GET", "url": site.url + "/item?id={{ item }}", "output_key": "page"},
            },
            {"id": "label", "type": "set", "config": {"values": {"label": "{{ item }}:{{ state.page.body.path }}"}}},
            {
                "id": "done",
                "type": "terminal",
                "config": {"output": "{{ state.fetched | map(attribute='label') | list }}"},
            },
        ],
        [
            ("start", "probe"),
            ("probe", "each"),
            ("each", "item", "fetch"),
            ("fetch", "label"),
            ("each", "done", "done"),
        ],
        {"ids": {"type": "array", "required": True}},
    )


def test_a_retried_step_and_foreach_iterations_replay_as_recorded(
    any_db_engine: Engine, site: Site, tmp_path: Path
) -> None:
    document = _flow(site)
    run = any_db_engine.run(document, {"ids": [3, 1, 2]})
    assert run["status"] == "succeeded", run["error"]
    assert any_db_engine.step(run, "probe")["attempts"] == 3
    assert any_db_engine.services.sql is not None
    test = record_test(any_db_engine.services.sql, run["id"], "three-items")

    by_step = {answer.step: answer for answer in test.answers}
    assert set(by_step) == {"probe", "fetch[0]", "fetch[1]", "fetch[2]"}
    assert by_step["probe"].attempts == 3
    assert by_step["fetch[0]"].writes["page"]["body"]["path"] == "/item?id=3"
    assert test.expected.path == ["start", "probe", "each", "done"]
    assert test.expected.result == ["3:/item?id=3", "1:/item?id=1", "2:/item?id=2"]
    site.close()  # replay never calls out: the site is gone

    report = run_test(test, flow_from_data(document), "three-items")
    assert report.verdict == "passed", report.differences

    fewer = copy.deepcopy(document)
    fewer["nodes"][1]["retry"]["max_attempts"] = 2
    report = run_test(test, flow_from_data(fewer), "three-items")
    assert report.verdict == "failed"
    assert [(d.aspect, d.key) for d in report.differences] == [
        ("status", None),
        ("path", None),
        ("state", "fetched"),
        ("state", "probe"),
        ("result", None),
    ]
    status, path = report.differences[:2]
    assert status.actual == "failed (recorded_attempt_failed)" and path.actual == ["start", "probe"]
