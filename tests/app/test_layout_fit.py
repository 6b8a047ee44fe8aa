"""Layout on real widgets, offscreen: forms fit their dock, table headers show whole, side docks follow the window.

Each check measures the widgets as laid out (geometry, header sections, viewport widths), never a constant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QLineEdit,
    QScrollArea,
    QTableView,
    QTreeWidgetItemIterator,
    QWidget,
)

from app.field_kinds import config_fields, field_label
from app.panels.fit_width import FitWidthScrollArea
from app.panels.rows import ApprovalRow, RunRow
from app.run_details import RunDetails
from app.settings import AppSettings, ProviderSetting
from app.settings_dialog import SettingsDialog
from app.window import MainWindow
from engine.read_models import Run, Step

SIZES = [(1440, 900), (1100, 700)]
NODE_TYPES = ["http.request", "approval", "script", "router", "ai.model", "wait.callback", "budget.reserve"]
RUN_ID = "01a250f757b9c0d1e2f3a4b5c6d7e8f9"


def settle(qtbot, ms: int = 50) -> None:
    for _ in range(3):
        QApplication.processEvents()
    qtbot.wait(ms)
    QApplication.processEvents()


def clipped_widgets(area: QScrollArea) -> list[str]:
    """Visible widgets of the area's page that reach past its viewport's right edge (under the scroll bar or
    out of the dock), as "objectName/class: left..right > viewport width"."""
    page = area.widget()
    assert page is not None
    viewport = area.viewport()
    found = []
    if page.width() > viewport.width():
        found.append(f"page: {page.width()} > {viewport.width()}")
    for child in page.findChildren(QWidget):
        if not child.isVisibleTo(page) or child.parentWidget() is None or child.width() <= 0:
            continue
        if child.parentWidget().inherits("QAbstractScrollArea") or child.window() is not page.window():
            continue  # a table's or text box's own innards, or a popup
        left = child.mapTo(viewport, child.rect().topLeft()).x()
        right = left + child.width()
        if left < 0 or right > viewport.width():
            found.append(f"{child.objectName() or type(child).__name__}: {left}..{right} > {viewport.width()}")
    return found


def hidden_headers(table: QTableView) -> list[str]:
    """Headers not shown whole: cut by their section, or (partly) scrolled out of the viewport."""
    header = table.horizontalHeader()
    model = table.model()
    width = table.viewport().width()
    hidden = []
    for column in range(header.count()):
        if header.isSectionHidden(column):
            continue
        left = header.sectionViewportPosition(column)
        size = header.sectionSize(column)
        if left < 0 or left + size > width or size < header.sectionSizeFromContents(column).width():
            hidden.append(str(model.headerData(column, Qt.Orientation.Horizontal)))
    return hidden


def new_flow_with(window: MainWindow, types: list[str]) -> dict[str, str]:
    document = window.new_flow()
    document.add_input("ticket")
    return {type_name: document.add_node(type_name, (260 * index, 0)) for index, type_name in enumerate(types)}


# ----- the properties form fits its dock ----------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_node_form_fits_the_properties_viewport(qtbot, window: MainWindow, size: tuple[int, int]) -> None:
    window.resize(*size)
    nodes = new_flow_with(window, NODE_TYPES)
    area = window.properties.scroll_area
    scrolled = []
    for type_name, node_id in nodes.items():
        window.properties.show_node(node_id)
        settle(qtbot)
        assert clipped_widgets(area) == [], type_name
        if area.verticalScrollBar().isVisible():
            scrolled.append(type_name)
    # The case the new user met: a form taller than the dock, with the scroll bar beside it.
    assert scrolled


def test_the_form_keeps_fitting_when_the_dock_is_dragged_narrow(qtbot, window: MainWindow) -> None:
    window.resize(1440, 900)
    nodes = new_flow_with(window, NODE_TYPES)
    dock = window.docks["Properties"]
    for node_id in nodes.values():
        window.properties.show_node(node_id)
        window.resizeDocks([dock], [120], Qt.Orientation.Horizontal)
        settle(qtbot)
        area = window.properties.scroll_area
        assert clipped_widgets(area) == []
        assert dock.width() >= area.page_minimum_width() + area.reserved_width()


def test_flow_panel_fits_and_keeps_an_input_name_readable(qtbot, window: MainWindow) -> None:
    window.resize(1100, 700)
    new_flow_with(window, ["trigger.manual"])
    window.properties.show_node(None)
    window.resizeDocks([window.docks["Properties"]], [120], Qt.Orientation.Horizontal)
    settle(qtbot)
    panel = window.properties.flow_panel
    assert isinstance(panel, FitWidthScrollArea)
    assert clipped_widgets(panel) == []
    name = panel.findChild(QLineEdit, "input_name")
    assert name is not None and name.text() == "ticket"
    assert name.width() > name.fontMetrics().horizontalAdvance("customer_id")


def test_fields_shrink_with_the_dock_and_grow_back(qtbot, window: MainWindow) -> None:
    window.resize(1440, 900)
    nodes = new_flow_with(window, ["approval"])
    window.properties.show_node(nodes["approval"])
    dock = window.docks["Properties"]
    window.resizeDocks([dock], [520], Qt.Orientation.Horizontal)
    settle(qtbot)
    message = window.properties.editors["message"]
    wide = message.width()
    window.resizeDocks([dock], [330], Qt.Orientation.Horizontal)
    settle(qtbot)
    assert message.width() < wide - 100
    assert clipped_widgets(window.properties.scroll_area) == []


# ----- labels ---------------------------------------------------------------------------------------------------


def test_labels_spell_acronyms_in_capitals() -> None:
    assert field_label("url") == "URL"
    assert field_label("notify_url") == "Notify URL"
    assert field_label("hold_ttl") == "Hold TTL"
    assert field_label("output_key") == "Output key"
    assert field_label("json_body") == "JSON body"
    assert field_label("http_api_id") == "HTTP API ID"
    assert {spec.key: spec.label for spec in config_fields("http.request")}["url"] == "URL"


def test_properties_form_shows_url_in_capitals(qtbot, window: MainWindow) -> None:
    nodes = new_flow_with(window, ["http.request"])
    window.properties.show_node(nodes["http.request"])
    settle(qtbot)
    page = window.properties.scroll_area.widget()
    texts = {label.text() for label in page.findChildren(QLabel)}
    assert "URL *" in texts and "ID" in texts
    assert not {"Url *", "Id"} & texts


# ----- tables show their headers whole ---------------------------------------------------------------------------


def _runs(now: datetime) -> list[RunRow]:
    return [
        RunRow(RUN_ID, "refund-desk", 2, "waiting", now - timedelta(seconds=2), None, 0.0, current_node="approval",
               waiting_reason="approval", waiting_until=now + timedelta(minutes=10)),
        RunRow(RUN_ID[:-1] + "0", "ticket-triage", 3, "succeeded", now - timedelta(minutes=3),
               now - timedelta(minutes=2), 0.0123, tokens_in=1234, tokens_out=56),
        RunRow(RUN_ID[:-1] + "1", "ticket-triage", 3, "interrupted", now - timedelta(hours=3), now, None),
    ]


def test_runs_table_shows_every_header_at_the_default_size(qtbot, window: MainWindow) -> None:
    assert (window.width(), window.height()) == (1440, 900)  # the window's own default
    window.runs.set_runs(_runs(datetime.now(UTC)))
    window.docks["Runs"].raise_()
    settle(qtbot)
    table = window.runs.table
    assert hidden_headers(table) == []
    assert not table.horizontalScrollBar().isVisible()
    # Typical cells show whole too, but for the place (it takes the room left) and the run id (12 digits).
    for row in range(table.model().rowCount()):
        for column in range(table.model().columnCount()):
            if column in (7, 8):
                continue
            text = window.runs.cell_text(row, column)
            assert table.columnWidth(column) >= table.fontMetrics().horizontalAdvance(text), (row, column, text)


def test_approvals_table_keeps_the_message_on_one_line(qtbot, window: MainWindow) -> None:
    now = datetime.now(UTC)
    window.approvals.set_approvals([ApprovalRow("a1", "refund-desk", RUN_ID, "approval", "Refund T-42?", now,
                                                now + timedelta(minutes=10))])
    window.docks["Approvals"].raise_()
    settle(qtbot)
    table = window.approvals.table
    assert hidden_headers(table) == []
    assert not table.horizontalScrollBar().isVisible()
    message = table.fontMetrics().horizontalAdvance("Refund T-42?")
    assert table.columnWidth(3) > message
    assert not table.wordWrap()  # a longer message elides on its line, whole in its tooltip
    # The message column is the wide one; the (empty) progress column is only as wide as its header needs.
    assert table.columnWidth(3) > table.columnWidth(6)


def test_run_details_show_every_step_header(qtbot) -> None:
    details = RunDetails()
    qtbot.addWidget(details)
    stamp = datetime.now(UTC).isoformat()
    details.show_run(Run(id=RUN_ID, flow_id="refund-desk", version=3, status="failed", state={}, steps=[
        Step(step="manual", node="manual", type="trigger.manual", status="succeeded", attempts=1, duration_ms=0.08,
             started_at=stamp),
        Step(step="http_request", node="http_request", type="http.request", status="failed", attempts=1,
             duration_ms=73, started_at=stamp, error={"message": "refused"}),
    ]))
    details.show()
    qtbot.waitExposed(details)
    settle(qtbot)
    assert hidden_headers(details.steps) == []


@pytest.mark.parametrize("minimum", [False, True], ids=["default-size", "minimum-size"])
def test_provider_headers_show_whole(qtbot, app_settings: AppSettings, minimum: bool) -> None:
    app_settings.set_providers([ProviderSetting("openai", "https://api.openai.com/v1",
                                                {"gpt-4o": {"input": 2.5, "output": 10.0}})])
    dialog = SettingsDialog(app_settings)
    qtbot.addWidget(dialog)
    if minimum:
        dialog.resize(dialog.minimumSize())
    dialog.show()
    dialog.show_tab("Providers")
    qtbot.waitExposed(dialog)
    settle(qtbot)
    assert hidden_headers(dialog.providers_table) == []


def test_general_note_sits_under_its_field(qtbot, app_settings: AppSettings) -> None:
    dialog = SettingsDialog(app_settings)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    settle(qtbot)
    field = dialog.your_name_edit
    note = next(label for label in field.parentWidget().findChildren(QLabel) if "decided as this name" in label.text())
    # Where the note's first line is drawn: its contents' top left, at the top when the label is taller.
    text = note.contentsRect()
    assert note.alignment() & Qt.AlignmentFlag.AlignTop
    top_left = note.mapTo(dialog, text.topLeft())
    gap = top_left.y() - field.mapTo(dialog, field.rect().bottomLeft()).y()
    assert 0 <= gap <= 12
    assert abs(top_left.x() - field.mapTo(dialog, field.rect().topLeft()).x()) <= 4


# ----- side docks follow the window ------------------------------------------------------------------------------


def test_side_docks_widen_again_when_the_window_grows(qtbot, window: MainWindow) -> None:
    palette, properties = window.docks["Palette"], window.docks["Properties"]
    window.resize(1440, 900)
    settle(qtbot)
    start = (palette.width(), properties.width())
    window.docks["Approvals"].raise_()  # the widest bottom panel: the canvas column cannot give more
    window.resize(800, 600)
    settle(qtbot, 100)
    assert palette.width() + properties.width() < sum(start)  # the small window took room from the docks
    window.resize(1440, 900)
    settle(qtbot, 100)
    assert (palette.width(), properties.width()) == start


def test_palette_names_are_never_elided(qtbot, window: MainWindow) -> None:
    window.resize(800, 600)
    window.resizeDocks([window.docks["Palette"]], [60], Qt.Orientation.Horizontal)
    settle(qtbot, 100)
    tree = window.palette_widget.tree
    widest = 0
    iterator = QTreeWidgetItemIterator(tree)
    while (item := iterator.value()) is not None:
        rect = tree.visualItemRect(item)
        needed = rect.left() + tree.iconSize().width() + tree.fontMetrics().horizontalAdvance(item.text(0))
        widest = max(widest, needed)
        iterator += 1
    assert widest > tree.fontMetrics().horizontalAdvance("Wait for callback")
    assert tree.viewport().width() >= widest
