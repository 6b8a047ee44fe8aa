"""flow.call in the app: the palette lists it, the properties panel edits its flow (typed or picked from the
published flows), version, inputs and output key with real key and mouse events, the node's badge and
summary follow, live mode says which child run it waits on, and run details link parent and children."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtTest import QTest

from app.field_kinds import config_fields
from app.live import LiveState, run_row, waiting_text
from app.panels.field_editors import FlowRefEditor, IntEditor, MappingEditor, TextEditor
from app.panels.properties import PropertiesPanel
from app.run_details import RunDetails, related_runs_html
from app.waiting import waiting_of
from canvas.document import FlowDocument
from canvas.palette import NodePalette
from canvas.summary import config_summary
from engine.flow import flow_from_data
from engine.read_models import Run, RunSummary
from engine.runtime.live_change import LiveChange
from tests.engine.conftest import make_flow

NOW = 1_800_000_000.0
CHILD = "01a2518b" + "0" * 16 + "5e6f7a8b"
PARENT = "01a2518b" + "0" * 16 + "1a2b3c4d"


def _document() -> FlowDocument:
    return FlowDocument.from_flow(flow_from_data(make_flow("caller", [{"id": "start", "type": "trigger.manual"}],
                                                          [])))


def test_the_palette_lists_flow_call_under_flows(qtbot) -> None:
    palette = NodePalette()
    qtbot.addWidget(palette)
    palette.filter.setText("call flow")
    assert palette.visible_types() == ["flow.call"]
    item = palette.item_for("flow.call")
    assert item is not None and item.parent() is not None and item.parent().text(0) == "Flows"


def test_the_properties_panel_edits_a_flow_call(qtbot) -> None:
    kinds = {f.key: f.kind for f in config_fields("flow.call")}
    assert kinds == {"flow": "flow_ref", "version": "int", "inputs": "mapping", "output_key": "text"}
    document = _document()
    node_id = document.add_node("flow.call", (200, 0))
    document.validate_now()
    codes = {d.code for d in document.diagnostics() if d.node == node_id}
    assert "invalid_config" in codes, "a fresh flow.call names no flow yet: its badge says so"
    panel = PropertiesPanel()
    qtbot.addWidget(panel)
    panel.published_flow_ids = lambda: frozenset({"billing", "shipping", "caller"})
    panel.set_document(document)
    panel.show_node(node_id)
    panel.show()
    flow = panel.editors["flow"]
    assert isinstance(flow, FlowRefEditor)
    assert [flow.combo.itemText(i) for i in range(flow.combo.count())] == ["billing", "shipping"]
    assert flow.problem is not None
    flow.combo.lineEdit().setFocus()
    QTest.keyClicks(flow.combo.lineEdit(), "billing")
    QTest.keyClick(flow.combo.lineEdit(), Qt.Key.Key_Return)
    assert document.node(node_id).config["flow"] == "billing"
    assert flow.problem is None
    document.validate_now()
    assert not {d.code for d in document.diagnostics() if d.node == node_id and d.severity == "error"}
    assert config_summary(document.node(node_id)) == "calls billing"

    flow.combo.setCurrentIndex(flow.combo.findText("shipping"))
    flow.combo.activated.emit(flow.combo.currentIndex())
    assert document.node(node_id).config["flow"] == "shipping"

    version = panel.editors["version"]
    assert isinstance(version, IntEditor)
    assert version.spin.text() == "(not set)"
    version.spin.setFocus()
    QTest.keyClick(version.spin, Qt.Key.Key_Up)
    assert document.node(node_id).config["version"] == 1
    assert config_summary(document.node(node_id)) == "calls shipping v1"

    inputs = panel.editors["inputs"]
    assert isinstance(inputs, MappingEditor)
    QTest.mouseClick(inputs.add_button, Qt.MouseButton.LeftButton)
    assert document.node(node_id).config["inputs"] == {"key1": ""}
    assert isinstance(panel.editors["output_key"], TextEditor)
    assert document.node(node_id).config["output_key"] == "result"

    document.undo_stack.undo()
    document.undo_stack.undo()
    assert "version" not in document.node(node_id).config


def test_live_mode_says_which_child_run_it_waits_on() -> None:
    waiting = {"node": "call", "reason": "child_run", "due_at": None, "child_run_id": CHILD}
    assert waiting_text(waiting_of(waiting), NOW) == "waiting on child run 5e6f7a8b"
    live = LiveState()
    live.apply_change(LiveChange(PARENT, "caller", 1, "waiting", 4, "run_parked", node="call", waiting_on=waiting))
    assert live.node_counts("caller", NOW) == {"call": (0, 1, "waiting on child run 5e6f7a8b")}
    row = run_row(RunSummary(id=PARENT, flow_id="caller", version=1, status="waiting", waiting_on=waiting,
                             current_node="call"))
    assert row.waiting_reason == "child run"


def test_run_details_link_the_parent_and_open_it_on_click(qtbot) -> None:
    details = RunDetails()
    qtbot.addWidget(details)
    run = Run(id=CHILD, flow_id="billing", version=1, status="succeeded", state={}, parent_run_id=PARENT)
    details.show_run(run)
    details.show()
    qtbot.waitExposed(details)
    assert details.related.isVisible()
    assert "1a2b3c4d" in details.related.text()
    prefix = QFontMetrics(details.related.font()).horizontalAdvance("called by run ")
    height = details.related.height()
    with qtbot.waitSignal(details.open_run_requested, timeout=20_000) as opened:
        QTest.mouseClick(details.related, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier,
                         QPoint(prefix + 12, height // 2))
    assert opened.args == [PARENT]
    assert "child runs: " in related_runs_html(run.model_copy(update={"parent_run_id": None,
                                                                      "child_run_ids": [CHILD, PARENT]}))
    details.show_run(run.model_copy(update={"parent_run_id": None}))
    assert not details.related.isVisible()
