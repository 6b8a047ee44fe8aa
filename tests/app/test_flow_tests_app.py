"""Save as test… in a finished run's window and Flow ▸ Run tests, on real widgets and the embedded engine: the
triage example's question run (its 24 h follow-up waited out on the engine's manual clock) is saved beside the
flow, replays clean, and an edit of the open flow makes it fail in Problems."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt

from app.flow_tests import TEST_FAILED, FlowTestDiagnostic
from app.panels.field_editors import TemplateEditor
from app.window import MainWindow
from engine.clock import ManualClock
from engine.flowtest.model import load_test
from engine.providers.simulator import ProviderSimulator
from tests.app.test_engine_wiring import status_of
from tests.app.test_triage_end_to_end import own_simulator  # noqa: F401  (a fixture)

QUESTION = {"ticket": {"id": "T-7", "body": "How do I export my invoices?"}}
WAIT_MS = 30_000


def test_save_a_finished_run_as_a_test_and_run_the_flows_tests_from_the_flow_menu(
    qtbot,
    own_simulator: ProviderSimulator,  # noqa: F811
    open_engine_window: Callable[..., MainWindow],
    triage_path: Path,
) -> None:
    clock = ManualClock(start=time.time())
    window = open_engine_window(clock=clock)
    document = window.open_file(triage_path)
    assert document is not None
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "ticket-triage v1 published", timeout=WAIT_MS)
    window.ask_run_inputs = lambda _flow: QUESTION
    window.run_flow()
    qtbot.waitUntil(lambda: bool(window.runs.rows), timeout=WAIT_MS)
    run_id = next(iter(window.runs.rows))
    qtbot.waitUntil(lambda: window.runs.rows[run_id].current_node == "followup", timeout=WAIT_MS)
    assert window.engine is not None
    services = window.engine.bridge.services
    assert services is not None and services.waker is not None
    clock.advance(24 * 3600 + 1)
    services.waker.due.nudge()
    qtbot.waitUntil(lambda: window.runs.rows[run_id].status == "succeeded", timeout=WAIT_MS)

    engine = window.engine
    assert engine is not None
    asked: list[tuple[str, Path | None]] = []

    def answer(flow_id: str, folder: Path | None) -> tuple[str, Path] | None:
        asked.append((flow_id, folder))
        return "question", triage_path.parent

    engine.ask_test_target = answer
    engine.open_run(run_id)
    qtbot.waitUntil(lambda: engine.details is not None and engine.details.isVisible(), timeout=WAIT_MS)
    details = engine.details
    assert details is not None
    qtbot.waitUntil(details.save_test_button.isEnabled, timeout=WAIT_MS)
    qtbot.mouseClick(details.save_test_button, Qt.MouseButton.LeftButton)
    saved = triage_path.parent / "ticket-triage.question.flowtest.json"
    qtbot.waitUntil(saved.exists, timeout=WAIT_MS)
    assert asked == [("ticket-triage", triage_path.parent)]  # the open flow's folder was offered
    test = load_test(saved)
    assert test.recorded_from.run_id == run_id and test.expected.result == "question"
    assert "Saved test" in status_of(window)

    # Saved again under the same name: the user is asked first; Cancel keeps the file as it was.
    kept = saved.read_bytes() + b"\n"  # edited by hand since
    saved.write_bytes(kept)
    replace_asked: list[Path] = []
    replace = False

    def ask_replace(path: Path) -> bool:
        replace_asked.append(path)
        return replace

    engine.ask_replace_test = ask_replace
    qtbot.mouseClick(details.save_test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Not saved" in status_of(window), timeout=WAIT_MS)
    assert replace_asked == [saved] and saved.read_bytes() == kept
    replace = True
    qtbot.mouseClick(details.save_test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Replaced test" in status_of(window), timeout=WAIT_MS)
    assert replace_asked == [saved, saved] and saved.read_bytes() != kept
    assert load_test(saved) == test

    def test_problems() -> list[FlowTestDiagnostic]:
        return [d for d in window.problems.diagnostics if isinstance(d, FlowTestDiagnostic)]

    flow_menu = window.menus["&Flow"]
    assert window.actions_by_id["run_tests"] in flow_menu.actions()
    window.actions_by_id["run_tests"].trigger()
    assert status_of(window).startswith("1 tests of ticket-triage passed"), status_of(window)
    assert test_problems() == []

    # An unsaved edit of the open flow: the terminal's output. The test replays the flow as it is now.
    window.reveal_node("done")
    output = window.properties.editors["output"]
    assert isinstance(output, TemplateEditor)
    output.text.setPlainText("label: {{ state.label }}")
    output.commit()
    window.actions_by_id["run_tests"].trigger()
    assert status_of(window).startswith("1 of 1 tests of ticket-triage failed"), status_of(window)
    [problem] = test_problems()
    assert problem.code == TEST_FAILED and problem.file == str(saved)
    assert "result" in problem.message and "question" in problem.message
    rows = [window.problems.table.item(row, 1).text() for row in range(window.problems.table.rowCount())]
    assert TEST_FAILED in rows
    assert window.docks["Problems"].isVisible()

    # Edited back: the test passes and its problem goes.
    output.text.setPlainText("{{ state.label }}")
    output.commit()
    window.actions_by_id["run_tests"].trigger()
    assert test_problems() == []
