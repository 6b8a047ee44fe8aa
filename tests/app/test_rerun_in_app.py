"""Rerun from here in the app, on the real embedded engine and a real counting HTTP server: from the run
details (a step, the button, the confirmation naming a non-idempotent node that already had its effect), and
from the Runs panel's context menu with the node selected on the canvas; the current version is refused
when it differs upstream, naming the differing node, and the original is offered."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication, QMenu

from app.readable import short_run_id
from app.rerun_dialog import RerunDialog
from app.run_details import STATUS_COLUMN
from app.window import MainWindow
from canvas.document import FlowDocument
from engine.flow import flow_from_data
from tests.app.cells import cell
from tests.engine.conftest import Site, site  # noqa: F401  (site: fixture)

RUN_MS = 20_000


def _flow(site: Site, greeting: str = "Hello") -> dict[str, Any]:  # noqa: F811
    return {
        "format": "lockgate.flow/1", "id": "counted", "name": "Counted",
        "nodes": [
            {"id": "start", "type": "trigger.manual", "title": "Start", "position": [0, 0], "config": {}},
            {"id": "charge", "type": "http.request", "title": "Charge", "position": [220, 0],
             "config": {"method": "POST", "url": site.url + "/charge", "output_key": "charged"}},
            {"id": "greet", "type": "set", "title": "Greet", "position": [440, 0],
             "config": {"values": {"greeting": greeting + " #{{ state.charged.body.count }}"}}},
            {"id": "notify", "type": "http.request", "title": "Notify", "position": [660, 0],
             "config": {"method": "POST", "url": site.url + "/notify", "body": "{{ state.greeting }}"}},
            {"id": "done", "type": "terminal", "title": "Done", "position": [880, 0],
             "config": {"output": "{{ state.greeting }}"}},
        ],
        "edges": [{"from": "start", "to": "charge"}, {"from": "charge", "to": "greet"},
                  {"from": "greet", "to": "notify"}, {"from": "notify", "to": "done"}],
    }


def _first_run(qtbot, window: MainWindow, site: Site) -> str:  # noqa: F811
    window.add_document(FlowDocument.from_flow(flow_from_data(_flow(site))))
    window.publish()
    qtbot.waitUntil(lambda: "counted v1 published" in window.statusBar().currentMessage(), timeout=10_000)
    window.ask_run_inputs = lambda _flow: {}
    window.run_flow()
    qtbot.waitUntil(lambda: any(r.status == "succeeded" for r in window.runs.rows.values()), timeout=RUN_MS)
    return next(iter(window.runs.rows))


def _dialog(qtbot, window: MainWindow) -> RerunDialog:
    assert window.engine is not None
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.reruns.dialog is not None
                    and window.engine.reruns.dialog.isVisible(), timeout=10_000)
    dialog = window.engine.reruns.dialog
    assert dialog is not None
    return dialog


def test_rerun_from_run_details_repeats_no_upstream_effect(qtbot, engine_window: MainWindow, site: Site) -> None:  # noqa: F811
    window = engine_window
    run_id = _first_run(qtbot, window, site)
    assert site.hits == {"/charge": 1, "/notify": 1}
    assert window.engine is not None
    window.engine.open_run(run_id)
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.details is not None
                    and window.engine.details.isVisible(), timeout=20_000)
    details = window.engine.details
    assert details is not None
    rows = {cell(details.steps, r, 0).text(): r for r in range(details.steps.rowCount())}
    qtbot.mouseClick(details.steps.viewport(), Qt.MouseButton.LeftButton,
                     pos=details.steps.visualItemRect(cell(details.steps, rows["greet"], 0)).center())
    assert details.rerun_node() == "greet" and details.rerun_button.isEnabled()
    qtbot.mouseClick(details.rerun_button, Qt.MouseButton.LeftButton)
    dialog = _dialog(qtbot, window)
    assert "start, charge" in dialog.reused.text()
    assert "<b>notify</b>" in dialog.effects.text() and "already had" in dialog.effects.text()
    assert [radio.text() for radio in dialog.radios] == ["Original version (v1)"]
    qtbot.mouseClick(dialog.confirm, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.runs.rows) == 2
                    and all(r.status == "succeeded" for r in window.runs.rows.values()), timeout=RUN_MS)
    assert site.hits == {"/charge": 1, "/notify": 2}
    rerun_id = next(r for r in window.runs.rows if r != run_id)
    qtbot.waitUntil(lambda: details.run is not None and details.run.id == rerun_id
                    and details.run.status == "succeeded", timeout=10_000)
    link = f"<a href='run:{run_id}'>{short_run_id(run_id)}</a>"
    assert f"rerun of run {link} from node <b>greet</b>" in details.related.text()
    assert details.related.isVisible()
    assert [(cell(details.steps, r, 0).text(), cell(details.steps, r, STATUS_COLUMN).text())
            for r in range(details.steps.rowCount())] == [
        ("start", "reused"), ("charge", "reused"), ("greet", "succeeded"), ("notify", "succeeded"),
        ("done", "succeeded")]
    qtbot.mouseClick(details.steps.viewport(), Qt.MouseButton.LeftButton,
                     pos=details.steps.visualItemRect(cell(details.steps, 1, 0)).center())
    assert f"taken from run <a href='run:{run_id}'>{short_run_id(run_id)}</a>" in details.step_label.text()
    assert "reused from run" in details.step_given.toPlainText()
    assert '"charged"' in details.step_output.toPlainText()
    assert [bar.node for bar in details.timeline.bars] == ["greet", "notify", "done"]  # reused steps ran elsewhere


def test_runs_context_menu_reruns_from_the_canvas_node_and_refuses_a_changed_upstream(
        qtbot, engine_window: MainWindow, site: Site) -> None:  # noqa: F811
    window = engine_window
    run_id = _first_run(qtbot, window, site)
    assert window.engine is not None
    published: list[Any] = []
    window.engine.bridge.request(lambda api: api.publish(flow_from_data(_flow(site, "Hi"))),
                                 lambda result, error: published.append((result, error)))
    qtbot.waitUntil(lambda: bool(published), timeout=10_000)
    assert published[0][1] is None
    editor = window.tabs.current_editor()
    assert editor is not None
    editor.view.select_node("notify")
    table = window.runs.table
    at = table.visualRect(window.runs.model.index(0, 0)).center()
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.RightButton, pos=at)  # a right press selects nothing more
    QApplication.sendEvent(table.viewport(), QContextMenuEvent(QContextMenuEvent.Reason.Mouse, at,
                                                               table.viewport().mapToGlobal(at)))
    menu = window.runs.menu
    assert isinstance(menu, QMenu)
    qtbot.waitUntil(menu.isVisible, timeout=20_000)
    action = next(a for a in menu.actions() if a.objectName() == "rerunFromHereAction")
    assert action.isEnabled()
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    dialog = _dialog(qtbot, window)
    labels = [radio.text() for radio in dialog.radios]
    assert labels == ["Original version (v1)", "The current published version"]
    assert dialog.radios[0].isChecked() and not dialog.radios[1].isEnabled()
    refusal = dialog.findChild(type(dialog.reused), "rerunRefusal_current")
    assert refusal is not None and "greet" in refusal.text() and "original version (1)" in refusal.text()
    assert "<b>notify</b>" in dialog.effects.text()
    qtbot.mouseClick(dialog.confirm, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.runs.rows) == 2
                    and all(r.status == "succeeded" for r in window.runs.rows.values()), timeout=RUN_MS)
    assert site.hits == {"/charge": 1, "/notify": 2}
    rerun = next(r for r in window.runs.rows.values() if r.run_id != run_id)
    assert rerun.version == 1


def test_the_canvas_node_menu_reruns_the_selected_run_from_that_node(qtbot, engine_window: MainWindow,
                                                                     site: Site) -> None:  # noqa: F811
    window = engine_window
    _first_run(qtbot, window, site)
    table = window.runs.table
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     pos=table.visualRect(window.runs.model.index(0, 0)).center())
    editor = window.tabs.current_editor()
    assert editor is not None and window.engine is not None
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.selected_run is not None, timeout=20_000)
    view = editor.view
    at = view.mapFromScene(view.flow_scene.node_items["greet"].sceneBoundingRect().center())
    QApplication.sendEvent(view.viewport(), QContextMenuEvent(QContextMenuEvent.Reason.Mouse, at,
                                                              view.viewport().mapToGlobal(at)))
    menu = view.context_menu
    assert menu is not None
    qtbot.waitUntil(menu.isVisible, timeout=20_000)
    entry = next(a for a in menu.actions() if a.objectName() == "menu_rerun_from_here")
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(entry).center())
    dialog = _dialog(qtbot, window)
    assert "start, charge" in dialog.reused.text()
    qtbot.mouseClick(dialog.confirm, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.runs.rows) == 2
                    and all(r.status == "succeeded" for r in window.runs.rows.values()), timeout=RUN_MS)
    assert site.hits == {"/charge": 1, "/notify": 2}
