"""What the window tells the user, with real events: a canvas's wire hints and refusals in the status bar (in tabs
opened later too), how a run started from the window ended (status bar and Log), the Approvals tab's count,
and tab titles that keep the flow's name after Save, tell same-named flows apart and name the file on close."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QTimer
from PySide6.QtWidgets import QApplication, QMessageBox

from app.examples import example_bytes
from app.panels.rows import ApprovalRow
from app.readable import short_run_id
from app.window import MainWindow
from canvas.document import FlowDocument
from canvas.view import FlowView
from engine.flow import flow_from_data
from tests.app.test_engine_wiring import APPROVAL_FLOW
from tests.app.test_run_outcomes import FAILS
from tests.canvas.conftest import send_mouse

RUN_MS = 20_000

REFUND_DESK = {
    "format": "lockgate.flow/1", "id": "refund-desk", "name": "Refund desk",
    "nodes": [
        {"id": "start", "type": "trigger.manual", "title": "Manual", "position": [0, 0], "config": {}},
        {"id": "http_request", "type": "http.request", "title": "HTTP request", "position": [320, 0],
         "config": {"method": "GET", "url": "http://127.0.0.1:9/nothing-listens-here", "timeout": "5s"}},
    ],
    "edges": [],
}

def _status(window: MainWindow) -> str:
    return window.statusBar().currentMessage()


def _open_flow(qtbot, window: MainWindow, data: dict[str, object]) -> FlowView:
    window.add_document(FlowDocument.from_flow(flow_from_data(data)))
    editor = window.tabs.current_editor()
    assert editor is not None
    qtbot.waitUntil(lambda: editor.view.node_item("start") is not None)
    editor.view.set_zoom(1.0)
    editor.view.centerOn(editor.view.flow_scene.nodes_bounding_rect().center())
    return editor.view


def _drag_wire_onto_trigger(window: MainWindow, view: FlowView) -> tuple[str, str]:
    """Drag a wire from the HTTP request's output onto the manual trigger with real mouse events; returns the
    status bar's message while over the trigger and after the release."""
    source, target = view.node_item("http_request"), view.node_item("start")
    assert source is not None and target is not None
    start = view.mapFromScene(source.output_anchor(None))
    end = view.mapFromScene(target.node_rect().center() + target.pos())
    viewport = view.viewport()
    send_mouse(viewport, QEvent.Type.MouseButtonPress, start)
    for step in range(1, 7):
        send_mouse(viewport, QEvent.Type.MouseMove, start + (end - start) * step / 6, buttons=None)
    while_dragging = _status(window)
    send_mouse(viewport, QEvent.Type.MouseButtonRelease, end)
    return while_dragging, _status(window)


def test_a_refused_wire_says_why_in_the_status_bar_in_every_tab(qtbot, window: MainWindow) -> None:
    for opened in (1, 2):  # the first tab, and one opened later
        view = _open_flow(qtbot, window, REFUND_DESK)
        assert window.tabs.count() == opened
        window.statusBar().clearMessage()
        dragging, released = _drag_wire_onto_trigger(window, view)
        refusal = '"Manual" is a trigger and takes no input'
        assert dragging == refusal
        assert released == refusal  # it stays after the release
        assert view.document.flow_ref().edges == []

    # A wire that connects: the hint while over the target, cleared once connected.
    view = _open_flow(qtbot, window, {**REFUND_DESK, "id": "wired"})
    source, target = view.node_item("start"), view.node_item("http_request")
    assert source is not None and target is not None
    start, end = view.mapFromScene(source.output_anchor(None)), view.mapFromScene(target.input_anchor())
    send_mouse(view.viewport(), QEvent.Type.MouseButtonPress, start)
    send_mouse(view.viewport(), QEvent.Type.MouseMove, (start + end) / 2, buttons=None)
    send_mouse(view.viewport(), QEvent.Type.MouseMove, end, buttons=None)
    assert _status(window) == 'connect to "HTTP request"'
    send_mouse(view.viewport(), QEvent.Type.MouseButtonRelease, end)
    assert _status(window) == ""
    assert [(e.from_, e.to) for e in view.document.flow_ref().edges] == [("start", "http_request")]


def test_the_approvals_tab_counts_the_waiting_approvals(window: MainWindow) -> None:
    from datetime import UTC, datetime

    dock = window.docks["Approvals"]
    assert dock.windowTitle() == "Approvals"
    now = datetime.now(UTC)
    rows = [ApprovalRow(f"a{n}", "asks", f"run{n}", "ask", "Go on?", now, None) for n in range(2)]
    window.approvals.set_approvals(rows)
    assert dock.windowTitle() == "Approvals (2)"
    window.approvals.set_approvals(rows[:1])
    assert dock.windowTitle() == "Approvals (1)"
    window.approvals.set_approvals([])
    assert dock.windowTitle() == "Approvals"
    window.approvals.set_approvals(rows)
    window.approvals.set_unavailable("The engine is stopped.")
    assert dock.windowTitle() == "Approvals"


def test_a_run_started_here_says_how_it_ended(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    assert window.engine is not None
    _open_flow(qtbot, window, FAILS)
    window.publish()
    qtbot.waitUntil(lambda: "fails v1 published" in _status(window), timeout=10_000)
    window.ask_run_inputs = lambda _flow: {}
    window.run_flow()
    qtbot.waitUntil(lambda: "failed at call" in _status(window), timeout=RUN_MS)
    run_id = next(r.run_id for r in window.runs.rows.values() if r.flow_id == "fails")
    said = _status(window)
    assert said.startswith(f"Run {short_run_id(run_id)} of fails failed at call: "), said
    assert len(said) < 260 and "\n" not in said and 'node "call"' not in said
    assert "Connection refused" in said or "connect" in said.lower()
    assert [line for line in window.log.lines() if "failed at call" in line] and \
        sum("failed at call" in line for line in window.log.lines()) == 1

    # A run waiting for an approval is counted on the Approvals tab; once decided, it ends and says so.
    _open_flow(qtbot, window, APPROVAL_FLOW)
    window.publish()
    qtbot.waitUntil(lambda: "refund-ok v1 published" in _status(window), timeout=10_000)
    window.ask_run_inputs = lambda _flow: {"ticket": "T-1"}
    window.run_flow()
    qtbot.waitUntil(lambda: window.docks["Approvals"].windowTitle() == "Approvals (1)", timeout=RUN_MS)
    asks_run = next(r.run_id for r in window.runs.rows.values() if r.flow_id == "refund-ok")
    window.settings.your_name = "ada"
    window.approvals.set_decider("ada")
    window.approvals.table.selectRow(0)
    window.approvals.approve_button.click()
    qtbot.waitUntil(lambda: f"Run {short_run_id(asks_run)} of refund-ok succeeded." in _status(window), timeout=RUN_MS)
    assert window.docks["Approvals"].windowTitle() == "Approvals"
    assert sum(f"Run {short_run_id(asks_run)} of refund-ok succeeded." in line for line in window.log.lines()) == 1


def _triage_copy(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ticket-triage.flow.json"
    path.write_bytes(example_bytes("ticket-triage.flow.json"))
    return path


def test_tab_title_is_the_flow_name_before_and_after_save(window: MainWindow, tmp_path: Path) -> None:
    document = window.new_flow()
    document.rename_flow("Refund desk", set())
    assert window.tabs.tabText(0) == "Refund desk *"
    assert window.tabs.tabToolTip(0) == "Not saved yet"
    target = tmp_path / "refund-desk.flow.json"
    window.choose_save_path = lambda _document: target
    assert window.save()
    assert window.tabs.tabText(0) == "Refund desk"
    assert window.tabs.tabToolTip(0) == str(target)

    # Two open tabs of one name say which file each is; closing one makes the other plain again.
    first = window.open_file(_triage_copy(tmp_path / "a"))
    other = tmp_path / "other.flow.json"
    other.write_bytes(example_bytes("ticket-triage.flow.json"))
    second = window.open_file(other)
    assert first is not None and second is not None
    assert window.tabs.tabText(1) == "Ticket triage — ticket-triage.flow.json"
    assert window.tabs.tabText(2) == "Ticket triage — other.flow.json"
    second.rename_node("classify", "Label it")
    assert window.tabs.tabText(2) == "Ticket triage — other.flow.json *"
    third = window.open_file(_triage_copy(tmp_path / "b"))
    assert third is not None
    assert window.tabs.tabText(1) == "Ticket triage — a/ticket-triage.flow.json"
    assert window.tabs.tabText(3) == "Ticket triage — b/ticket-triage.flow.json"
    window.close_tab(3)
    window.close_tab(2)
    assert window.tabs.tabText(1) == "Ticket triage"
    # Renaming a flow to another tab's name tells them apart too.
    document.rename_flow("Ticket triage", set())
    assert window.tabs.tabText(0) == "Ticket triage — refund-desk.flow.json *"


def test_the_close_prompt_names_the_file(qtbot, window: MainWindow, tmp_path: Path) -> None:
    document = window.open_file(_triage_copy(tmp_path))
    assert document is not None
    document.rename_node("route", "Route it")
    window.ask_to_save = window._ask_to_save_dialog
    asked: list[str] = []

    def answer() -> None:
        # Any visible message box, not only the active modal one: offscreen, a window need not become active.
        boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
        if not boxes:
            QTimer.singleShot(20, answer)
            return
        box = boxes[0]
        asked.append(box.text())
        box.button(QMessageBox.StandardButton.Cancel).click()

    QTimer.singleShot(0, answer)
    try:
        assert not window.close_tab(0)
    finally:
        window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    assert asked == [f"Save the changes to Ticket triage (ticket-triage.flow.json) before closing?\n\n"
                     f"File: {tmp_path / 'ticket-triage.flow.json'}"]
    assert window.tabs.count() == 1


def test_how_an_ended_run_reads() -> None:
    from app.live import run_end_text
    from engine.read_models import Run, Step

    def run(status: str, steps: list[Step], **fields: object) -> Run:
        return Run.model_validate({"id": "01a25105abcdef0123456789c6d7e8f9", "flow_id": "refund-desk", "version": 2,
                                   "status": status, "steps": steps, **fields})

    ok = Step(step="s1", node="start", status="succeeded")
    long = "GET http://127.0.0.1:9/x failed: " + "a very long reason " * 20 + "\nwith a second line"
    failed = Step(step="s2", node="http_request", status="failed", error=f'node "http_request" (http.request): {long}',
                  error_type="ConnectError")
    text = run_end_text(run("failed", [ok, failed]))
    assert text.startswith("Run c6d7e8f9 of refund-desk failed at http_request: GET http://127.0.0.1:9/x failed: ")
    assert "second line" not in text and "… — double-click it in Runs" in text and len(text) < 240
    assert run_end_text(run("succeeded", [ok])) == "Run c6d7e8f9 of refund-desk succeeded."
    assert run_end_text(run("cancelled", [ok], current_node="wait")) == (
        "Run c6d7e8f9 of refund-desk was cancelled at wait.")
    assert run_end_text(run("interrupted", [ok], current_node="call", error="worker lost", error_type="lost")) == (
        "Run c6d7e8f9 of refund-desk was interrupted at call: worker lost.")
    assert run_end_text(run("failed", [], error="budget gone.")).startswith(
        "Run c6d7e8f9 of refund-desk failed: budget gone — double-click")



def test_unsaved_flows_of_one_name_are_numbered(window: MainWindow) -> None:
    first = window.open_example("ticket-triage.flow.json")
    assert window.tabs.tabText(0) == "Ticket triage"
    window.open_example("ticket-triage.flow.json")
    assert [window.tabs.tabText(i) for i in range(2)] == ["Ticket triage — not saved", "Ticket triage — not saved 2"]
    assert window.tabs.tabToolTip(1) == "Not saved yet"
    window.close_tab(1)
    assert window.tabs.tabText(0) == "Ticket triage"
    assert window.tabs.document_at(0) is first


def test_a_publish_with_warnings_says_how_many_and_shows_them(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    stray = {**FAILS, "id": "stray", "nodes": [*FAILS["nodes"],  # type: ignore[list-item]
                                             {"id": "orphan", "type": "set", "position": [0, 200],
                                              "config": {"values": {"note": "never set"}}}]}
    _open_flow(qtbot, window, stray)
    window.docks["Runs"].raise_()
    window.publish()
    qtbot.waitUntil(lambda: "stray v1 published" in _status(window), timeout=10_000)
    warnings = window.problems.diagnostics
    assert "unreachable_node" in [d.code for d in warnings] and all(d.severity == "warning" for d in warnings)
    assert _status(window) == f"stray v1 published with {len(warnings)} warnings (see Problems)"
    assert not window.docks["Problems"].visibleRegion().isEmpty()
