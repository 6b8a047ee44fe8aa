"""The main window: palette, canvas tabs, properties, and the Problems / Runs / Approvals / Holds / Log docks.

The window wires widgets that each have one job; menus and shortcuts come from
`app.actions`. User questions (save changes? which file?) go through callables
so tests can answer them without a modal dialog.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from PySide6.QtCore import QByteArray, Qt, QTimer
from PySide6.QtGui import QActionGroup, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QFileDialog,
    QHeaderView,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app import actions as action_specs
from app.bridge import EngineBridge
from app.budget_check import budget_check
from app.compare import Comparisons
from app.engine_controller import EngineController
from app.engine_process import SIMULATOR_HOST, preferred_simulator_port
from app.examples import FIRST_START_EXAMPLE, FIRST_START_HINT, example_flow, example_names
from app.flow_tabs import FlowTabs
from app.log_feed import LogFeed
from app.panels.approvals import ApprovalsPanel
from app.panels.changes import ChangesPanel
from app.panels.flow_panel import TakenIds
from app.panels.holds import HoldsPanel
from app.panels.log import LogPanel
from app.panels.problems import ProblemsPanel
from app.panels.properties import PropertiesPanel
from app.panels.runs import RunsPanel
from app.panels.triggers import TriggersPanel
from app.readable import counted
from app.settings import AppSettings, ThemeMode
from app.start_page import StartPage
from app.trigger_watch import TriggerWatch
from engine import __version__
from engine.flow import Flow, FlowLoadError
from engine.logs import RecordBuffer
from engine.validation import has_errors

if TYPE_CHECKING:
    from canvas.document import FlowDocument
    from engine.read_models import FlowVersion

FLOW_FILE_FILTER = "Lockgate flows (*.flow.json);;JSON files (*.json);;All files (*)"
SaveAnswer = QMessageBox.StandardButton
RunChoice = Literal["publish_and_run", "run_published", "cancel"]
STATUS_MESSAGE_MS = 6000


class MainWindow(QMainWindow):
    def __init__(self, settings: AppSettings, bridge: EngineBridge | None = None,
                 parent: QWidget | None = None, log_records: RecordBuffer | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.setWindowTitle("Lockgate")
        self.resize(1440, 900)
        self.settings = settings
        self.bridge = bridge
        # Questions to the user; tests replace them with plain answers.
        self.ask_to_save: Callable[[FlowDocument], SaveAnswer] = self._ask_to_save_dialog
        self.choose_open_path: Callable[[], Path | None] = self._open_path_dialog
        self.choose_save_path: Callable[[FlowDocument], Path | None] = self._save_path_dialog
        self.ask_run_inputs: Callable[[Flow], dict[str, object] | None] = self._run_inputs_dialog
        self.ask_publish_onto_history: Callable[[FlowDocument, int], bool] = self._publish_onto_history_dialog
        self.ask_compare_version: Callable[[str, list[int]], int | None] = self._choose_version_dialog
        self.run_settings_dialog: Callable[[QDialog], int] = lambda dialog: dialog.exec()
        self.ask_publish_before_run: Callable[[FlowDocument, int | None], RunChoice] = self._publish_before_run_dialog
        self.known_budgets: frozenset[str] | None = None
        """Names of the engine's budgets, once read (the budget_missing check waits for them)."""
        self.published_ids: frozenset[str] = frozenset()
        """Ids of the flows published in the engine's data folder (read when the engine starts and on publish)."""
        self._hint_document: FlowDocument | None = None
        """The flow the status-bar hint is about (the first-start example); the hint shows only with it."""

        self.tabs = FlowTabs(self)
        self.start_page = StartPage([FIRST_START_EXAMPLE, *(n for n in example_names() if n != FIRST_START_EXAMPLE)])
        self.start_page.new_requested.connect(self.new_flow)
        self.start_page.open_requested.connect(self.open_dialog)
        self.start_page.example_requested.connect(self.open_example)
        self.start_page.recent_requested.connect(lambda path: self.open_file(Path(path)))
        self.centre = QStackedWidget(self)
        self.centre.setObjectName("centre")
        self.centre.addWidget(self.tabs)
        self.centre.addWidget(self.start_page)
        self.setCentralWidget(self.centre)
        self._build_docks()
        self.log_feed = LogFeed(self.log, log_records, self) if log_records is not None else None
        self.actions_by_id = action_specs.build_actions(self, self._handlers())
        self.menus = action_specs.build_menus(self.menuBar(), self.actions_by_id)
        self._build_recent_menu()
        self._build_theme_group()
        self.toolbar = QToolBar("Main toolbar", self)
        self.toolbar.setObjectName("mainToolbar")
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        action_specs.build_toolbar(self.toolbar, self.actions_by_id)
        self._theme_changed()
        from canvas.theme import theme_notifier

        theme_notifier().changed.connect(self._theme_changed)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.toolbar)
        self.hint_label = QLabel(self)
        self.hint_label.setObjectName("hintLabel")
        self.statusBar().addWidget(self.hint_label, 1)
        self.engine_label = QLabel(self)
        self.statusBar().addPermanentWidget(self.engine_label)

        self.tabs.current_document_changed.connect(self._current_document_changed)
        self.tabs.selection_changed.connect(self.properties.show_selection)
        self.tabs.close_requested.connect(self.close_tab)
        self.tabs.status.connect(self._canvas_status)
        self.problems.node_activated.connect(self.reveal_node)
        self.problems.budget_requested.connect(lambda name: self.show_settings(budget=name))
        self.palette_widget.activated.connect(self._add_from_palette)
        self.problems.counts_changed.connect(self._problem_counts_changed)
        self.approvals.count_changed.connect(self._approval_count_changed)
        self.properties.flow_panel.taken_ids = self.taken_ids
        self.properties.published_flow_ids = lambda: self.published_ids
        self.approvals.set_decider(settings.your_name)
        self.approvals.change_name_requested.connect(lambda: self.show_settings("General"))
        self.engine: EngineController | None = None
        self.trigger_watch: TriggerWatch | None = None
        if bridge is not None:
            self.engine = EngineController(self, bridge)
            self.trigger_watch = TriggerWatch(self, bridge)
            self.engine.published.connect(self._published)
            bridge.log_message.connect(self.log.append)
            bridge.state_changed.connect(self._engine_state_changed)
            self._engine_state_changed(bridge.state)
        else:
            self._engine_state_changed("unavailable")
        self._current_document_changed(None)
        self.restore_layout()

    # ----- construction -----------------------------------------------------------

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        # "&" would be read as a mnemonic in the dock's tab.
        dock = QDockWidget(title.replace("&", "&&"), self)
        dock.setObjectName("dock_" + title.lower().replace(" & ", "_").replace(" ", "_"))
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QDockWidget.DockWidgetFeature.DockWidgetFloatable)
        self.addDockWidget(area, dock)
        return dock

    def _build_docks(self) -> None:
        from canvas.palette import NodePalette

        self.palette_widget = NodePalette(self)
        self.properties = PropertiesPanel(self)
        self.problems = ProblemsPanel(self)
        self.runs = RunsPanel(self)
        self.approvals = ApprovalsPanel(self)
        self.holds = HoldsPanel(self)
        self.triggers = TriggersPanel(self)
        self.log = LogPanel(self)
        self.changes = ChangesPanel(self)
        left, right, bottom = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea,
                               Qt.DockWidgetArea.BottomDockWidgetArea)
        self.docks: dict[str, QDockWidget] = {
            "Palette": self._dock("Palette", self.palette_widget, left),
            "Properties": self._dock("Properties", self.properties, right),
            "Problems": self._dock("Problems", self.problems, bottom),
            "Runs": self._dock("Runs", self.runs, bottom),
            "Triggers": self._dock("Triggers", self.triggers, bottom),
            "Approvals": self._dock("Approvals", self.approvals, bottom),
            "Holds & budgets": self._dock("Holds & budgets", self.holds, bottom),
            "Log": self._dock("Log", self.log, bottom),
            "Changes": self._dock("Changes", self.changes, right),
        }
        self.docks["Changes"].hide()  # shown by Compare with version…
        self.docks["Properties"].raise_()
        self.comparisons = Comparisons(self.tabs, self.changes, self.docks["Changes"])
        for name in ("Runs", "Triggers", "Approvals", "Holds & budgets", "Log"):
            self.tabifyDockWidget(self.docks["Problems"], self.docks[name])
        self.docks["Problems"].raise_()
        self.setCorner(Qt.Corner.BottomLeftCorner, left)
        self.setCorner(Qt.Corner.BottomRightCorner, right)
        from app.dock_widths import BottomDockHeight, SideDockWidths  # docks that follow the window's size

        self.side_dock_widths = SideDockWidths(self, {self.docks["Palette"]: 210, self.docks["Properties"]: 360})
        self.bottom_dock_height = BottomDockHeight(self, self.docks["Problems"])

    def _handlers(self) -> dict[str, Callable[[], object]]:
        canvas_commands: dict[str, Callable[[], object]] = {
            item.id: partial(self.run_canvas_command, item.id) for item in action_specs.ACTIONS if item.canvas
        }
        return {
            "new": self.new_flow,
            "open": self.open_dialog,
            "save": self.save,
            "save_as": self.save_as,
            "close_tab": lambda: self.close_tab(self.tabs.currentIndex()),
            "settings": self.show_settings,
            "quit": self.close,
            "undo": self.undo,
            "redo": self.redo,
            "validate": self.validate,
            "publish": self.publish,
            "run": self.run_flow,
            "run_tests": self.run_flow_tests,
            "live": self.toggle_live,
            "versions": self.show_versions,
            "compare": self.compare_with_version,
            "next_change": lambda: self.comparisons.step(1),
            "previous_change": lambda: self.comparisons.step(-1),
            "flow_properties": self.show_flow_properties,
            "triggers": self.show_triggers,
            "theme_system": lambda: self.set_theme("system"),
            "theme_light": lambda: self.set_theme("light"),
            "theme_dark": lambda: self.set_theme("dark"),
            "shortcuts": self.show_shortcuts,
            "about": self.show_about,
            **canvas_commands,
        }

    def run_canvas_command(self, name: str) -> None:
        """An Edit menu entry: the current canvas's own command (what its key does there)."""
        editor = self.tabs.current_editor()
        if editor is not None:
            editor.view.run_command(name)

    def _build_recent_menu(self) -> None:
        file_menu = self.menus["&File"]
        self.recent_menu = QMenu("Open &Recent", self)
        self.recent_menu.setObjectName("recentMenu")
        self.examples_menu = QMenu("Open E&xample", self)
        for name in example_names():
            example = self.examples_menu.addAction(name.removesuffix(".flow.json"))
            example.triggered.connect(lambda _checked=False, n=name: self.open_example(n))
        entries = file_menu.actions()
        after_open = entries[entries.index(self.actions_by_id["open"]) + 1]
        file_menu.insertMenu(after_open, self.recent_menu)
        file_menu.insertMenu(after_open, self.examples_menu)
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        self._fill_recent_menu()
        view_menu = self.menus["&View"]
        view_menu.addSeparator()
        panels = view_menu.addMenu("&Panels")
        for dock in self.docks.values():
            panels.addAction(dock.toggleViewAction())

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        files = self.settings.recent_files()
        for path in files:
            entry = self.recent_menu.addAction(Path(path).name)
            entry.setToolTip(path)
            entry.triggered.connect(lambda _checked=False, p=path: self.open_file(Path(p)))
        if not files:
            self.recent_menu.addAction("(no recent files)").setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear list", self._clear_recent)

    def _clear_recent(self) -> None:
        self.settings.clear_recent_files()
        self._fill_recent_menu()

    def _build_theme_group(self) -> None:
        group = QActionGroup(self)
        group.setExclusive(True)
        for mode in ("system", "light", "dark"):
            group.addAction(self.actions_by_id[f"theme_{mode}"])
        self.actions_by_id[f"theme_{self.settings.theme}"].setChecked(True)

    # ----- layout persistence -----------------------------------------------------

    def restore_layout(self) -> None:
        geometry, state = self.settings.window_state()
        if geometry:
            self.restoreGeometry(QByteArray(geometry))
        if state and self.restoreState(QByteArray(state)):
            share = self.settings.bottom_dock_share
            if share is not None:
                self.bottom_dock_height.keep_share(share)
            else:
                self.bottom_dock_height.keep_current()

    def save_layout(self) -> None:
        self.settings.save_window_state(bytes(self.saveGeometry().data()), bytes(self.saveState().data()))
        self.settings.bottom_dock_share = self.bottom_dock_height.current_share()
        self.settings.sync()

    # ----- documents ----------------------------------------------------------------

    @property
    def document(self) -> FlowDocument | None:
        return self.tabs.current_document()

    def add_document(self, document: FlowDocument) -> None:
        window = weakref.ref(self)  # the document keeps the check; a strong reference back would make a cycle
        document.extra_checks.append(budget_check(lambda: (w.known_budgets if (w := window()) is not None
                                                           else None)))
        editor = self.tabs.add_document(document)
        self._current_document_changed(document)
        # Once laid out, frame the whole flow (the view's size is only known after the first layout).
        QTimer.singleShot(0, editor.view.fit_selection_or_all)

    def new_flow(self) -> FlowDocument:
        """An empty flow with an id no open or published flow has (untitled, untitled-2, ...); its id follows
        its name until the id is set by hand."""
        from canvas.document import FlowDocument, empty_flow
        from canvas.flow_header import unique_id

        flow_id = unique_id("untitled", self.taken_ids_for(None).all())
        number = flow_id.removeprefix("untitled").removeprefix("-")
        document = FlowDocument.from_flow(empty_flow(flow_id, f"Untitled {number}".strip()))
        document.id_follows_name = True
        self.add_document(document)
        return document

    def taken_ids(self) -> TakenIds:
        """Ids in use by flows other than the current one (the flow panel checks its id against them)."""
        return self.taken_ids_for(self.document)

    def taken_ids_for(self, document: FlowDocument | None) -> TakenIds:
        """Ids in use by flows other than `document`: open drafts and published flows, less the published
        history `document` itself continues."""
        version_views = set(self.engine.version_documents.values()) if self.engine is not None else set()
        open_ids = {
            other.flow_ref().id: self.tabs.tab_name(index)
            for index, other in enumerate(self.tabs.documents())
            if other is not document and other not in version_views
        }
        history = document.history_id if document is not None else None
        return TakenIds(open_ids, self.published_ids - {history} if history else self.published_ids)

    def set_known_budgets(self, names: set[str] | frozenset[str]) -> None:
        """The engine's budget names as just read; open flows are checked again when they changed."""
        known = frozenset(names)
        if known == self.known_budgets:
            return
        self.known_budgets = known
        for document in self.tabs.documents():
            document.validate_now()

    def refresh_published_ids(self) -> None:
        if self.bridge is None or not self.bridge.available:
            return

        def done(ids: set[str] | None, error: BaseException | None) -> None:
            if error is None and ids is not None:
                self.published_ids = frozenset(ids)
                self.properties.flow_panel.refresh()

        self.bridge.list_flow_ids(done)

    def open_dialog(self) -> None:
        path = self.choose_open_path()
        if path is not None:
            self.open_file(path)

    def open_file(self, path: Path) -> FlowDocument | None:
        """Open (or switch to) a flow file; problems in it show in Problems, a non-flow is refused."""
        from canvas.document import FlowDocument

        existing = self.tabs.index_of_path(path)
        if existing >= 0:
            self.tabs.setCurrentIndex(existing)
            return self.tabs.document_at(existing)
        try:
            document = FlowDocument.open(path)
        except (OSError, FlowLoadError) as exc:
            self.log.append(f"Could not open {path}: {exc}")
            QMessageBox.warning(self, "Cannot open flow", f"{path} cannot be opened:\n\n{exc}")
            return None
        self.add_document(document)
        self.settings.add_recent_file(path)
        self.settings.last_folder = str(Path(path).resolve().parent)
        self._fill_recent_menu()
        self.statusBar().showMessage(f"Opened {path.name}", STATUS_MESSAGE_MS)
        return document

    def open_example(self, name: str) -> FlowDocument:
        """Open a bundled example as a new, unsaved flow (so Save asks where to put it); calls it makes to
        outside services go to the stand-ins of the app's provider simulator."""
        from canvas.document import FlowDocument

        document = FlowDocument.from_flow(example_flow(name, self.simulator_root()))
        document.history_id = document.flow_ref().id  # an example is that flow: publishing it continues its history
        self.add_document(document)
        return document

    def simulator_root(self) -> str:
        """Where the app's provider simulator listens (`http://127.0.0.1:8765`), once started or as preferred."""
        simulator = self.bridge.simulator if self.bridge is not None else None
        if simulator is not None and simulator.url:
            return simulator.url.removesuffix("/v1")
        return f"http://{SIMULATOR_HOST}:{preferred_simulator_port(self.bridge.settings if self.bridge else None)}"

    def save(self) -> bool:
        document = self.document
        if document is None:
            return False
        if document.path is None:
            return self.save_as()
        return self._write(document, Path(document.path))

    def save_as(self) -> bool:
        document = self.document
        if document is None:
            return False
        path = self.choose_save_path(document)
        if path is None:
            return False
        return self._write(document, path)

    def _write(self, document: FlowDocument, path: Path) -> bool:
        try:
            written = document.save(path)
        except OSError as exc:
            QMessageBox.warning(self, "Not saved", f"{path} could not be written: {exc}")
            return False
        self.settings.add_recent_file(written)
        self.settings.last_folder = str(Path(written).resolve().parent)
        self._fill_recent_menu()
        self.tabs.refresh_title(document)
        self.statusBar().showMessage(f"Saved {Path(written).name}", STATUS_MESSAGE_MS)
        return True

    def close_tab(self, index: int) -> bool:
        """Close a tab, asking to save unsaved changes; False when the user cancelled."""
        if not 0 <= index < self.tabs.count():
            return False
        document = self.tabs.document_at(index)
        if document.is_dirty():
            answer = self.ask_to_save(document)
            if answer == QMessageBox.StandardButton.Cancel:
                return False
            if answer == QMessageBox.StandardButton.Save:
                self.tabs.setCurrentIndex(index)
                if not self.save():
                    return False
        self.tabs.remove_at(index)
        if self.tabs.count() == 0:
            self._current_document_changed(None)
        return True

    def _ask_to_save_dialog(self, document: FlowDocument) -> SaveAnswer:
        return QMessageBox.question(
            self, "Unsaved changes", save_question(document, self.tabs.tab_name(self.tabs.index_of(document))),
            QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Save,
        )

    def _open_path_dialog(self) -> Path | None:
        chosen, _filter = QFileDialog.getOpenFileName(self, "Open flow", self.settings.last_folder, FLOW_FILE_FILTER)
        return Path(chosen) if chosen else None

    def _save_path_dialog(self, document: FlowDocument) -> Path | None:
        name = f"{document.flow_ref().id}.flow.json"
        folder = self.settings.last_folder
        suggested = str(document.path) if document.path else str(Path(folder) / name) if folder else name
        chosen, _filter = QFileDialog.getSaveFileName(self, "Save flow as", suggested, FLOW_FILE_FILTER)
        if not chosen:
            return None
        path = Path(chosen)
        return path if path.name.endswith(".json") else path.with_name(path.name + ".flow.json")

    # ----- following the current document --------------------------------------

    def _current_document_changed(self, document: FlowDocument | None) -> None:
        previous = getattr(self, "_watched_document", None)
        if previous is not None and previous is not document:
            for signal, slot in ((previous.diagnostics_changed, self.problems.set_diagnostics),
                                 (previous.header_changed, self._header_changed),
                                 (previous.undo_stack.canUndoChanged, self._update_edit_actions),
                                 (previous.undo_stack.canRedoChanged, self._update_edit_actions)):
                try:
                    signal.disconnect(slot)
                except (RuntimeError, TypeError):
                    pass
        self._watched_document = document
        self.properties.set_document(document)
        self.comparisons.document_switched(document)
        self._show_start_page(self.tabs.count() == 0)
        if document is not None:
            document.diagnostics_changed.connect(self.problems.set_diagnostics)
            document.header_changed.connect(self._header_changed)
            document.undo_stack.canUndoChanged.connect(self._update_edit_actions)
            document.undo_stack.canRedoChanged.connect(self._update_edit_actions)
            self.problems.set_diagnostics(document.diagnostics())
        else:
            self.problems.show_no_flow()
        self._show_window_title()
        if self._hint_document is not None:
            self.hint_label.setVisible(self._hint_document is document)
        if self.engine is not None and self.engine.live_on:
            self.engine.repaint_live()
        canvas_ids = tuple(item.id for item in action_specs.ACTIONS if item.canvas)
        for action_id in ("save", "save_as", "close_tab", "validate", "publish", "run", "live", "versions",
                          "flow_properties", "compare", "next_change", "previous_change", *canvas_ids):
            self.actions_by_id[action_id].setEnabled(document is not None)
        self._update_edit_actions()

    def _show_start_page(self, shown: bool) -> None:
        if shown:
            self.start_page.show_recent(self.settings.recent_files())
        self.centre.setCurrentWidget(self.start_page if shown else self.tabs)

    def _show_window_title(self) -> None:
        document = self.document
        flow = document.flow_ref() if document is not None else None
        self.setWindowTitle(f"{flow.name or flow.id} — Lockgate" if flow is not None else "Lockgate")

    def _header_changed(self) -> None:
        self._show_window_title()
        self._refresh_triggers()

    def show_flow_properties(self) -> None:
        """Flow ▸ Properties: the flow panel, with the selection cleared so it stays shown."""
        editor = self.tabs.current_editor()
        if editor is None:
            return
        editor.view.flow_scene.clearSelection()
        self.properties.show_node(None)
        self.docks["Properties"].show()
        self.docks["Properties"].raise_()
        self.properties.flow_panel.focus_name()

    def _update_edit_actions(self, *_args: object) -> None:
        document = self.document
        try:
            can_undo = document is not None and document.undo_stack.canUndo()
            can_redo = document is not None and document.undo_stack.canRedo()
        except RuntimeError:  # the tab's document is being torn down
            can_undo = can_redo = False
        self.actions_by_id["undo"].setEnabled(can_undo)
        self.actions_by_id["redo"].setEnabled(can_redo)

    def undo(self) -> None:
        if self.document is not None:
            self.document.undo_stack.undo()

    def redo(self) -> None:
        if self.document is not None:
            self.document.undo_stack.redo()

    def reveal_node(self, node_id: str) -> None:
        """Select and centre `node_id` in the current canvas (from Problems or Runs)."""
        editor = self.tabs.current_editor()
        if editor is None or self.document is None or self.document.node(node_id) is None:
            return
        editor.view.select_node(node_id)
        editor.view.center_on_node(node_id)
        self.properties.show_node(node_id)

    def _add_from_palette(self, type_name: str) -> None:
        editor = self.tabs.current_editor()
        if editor is None:
            self.new_flow()
            editor = self.tabs.current_editor()
        if editor is not None:
            node_id = editor.add_node_at_centre(type_name)
            editor.view.select_node(node_id)

    def _problem_counts_changed(self, errors: int, warnings: int) -> None:
        title = "Problems" + (f" ({errors + warnings})" if errors + warnings else "")
        self.docks["Problems"].setWindowTitle(title)

    def _approval_count_changed(self, pending: int) -> None:
        self.docks["Approvals"].setWindowTitle("Approvals" + (f" ({pending})" if pending else ""))

    def _canvas_status(self, text: str) -> None:
        """A canvas's wire hint or refusal (e.g. "… is a trigger and takes no input"); an empty one clears."""
        if text:
            self.statusBar().showMessage(text, STATUS_MESSAGE_MS)
        else:
            self.statusBar().clearMessage()

    # ----- flow commands ------------------------------------------------------------

    def run_flow_tests(self) -> None:
        """Flow ▸ Run tests: replay the flow's recorded tests in-process; failing ones are listed in Problems."""
        from app.flow_tests import run_document_tests

        document = self.document
        if document is None:
            return
        message, _suite = run_document_tests(document)
        self.docks["Problems"].show()
        self.docks["Problems"].raise_()
        self.statusBar().showMessage(message, STATUS_MESSAGE_MS)

    def validate(self) -> None:
        document = self.document
        if document is None:
            return
        diagnostics = document.validate_now()
        self.docks["Problems"].show()
        self.docks["Problems"].raise_()
        errors = sum(1 for d in diagnostics if d.severity == "error")
        warnings = len(diagnostics) - errors
        if not diagnostics:
            self.statusBar().showMessage("Valid: no problems found.", STATUS_MESSAGE_MS)
        else:
            self.statusBar().showMessage(f"{counted(errors, 'error')}, {counted(warnings, 'warning')}: see Problems.",
                                         STATUS_MESSAGE_MS)

    def publish(self, then: Callable[[], None] | None = None, document: FlowDocument | None = None) -> None:
        """Validate, then publish `document` (default: the current flow), asking first when its id is another
        flow's; `then()` runs once it is published."""
        document = document or self.document
        if document is None:
            return
        diagnostics = document.validate_now()
        if has_errors(diagnostics):
            self.docks["Problems"].show()
            self.docks["Problems"].raise_()
            errors = sum(1 for d in diagnostics if d.severity == "error")
            self.statusBar().showMessage(
                f"Publish refused: {counted(errors, 'error')} in {document.flow_ref().id}; fix "
                f"{'it' if errors == 1 else 'them'} (see Problems) and publish again.", STATUS_MESSAGE_MS)
            return
        if not self._needs_engine("Publish") or self.engine is None or self.bridge is None:
            return
        flow_id = document.flow_ref().id
        if document.history_id == flow_id:
            self.engine.publish(document, then)
            return

        def versions_read(versions: list[FlowVersion] | None, error: BaseException | None) -> None:
            if self.engine is None or self.tabs.index_of(document) < 0:
                return
            if error is None and versions and not self.ask_publish_onto_history(document, len(versions)):
                self.statusBar().showMessage(
                    f"Not published: {flow_id} is another flow's id. Give this flow its own id in its properties "
                    "(Flow ▸ Properties).", STATUS_MESSAGE_MS)
                return
            self.engine.publish(document, then)

        self.bridge.list_versions(flow_id, versions_read)

    def _publish_onto_history_dialog(self, document: FlowDocument, versions: int) -> bool:
        flow = document.flow_ref()
        answer = QMessageBox.question(
            self, "Publish onto an existing flow?",
            f"A flow with the id {flow.id} is published already ({versions} version(s)). Publishing "
            f"\"{flow.name or flow.id}\" adds version {versions + 1} to that flow's history: its runs, "
            "triggers and counters.\n\nTo publish a separate flow instead, cancel and change the id in the flow's "
            "properties.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Yes

    def _published(self, flow_id: str, _version: int) -> None:
        self.published_ids = self.published_ids | {flow_id}
        self.properties.flow_panel.refresh()
        self._refresh_triggers()

    def run_flow(self) -> None:
        """Run the published flow; a draft that is not published, or differs from its latest version, is
        offered "Publish and run" first."""
        document = self.document
        if document is None or not self._needs_engine("Run") or self.engine is None or self.bridge is None:
            return
        from engine.publish import content_hash

        flow_id = document.flow_ref().id
        draft_hash = content_hash(document.text())

        def versions_read(versions: list[FlowVersion] | None, error: BaseException | None) -> None:
            if self.tabs.index_of(document) < 0:
                return
            if error is not None:
                self.statusBar().showMessage(f"Run of {flow_id} not started: {error}", STATUS_MESSAGE_MS)
                return
            # Versions of another flow that happens to have this id are not this draft's to run.
            latest = versions[-1] if versions and document.history_id == flow_id else None
            if latest is None or latest.content_hash != draft_hash:
                choice = self.ask_publish_before_run(document, int(latest.version) if latest else None)
                if choice == "publish_and_run":
                    self.publish(lambda: self._ask_inputs_and_start(document), document)
                    return
                if choice != "run_published" or latest is None:
                    self.statusBar().showMessage(f"Not run: {flow_id} has no published version with this draft.",
                                                 STATUS_MESSAGE_MS)
                    return
            self._ask_inputs_and_start(document)

        self.bridge.list_versions(flow_id, versions_read)

    def _ask_inputs_and_start(self, document: FlowDocument) -> None:
        if self.engine is None or self.tabs.index_of(document) < 0:
            return
        flow = document.flow()
        inputs = self.ask_run_inputs(flow)
        if inputs is not None:
            self.engine.start_run(flow.id, inputs, document.text())

    def _publish_before_run_dialog(self, document: FlowDocument, version: int | None) -> RunChoice:
        flow = document.flow_ref()
        box = QMessageBox(self)
        box.setWindowTitle("Publish first?")
        box.setIcon(QMessageBox.Icon.Question)
        if version is None:
            box.setText(f"{flow.name or flow.id} is not published yet. Runs start from a published version.")
        else:
            box.setText(f"This draft of {flow.name or flow.id} has changes that are not published. A run now "
                        f"starts v{version}, without them.")
        publish = box.addButton("Publish and run", QMessageBox.ButtonRole.AcceptRole)
        run = box.addButton(f"Run v{version} as published", QMessageBox.ButtonRole.ActionRole) if version else None
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(publish)
        box.exec()
        clicked = box.clickedButton()
        if clicked is publish:
            return "publish_and_run"
        if run is not None and clicked is run:
            return "run_published"
        return "cancel"

    def _run_inputs_dialog(self, flow: Flow) -> dict[str, object] | None:
        from app.run_dialog import RunInputsDialog

        dialog = RunInputsDialog(flow, parent=self)
        return dialog.values() if dialog.exec() == QDialog.DialogCode.Accepted else None

    def show_versions(self) -> None:
        if self.document is not None and self._needs_engine("Versions") and self.engine is not None:
            self.engine.show_versions(self.document.flow_ref().id)

    def compare_with_version(self) -> None:
        """Ask which published version to compare the draft with, then draw the changes."""
        document = self.document
        if document is None or not self._needs_engine("Compare") or self.bridge is None:
            return
        flow_id = document.flow_ref().id

        def versions_read(versions: list[FlowVersion] | None, error: BaseException | None) -> None:
            if error is not None:
                self.statusBar().showMessage(f"Versions of {flow_id} cannot be read: {error}", STATUS_MESSAGE_MS)
                return
            numbers = [version.version for version in versions or []]
            if not numbers:
                self.statusBar().showMessage(f"{flow_id} has no published version to compare with; publish it first.",
                                             STATUS_MESSAGE_MS)
                return
            chosen = self.ask_compare_version(flow_id, numbers)
            if chosen is not None and self.bridge is not None:
                self.bridge.get_version(flow_id, chosen, lambda flow, error: version_read(chosen, flow, error))

        def version_read(number: int, flow: Flow | None, error: BaseException | None) -> None:
            if error is not None or flow is None:
                self.statusBar().showMessage(f"Version {number} of {flow_id} cannot be read: {error}",
                                             STATUS_MESSAGE_MS)
                return
            if self.document is document:
                self.comparisons.start(flow, f"v{number}")

        self.bridge.list_versions(flow_id, versions_read)

    def open_version(self, flow_id: str, version: int) -> None:
        """Open published version `version` of `flow_id` in a new tab, as an unsaved draft of that flow."""
        from canvas.document import FlowDocument

        if self.bridge is None:
            return

        def read(flow: Flow | None, error: BaseException | None) -> None:
            if error is not None or flow is None:
                self.statusBar().showMessage(f"Version {version} of {flow_id} cannot be read: {error}",
                                             STATUS_MESSAGE_MS)
                return
            document = FlowDocument.from_flow(flow)
            document.history_id = flow_id
            self.add_document(document)
            self.statusBar().showMessage(f"Opened {flow_id} v{version} (unsaved; publishing it unchanged makes no "
                                         "new version)", STATUS_MESSAGE_MS)

        self.bridge.get_version(flow_id, version, read)

    def _choose_version_dialog(self, flow_id: str, numbers: list[int]) -> int | None:
        labels = [f"v{number}" for number in reversed(numbers)]
        label, ok = QInputDialog.getItem(self, "Compare with version", f"Compare the draft of {flow_id} with:",
                                         labels, 0, False)
        return int(label[1:]) if ok and label else None

    def toggle_live(self) -> None:
        wanted = self.actions_by_id["live"].isChecked()
        if wanted and not self._needs_engine("Live mode"):
            self.actions_by_id["live"].setChecked(False)
            return
        if self.engine is not None:
            self.engine.set_live(wanted)

    def _needs_engine(self, what: str) -> bool:
        if self.bridge is not None and self.bridge.available:
            return True
        reason = self.bridge.unavailable_reason if self.bridge is not None else "no engine is attached"
        message = f"{what} needs the engine: {reason or 'it is not running'}."
        self.statusBar().showMessage(message, STATUS_MESSAGE_MS)
        self.log.append(message)
        return False

    # ----- engine state ---------------------------------------------------------------

    def _engine_state_changed(self, state: str) -> None:
        self.engine_label.setText(f"Engine: {state}")
        if state == "running":
            self.refresh_published_ids()
        if state != "running":
            text = engine_state_text(state, self.bridge.unavailable_reason if self.bridge is not None else "")
            self.runs.set_unavailable(text)
            self.approvals.set_unavailable(text)
            self.holds.set_unavailable(text)

    # ----- view, settings, help -----------------------------------------------------

    def set_theme(self, mode: ThemeMode) -> None:
        from app.theme import apply_app_theme

        self.settings.theme = mode
        self.settings.sync()
        self.actions_by_id[f"theme_{mode}"].setChecked(True)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_app_theme(app, mode)

    def _theme_changed(self, _theme: object = None) -> None:
        from app.toolbar_icons import apply_toolbar_icons

        apply_toolbar_icons(self.actions_by_id)
        self.tabs.refresh_close_buttons()

    def show_settings(self, tab: str | None = None, budget: str | None = None) -> None:
        """The Settings dialog, on `tab` (or on the Budgets tab with `budget` selected, added if missing)."""
        from app.settings_dialog import SettingsDialog

        dialog = SettingsDialog(self.settings, self, bridge=self.bridge)
        if budget is not None:
            dialog.show_budget(budget)
        elif tab is not None:
            dialog.show_tab(tab)
        self.settings_dialog = dialog
        if self.run_settings_dialog(dialog) != QDialog.DialogCode.Accepted:
            return
        self.approvals.set_decider(self.settings.your_name)
        self.log.append("Settings saved; data folder, Redis, database and provider changes apply at the next start "
                        "(providers are written to providers.json in the data folder)")
        if self.bridge is not None and self.bridge.available:
            budgets = self.settings.budgets()

            def applied(_count: object, error: BaseException | None) -> None:
                self.log.append(f"Budgets not applied: {error}" if error else f"{len(budgets)} budget(s) applied")
                if self.engine is not None:
                    self.engine.refresh_money()

            self.bridge.apply_budgets(budgets, applied)

    def show_triggers(self) -> None:
        """Bring the Triggers dock forward and read the current flow's triggers now."""
        self.docks["Triggers"].show()
        self.docks["Triggers"].raise_()
        self._refresh_triggers()

    def _refresh_triggers(self) -> None:
        if self.trigger_watch is not None:
            self.trigger_watch.refresh()

    def show_hint(self, text: str, document: FlowDocument | None = None) -> None:
        """A hint in the status bar; with `document`, shown only while that flow is the one in front."""
        self.hint_label.setText(text)
        self._hint_document = document
        self.hint_label.setVisible(document is None or document is self.document)

    def show_shortcuts(self) -> None:
        dialog = QDialog(self)
        dialog.setWindowTitle("Keyboard shortcuts")
        from canvas.view import BINDINGS

        canvas_rows = [
            (f"{binding.text.rstrip('…')} (canvas)",
             ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in binding.sequences()))
            for binding in BINDINGS
        ]
        rows = [*action_specs.shortcut_table(), *canvas_rows]
        table = QTableWidget(len(rows), 2, dialog)
        table.setObjectName("shortcutsTable")
        table.setHorizontalHeaderLabels(["Command", "Keys"])
        table.verticalHeader().hide()
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        for row, (command, keys) in enumerate(rows):
            table.setItem(row, 0, QTableWidgetItem(command))
            table.setItem(row, 1, QTableWidgetItem(keys))
        layout = QVBoxLayout(dialog)
        layout.addWidget(table)
        dialog.resize(460, 520)
        self.shortcuts_dialog = dialog
        dialog.show()

    def show_about(self) -> None:
        QMessageBox.about(self, "About Lockgate",
                          f"Lockgate {__version__}\nDurable automation flows that wait without losing a run, "
                          "a cent or a decision.")

    # ----- first start and quitting -------------------------------------------------

    def first_start(self) -> None:
        """Open the triage example and say what to try."""
        self.show_hint(FIRST_START_HINT, self.open_example(FIRST_START_EXAMPLE))
        self.settings.first_start_done = True
        self.settings.sync()

    def reopen_last_files(self) -> int:
        """Open the flow files that were open at the last quit (those still there); returns how many opened."""
        paths, current = self.settings.open_files()
        opened: list[FlowDocument] = []
        front: FlowDocument | None = None
        for index, path in enumerate(paths):
            if not Path(path).is_file():
                continue
            document = self.open_file(Path(path))
            if document is not None:
                opened.append(document)
                if index == current:
                    front = document
        if front is not None:
            self.tabs.setCurrentIndex(self.tabs.index_of(front))
        return len(opened)

    def _remember_open_files(self, documents: list[FlowDocument], current: FlowDocument | None) -> None:
        version_views = set(self.engine.version_documents.values()) if self.engine is not None else set()
        kept = [d for d in documents if d.path is not None and d not in version_views]
        front = kept.index(current) if current in kept else 0
        self.settings.set_open_files([Path(str(d.path)) for d in kept], front)

    def closeEvent(self, event: QCloseEvent) -> None:
        documents, current = list(self.tabs.documents()), self.document
        for index in reversed(range(self.tabs.count())):
            if self.tabs.document_at(index).is_dirty() and not self.close_tab(index):
                event.ignore()
                return
        self._remember_open_files(documents, current)
        self.save_layout()
        if self.bridge is not None:
            self.bridge.stop()
        event.accept()


def save_question(document: FlowDocument, name: str) -> str:
    """The close prompt's question: the flow's name (as its tab says it), and its file when it has one."""
    if document.path is None:
        return f"Save the changes to {name} before closing? It has not been saved to a file yet."
    path = Path(document.path)
    if path.name in name:
        return f"Save the changes to {name} before closing?\n\nFile: {path}"
    return f"Save the changes to {name} ({path.name}) before closing?\n\nFile: {path}"


def engine_state_text(state: str, reason: str) -> str:
    """What the engine panels say while the engine does not run, each thing said once."""
    if state == "starting":
        return "The engine is starting; runs, approvals and holds show here once it runs."
    if not reason or reason.lower().startswith(f"the engine is {state}"):
        return f"The engine is {state}."
    if reason.lower().startswith("the engine"):
        return reason[0].upper() + reason[1:].rstrip(".") + "."
    return f"The engine is {state}: {reason.rstrip('.')}."
