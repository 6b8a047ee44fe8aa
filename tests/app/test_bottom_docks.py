"""The bottom docks on real widgets, offscreen: the Problems table fits its dock, the docks are tall enough for
a few rows (and keep the height a user gave them), money reads the same in every table.

The layout checks measure the widgets as laid out (header sections, viewport sizes), never a constant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication, QTableView

from app.gui import create_application, create_main_window
from app.panels.problems import CODE_COLUMN, FIX_COLUMN, MESSAGE_COLUMN, NODE_COLUMN
from app.panels.rows import RunRow, cents, usd
from app.panels.runs import COST_COLUMN, RunsPanel
from app.run_details import RunDetails
from app.settings import AppSettings
from app.window import MainWindow
from engine.money.amounts import format_usd
from engine.read_models import Run
from tests.app.cells import cell
from tests.app.test_layout_fit import RUN_ID, SIZES, hidden_headers, noon_today, parked_runs, settle, shows_whole


def scrolls_sideways(table: QTableView) -> bool:
    bar = table.horizontalScrollBar()
    return bar.maximum() > 0 or bar.isVisible()


# ----- the Problems table fits its dock ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_problems_table_fits_its_dock_with_no_flow_open(qtbot, window: MainWindow, size: tuple[int, int]) -> None:
    window.resize(*size)
    window.docks["Problems"].raise_()
    settle(qtbot)
    table = window.problems.table
    assert hidden_headers(table) == []
    assert not scrolls_sideways(table)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_problems_message_takes_the_room_and_elides_into_its_tooltip(qtbot, window: MainWindow,
                                                                      size: tuple[int, int]) -> None:
    window.resize(*size)
    document = window.new_flow()
    document.add_node("approval", (200, 0))
    document.add_node("budget.reserve", (460, 0))
    window.set_known_budgets({"ops"})  # the reserve's budget "default" is missing: a row with a fix button
    document.validate_now()
    window.docks["Problems"].raise_()
    settle(qtbot)
    panel = window.problems
    table = panel.table
    assert table.rowCount() >= 3
    assert hidden_headers(table) == []
    assert not scrolls_sideways(table)
    widths = [table.columnWidth(column) for column in range(table.columnCount())]
    assert widths[MESSAGE_COLUMN] == max(widths)
    buttons = [b for b in (panel.fix_button(row) for row in range(table.rowCount())) if b is not None]
    assert buttons and all(table.columnWidth(FIX_COLUMN) >= b.sizeHint().width() for b in buttons)
    shortened = 0
    for row, diagnostic in enumerate(panel.diagnostics):
        # The usual codes and node ids show whole (longer ones elide), so the message keeps the rest.
        assert shows_whole(table, CODE_COLUMN, diagnostic.code), diagnostic.code
        assert shows_whole(table, NODE_COLUMN, diagnostic.node or "—")
        for column in (CODE_COLUMN, NODE_COLUMN):
            item = cell(table, row, column)
            assert item.toolTip() == item.text(), (column, item.text())  # what elides is whole in its tooltip
        message = cell(table, row, MESSAGE_COLUMN)
        assert message.toolTip() == diagnostic.message
        named = f'node "{diagnostic.node}"'
        if diagnostic.message.startswith((f"{named}: ", f"{named} (")):
            # The Node column names the node: the cell goes straight to the problem.
            assert not message.text().startswith(named) and diagnostic.message.endswith(f": {message.text()}")
            shortened += 1
    assert shortened


# ----- the bottom docks are tall enough for a few rows --------------------------------------------------------


def rows_shown(table: QTableView) -> float:
    return table.viewport().height() / table.verticalHeader().defaultSectionSize()


@pytest.mark.parametrize(("size", "rows"), [((1440, 900), 7), ((1100, 700), 5)], ids=["1440x900", "1100x700"])
def test_runs_show_several_rows_and_the_canvas_keeps_half(qtbot, window: MainWindow, size: tuple[int, int],
                                                           rows: int) -> None:
    now = noon_today()
    window.runs.now = lambda: now
    window.runs.set_runs(parked_runs(now, 12))
    window.open_example("ticket-triage.flow.json")
    window.docks["Runs"].raise_()
    window.resize(*size)
    settle(qtbot, 100)
    table = window.runs.table
    assert table.verticalScrollBar().isVisible()  # more runs than fit: the dock's height decides what shows
    assert rows_shown(table) >= rows
    editor = window.tabs.current_editor()
    assert editor is not None and editor.view.isVisible()
    assert window.centre.height() >= window.height() / 2


def drag_bottom_separator(qtbot, window: MainWindow, by: int) -> None:
    """Drag the separator between the canvas and the bottom docks `by` pixels down (up when negative)."""
    dock = window.docks["Runs"]
    x = dock.x() + dock.width() // 2
    y = (window.centre.geometry().bottom() + dock.y()) // 2
    qtbot.mousePress(window, Qt.MouseButton.LeftButton, pos=QPoint(x, y))
    for step in range(1, 11):
        qtbot.mouseMove(window, QPoint(x, y + by * step // 10))
        QApplication.processEvents()
    qtbot.mouseRelease(window, Qt.MouseButton.LeftButton, pos=QPoint(x, y + by))
    settle(qtbot)


def bottom_height(window: MainWindow) -> int:
    """The bottom dock area's height, its tab bar included: from the shown dock's top to the status bar."""
    return window.statusBar().y() - window.docks["Runs"].y()


def test_a_dragged_height_keeps_its_share_as_the_window_resizes(qtbot, window: MainWindow) -> None:
    window.docks["Runs"].raise_()
    settle(qtbot)
    start = bottom_height(window)
    drag_bottom_separator(qtbot, window, -80)
    dragged = bottom_height(window)
    assert dragged >= start + 70
    window.resize(1100, 700)
    settle(qtbot, 100)
    assert abs(bottom_height(window) - dragged * 700 / 900) <= 3
    window.resize(1440, 900)
    settle(qtbot, 100)
    assert abs(bottom_height(window) - dragged) <= 3


def test_a_restored_layout_keeps_its_bottom_height(qtbot, window: MainWindow, app_settings: AppSettings) -> None:
    window.docks["Runs"].raise_()
    window.resizeDocks([window.docks["Runs"]], [200], Qt.Orientation.Vertical)
    settle(qtbot)
    assert bottom_height(window) == 200
    window.save_layout()
    again = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(again)
    again.show()
    qtbot.waitExposed(again)
    settle(qtbot, 100)
    # Not a third of the window: the share the user left, of the height the window came back with (the offscreen
    # screen may fit the saved geometry to its own size).
    saved_height = window.height()
    assert abs(bottom_height(again) - 200 * again.height() / saved_height) <= 3
    again.resize(1440, 900 if again.height() != 900 else 700)
    settle(qtbot, 100)
    assert abs(bottom_height(again) - 200 * again.height() / saved_height) <= 3


def test_restarts_in_a_smaller_window_do_not_grow_the_bottom_docks(qtbot, window: MainWindow,
                                                                 app_settings: AppSettings) -> None:
    window.resize(1440, 900)
    window.docks["Runs"].raise_()
    settle(qtbot, 100)
    first = bottom_height(window)
    heights = []
    for _ in range(3):
        window.save_layout()
        window = create_main_window(create_application(), app_settings, start_engine=False)
        qtbot.addWidget(window)
        window.resize(1000, 640)  # another screen: the window comes back smaller, then is made large again
        window.show()
        qtbot.waitExposed(window)
        settle(qtbot, 100)
        window.resize(1440, 900)
        settle(qtbot, 100)
        heights.append(bottom_height(window))
    assert all(abs(height - first) <= 3 for height in heights), (first, heights)


# ----- money reads the same everywhere ------------------------------------------------------------------------


def test_money_is_written_as_the_engine_writes_it() -> None:
    assert usd(0.0) == "$0.00"
    assert usd(0.000004) == "$0.000004"  # a run's few micro-dollars are not "$0"
    assert usd(0.00001) == "$0.00001"
    assert usd(0.0042) == "$0.0042"
    assert usd(0.2) == "$0.20"
    assert usd(7.3) == "$7.30"
    assert (cents(0.0), cents(0.000004), cents(0.0123), cents(1234.5)) == ("$0.00", "<$0.01", "$0.01", "$1,234.50")
    for micros in (0, 1, 40, 186, 4_200, 12_300, 200_000, 7_300_000, 25_000_000, 1_234_500_000):
        assert usd(micros / 1_000_000) == format_usd(micros)  # what `lockgate runs show` and the ledger say


def test_runs_table_and_run_details_show_one_cost_format(qtbot) -> None:
    started = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)
    panel = RunsPanel(now=lambda: started + timedelta(minutes=1))
    qtbot.addWidget(panel)
    runs = [RunRow(f"{RUN_ID[:-1]}{index}", "ticket-triage", 1, "succeeded", started, started, cost)
            for index, cost in enumerate((0.0, 0.000004))]
    panel.set_runs(runs)
    costs = {panel.model.rows[row].run_id: (panel.cell_text(row, COST_COLUMN), panel.model.data(
        panel.model.index(row, COST_COLUMN), Qt.ItemDataRole.ToolTipRole)) for row in range(panel.row_count())}
    # A table cell says a cost to the cent (below one: "<$0.01", never "$0" or a number cut short); its tooltip,
    # like the run's details, says the amount as the engine writes it.
    assert costs == {runs[0].run_id: ("$0.00", "$0.00"), runs[1].run_id: ("<$0.01", "$0.000004")}
    details = RunDetails()
    qtbot.addWidget(details)
    stamp = started.isoformat()
    details.show_run(Run(id=runs[1].run_id, flow_id="ticket-triage", version=1, status="succeeded", state={},
                         steps=[], cost_micros=4, created_at=stamp, started_at=stamp, finished_at=stamp))
    assert "cost $0.000004" in details.header.text()
