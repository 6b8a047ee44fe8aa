"""Tests recorded from real runs of the ticket-triage example on the real engine, replayed in-process."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

from engine.flowtest.model import dump_test, load_test
from engine.flowtest.suite import flow_tests_beside, run_file
from tests.flowtest.conftest import DAY, MoneyEngine, question_run, record, refund_run, triage_document, write_flow


def _with_node(document: dict, node_id: str, **config: object) -> dict:
    changed = copy.deepcopy(document)
    for node in changed["nodes"]:
        if node["id"] == node_id:
            node["config"].update(config)
    return changed


def test_a_question_run_recorded_from_the_store_replays_and_records_byte_stable(
    start_money_engine: Callable[..., MoneyEngine], db_url: str, tmp_path: Path
) -> None:
    engine = start_money_engine(db_url=db_url)  # SQLite, and PostgreSQL where one answers
    run_id = question_run(engine)
    flow_file = write_flow(tmp_path, triage_document())
    test, path = record(engine, run_id, "question", tmp_path)

    assert path.name == "ticket-triage.question.flowtest.json"
    assert test.expected.path == ["hook", "reserve", "classify", "route", "followup", "note", "done"]
    assert test.expected.result == "question" and test.expected.state["note"] == "Followed up on T-7"
    assert [(a.node, a.type) for a in test.answers] == [("reserve", "budget.reserve"), ("classify", "ai.model")]
    assert test.answers[1].writes == {"label": "question"}
    assert test.inputs["ticket"]["id"] == "T-7" and test.trigger == "hook"
    assert flow_tests_beside(flow_file, "ticket-triage") == [path]

    report = run_file(path)
    assert report.verdict == "passed", report.differences
    assert report.actual is not None and report.actual.simulated_seconds >= DAY and report.actual.parks == 1
    # Recorded again from the same run: the same bytes, whatever the database's JSON key order.
    (tmp_path / "again").mkdir()
    again, _ = record(engine, run_id, "question", tmp_path / "again")
    assert dump_test(again) == path.read_text(encoding="utf-8")
    assert load_test(path) == test


def test_a_changed_router_condition_fails_with_the_path_state_and_result_diff(
    money_engine: MoneyEngine, tmp_path: Path
) -> None:
    run_id = question_run(money_engine)
    _, path = record(money_engine, run_id, "question", tmp_path)
    document = triage_document()
    for node in document["nodes"]:
        if node["id"] == "route":
            node["config"]["branches"][0]["when"] = "{{ state.label != 'refund' }}"
    write_flow(tmp_path, document)

    report = run_file(path)
    assert report.verdict == "failed"
    by_aspect = {(d.aspect, d.key): d for d in report.differences}
    assert set(by_aspect) == {("status", None), ("path", None), ("state", "note"), ("result", None)}
    assert by_aspect[("path", None)].actual == ["hook", "reserve", "classify", "route", "approve"]
    assert by_aspect[("status", None)].actual == "failed (not_recorded)"
    assert by_aspect[("state", "note")].missing == "actual"
    assert by_aspect[("result", None)].expected == "question" and by_aspect[("result", None)].actual is None


def test_an_approval_decided_after_two_hours_replays_and_a_shorter_timeout_changes_its_end(
    money_engine: MoneyEngine, tmp_path: Path
) -> None:
    run_id = refund_run(money_engine, decide_after=2 * 3600)
    flow_file = write_flow(tmp_path, triage_document())
    test, path = record(money_engine, run_id, "refund-approved", tmp_path)

    # The refund POST goes to a closed port: the recorded run failed there, and so must the replay.
    assert test.expected.status == "failed" and test.expected.path[-2:] == ["approve", "refund"]
    approve = next(a for a in test.answers if a.node == "approve")
    assert approve.waited_seconds == 2 * 3600 and approve.ports == ["approved"]
    assert approve.writes["approve"]["decided_by"] == "ada" and approve.writes["approve"]["comment"] == "refund it"
    refund = next(a for a in test.answers if a.node == "refund")
    assert refund.status == "failed" and refund.error_type
    assert run_file(path).verdict == "passed"

    write_flow(tmp_path, _with_node(triage_document(), "approve", timeout="1h"))
    report = run_file(path)
    assert report.verdict == "failed"
    by_aspect = {(d.aspect, d.key): d for d in report.differences}
    assert by_aspect[("path", None)].actual[-2:] == ["approve", "declined"]
    assert by_aspect[("status", None)].actual == "succeeded"
    assert by_aspect[("state", "approve")].actual["decided_by"] == "timeout"
    assert report.actual is not None and report.actual.simulated_seconds == 3600
    assert flow_file.exists()


def test_a_timed_out_approval_replays_its_24_hour_wait_at_once(money_engine: MoneyEngine, tmp_path: Path) -> None:
    run_id = refund_run(money_engine, decide_after=None)
    write_flow(tmp_path, triage_document())
    test, path = record(money_engine, run_id, "refund-timeout", tmp_path)
    assert test.expected.status == "succeeded" and test.expected.path[-2:] == ["approve", "declined"]
    assert test.expected.state["approve"]["decided_by"] == "timeout"

    report = run_file(path)
    assert report.verdict == "passed", report.differences
    assert report.actual is not None and report.actual.simulated_seconds >= DAY
