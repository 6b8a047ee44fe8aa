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
    QStyle,
    QTabBar,
    QTableView,
    QTreeWidgetItemIterator,
    QWidget,
)

from app.field_kinds import config_fields, field_label
from app.panels.approvals import MESSAGE_COLUMN
from app.panels.approvals import RUN_COLUMN as RUN_COLUMN_OF_APPROVALS
from app.panels.fit_width import FitWidthScrollArea
from app.panels.rows import ApprovalRow, ApprovalVoteRow, RunRow
from app.panels.runs import RUN_COLUMN, STARTED_COLUMN, VERSION_COLUMN, WHERE_COLUMN
from app.readable import short_run_id
from app.run_details import RunDetails
from app.settings import AppSettings, ProviderSetting
from app.settings_dialog import SettingsDialog
from app.window import MainWindow
from engine.ids import time_ordered_id
from engine.read_models import Run, Step
from tests.app.cells import cell

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


def shows_whole(table: QTableView, column: int, text: str) -> bool:
    """Whether `text` shows in `column` without eliding: the column is shown and wider than the text and the
    cell's margins."""
    margin = table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    width = table.columnWidth(column) - 2 * margin
    return not table.isColumnHidden(column) and width >= table.fontMetrics().horizontalAdvance(text)


def noon_today() -> datetime:
    """Today at noon, local time: a run started seconds before it started today, whenever the test runs."""
    return datetime.now().astimezone().replace(hour=12, minute=0, second=0, microsecond=0)


def parked_runs(now: datetime, count: int = 12) -> list[RunRow]:
    """Runs parked on an approval for a day, started within seconds (their ids alike but for the last digits),
    each with a model call's tokens: more than the dock shows, so its vertical scroll bar takes room too."""
    return [RunRow(time_ordered_id(), "ticket-triage", 3, "waiting", now - timedelta(seconds=5 + index), None,
                   0.0125, current_node="approve", waiting_reason="approval",
                   waiting_until=now + timedelta(hours=23, minutes=59, seconds=30), tokens_in=1234, tokens_out=56)
            for index in range(count)]


def test_runs_table_shows_every_header_at_the_default_size(qtbot, window: MainWindow) -> None:
    assert (window.width(), window.height()) == (1440, 900)  # the window's own default
    window.runs.set_runs(_runs(datetime.now(UTC)))
    window.docks["Runs"].raise_()
    settle(qtbot)
    table = window.runs.table
    assert hidden_headers(table) == []
    assert not table.horizontalScrollBar().isVisible()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_runs_columns_share_the_dock_so_the_place_shows(qtbot, window: MainWindow, size: tuple[int, int]) -> None:
    window.resize(*size)
    now = noon_today()
    panel = window.runs
    panel.now = lambda: now
    panel.set_runs(parked_runs(now))
    window.docks["Runs"].raise_()
    settle(qtbot)
    table = panel.table
    assert table.verticalScrollBar().isVisible()
    assert not table.horizontalScrollBar().isVisible()
    assert hidden_headers(table) == []
    status, flow, started = 0, 1, STARTED_COLUMN
    for row in range(panel.row_count()):
        where = panel.cell_text(row, WHERE_COLUMN)
        assert where == "approve: approval (23h59m left)"
        # The run id keeps its last 8 characters, what messages call the run.
        assert shows_whole(table, RUN_COLUMN, "…" + short_run_id(panel.model.rows[row].run_id))
        for column in (status, flow, started):
            assert shows_whole(table, column, panel.cell_text(row, column)), (column, panel.cell_text(row, column))
        if size == (1440, 900):
            # Every column, and the place whole with the time it has left.
            assert shows_whole(table, WHERE_COLUMN, where)
            for column in range(WHERE_COLUMN):
                assert shows_whole(table, column, panel.cell_text(row, column)), (column, panel.cell_text(row, column))
        else:
            # A narrow dock: the place's node and reason at least; the least needed columns make room for it.
            assert shows_whole(table, WHERE_COLUMN, where.split(" (")[0])


def test_runs_columns_give_back_room_when_the_dock_widens(qtbot, window: MainWindow) -> None:
    now = noon_today()
    window.runs.now = lambda: now
    window.runs.set_runs(parked_runs(now))
    window.docks["Runs"].raise_()
    window.resize(1100, 700)
    settle(qtbot)
    table = window.runs.table
    hidden = [column for column in range(table.model().columnCount()) if table.isColumnHidden(column)]
    assert hidden and VERSION_COLUMN in hidden
    assert "Version" in table.horizontalHeader().toolTip()  # says what is hidden, and how to see it
    window.resize(1440, 900)
    settle(qtbot, 100)
    assert not any(table.isColumnHidden(column) for column in range(table.model().columnCount()))
    assert not table.horizontalScrollBar().isVisible()
    assert table.horizontalHeader().toolTip() == ""


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


def test_approvals_fit_their_dock_in_a_small_window(qtbot, window: MainWindow) -> None:
    window.resize(1100, 700)
    now = noon_today()
    window.approvals.now = lambda: now
    long = "Refund ticket T-42 of 120 EUR to the customer who was charged twice for the same order?"
    vote = ApprovalVoteRow("ada", "approve", "looks right", now - timedelta(minutes=1))
    rows = [ApprovalRow(f"a{index}", "ticket-triage", time_ordered_id(), "manager_approval", long,
                        now - timedelta(minutes=index), now + timedelta(hours=23, minutes=index))
            for index in range(6)]
    rows.append(ApprovalRow("q", "refund-desk", time_ordered_id(), "three_sign_offs", "Release 2.0?", now,
                            now + timedelta(hours=1), required=3, approved_count=1, decisions=(vote,),
                            escalated=True, reminders_sent=2))
    window.approvals.set_approvals(rows)
    window.docks["Approvals"].raise_()
    settle(qtbot)
    table = window.approvals.table
    assert table.verticalScrollBar().isVisible()
    assert table.horizontalScrollBar().maximum() == 0 and not table.horizontalScrollBar().isVisible()
    assert hidden_headers(table) == []
    message = MESSAGE_COLUMN
    assert table.columnWidth(message) == max(table.columnWidth(c) for c in range(table.columnCount()))
    for row, approval in enumerate(window.approvals.approvals):
        assert shows_whole(table, RUN_COLUMN_OF_APPROVALS, "…" + short_run_id(approval.run_id))
        assert shows_whole(table, 0, approval.flow_id)
        for column in range(table.columnCount()):
            item = cell(table, row, column)
            # What elides in a narrow dock is whole in its tooltip.
            assert item.text() in item.toolTip(), (column, item.text(), item.toolTip())
    assert cell(table, 0, message).toolTip() == long


def test_bottom_dock_titles_show_whole_in_a_small_window(qtbot, window: MainWindow) -> None:
    window.resize(1100, 700)
    window.problems.counts_changed.emit(9, 3)
    window.approvals.count_changed.emit(12)
    settle(qtbot)
    bars = [bar for bar in window.findChildren(QTabBar)
            if bar.parent() is window and bar.isVisible() and "Runs" in [bar.tabText(i) for i in range(bar.count())]]
    assert len(bars) == 1
    bar = bars[0]
    titles = [bar.tabText(i).replace("&&", "&") for i in range(bar.count())]
    assert titles == ["Problems (12)", "Runs", "Triggers", "Approvals (12)", "Holds & budgets", "Log"]
    for index in range(bar.count()):
        assert bar.tabRect(index).width() >= bar.tabSizeHint(index).width(), titles[index]  # not elided
    assert bar.tabRect(bar.count() - 1).right() < bar.width()


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
