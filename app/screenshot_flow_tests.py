"""Render Flow ▸ Run tests: `python -m app.screenshot_flow_tests docs/screenshots` writes app-flow-tests.png.

No engine: the triage example is copied to a scratch folder with one test of a question ticket beside it (its
model's answer, "question", as a recording holds it; its expected path and end from replaying the example as
shipped), then the router's condition is edited so question tickets go to the approval, and the tests run."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from app.screenshots import WINDOW_SIZE, _pause, shoot


def _question_test(flow_file: Path) -> None:
    from engine.flow import load_flow
    from engine.flowtest.model import ExpectedOutcome, FlowTest, RecordedAnswer, RecordedFrom, save_test
    from engine.flowtest.replay import replay

    answers = [
        RecordedAnswer(step="reserve", node="reserve", type="budget.reserve", status="succeeded", ports=["out"]),
        RecordedAnswer(
            step="classify",
            node="classify",
            type="ai.model",
            status="succeeded",
            ports=["out"],
            writes={"label": "question"},
        ),
    ]
    test = FlowTest(
        name="question",
        flow_id="ticket-triage",
        trigger="hook",
        recorded_from=RecordedFrom(run_id="3f6c0b1d9e2a4c7b8d5e6f7a8b9c0d1e", version=1, started_at=1_796_112_000.0),
        inputs={"ticket": {"id": "T-7", "body": "How do I export my invoices?"}},
        answers=answers,
        expected=ExpectedOutcome(status="succeeded", path=[], state={}),
    )
    done = replay(load_flow(flow_file), test)
    test.expected = ExpectedOutcome(status="succeeded", path=done.path, state=done.state, result=done.result)
    save_test(test, flow_file.parent)


def render_flow_tests(folder: Path, theme: str = "light") -> Path:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from app.examples import example_bytes
    from app.gui import create_application, create_main_window
    from app.settings import AppSettings

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        flow_file = Path(scratch) / "ticket-triage.flow.json"
        flow_file.write_bytes(example_bytes("ticket-triage.flow.json"))
        _question_test(flow_file)
        app = create_application([])
        settings = AppSettings(QSettings(str(Path(scratch) / f"{theme}.ini"), QSettings.Format.IniFormat))
        settings.theme = theme  # type: ignore[assignment]
        settings.first_start_done = True
        window = create_main_window(app, settings, start_engine=False)
        window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
        window.resize(*WINDOW_SIZE)
        window.show()
        document = window.open_file(flow_file)
        assert document is not None
        document.set_config_field("route", "branches", [{"port": "refund", "when": "{{ state.label != 'bug' }}"}])
        window.actions_by_id["run_tests"].trigger()
        editor = window.tabs.current_editor()
        assert editor is not None
        _pause(0.3)
        editor.view.fit_selection_or_all()
        window.problems.table.selectRow(0)
        _pause(0.3)
        editor.view.flow_scene.clearSelection()
        editor.view.fit_selection_or_all()
        _pause(0.3)
        return shoot(window, folder / f"app-flow-tests{'' if theme == 'light' else '-' + theme}.png")


if __name__ == "__main__":
    print(render_flow_tests(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")))
