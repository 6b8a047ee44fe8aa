"""Connects the engine bridge to the panels and the canvas: Publish, Run, the Runs / Holds panels, live mode.

Every engine call goes through the bridge (engine thread); refreshes are coalesced
with single-shot timers so a burst of projector batches costs one query, and live
overlays are repainted by the canvas at most once per frame.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QDialog, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout

from app.approval_badges import approval_row, quorum_badges
from app.bridge import EngineBridge
from app.budget_check import BudgetDiagnostic
from app.engine_messages import run_refusal, without_cli_hints
from app.live import (
    LiveState,
    row_at_place,
    row_of_place,
    run_end_text,
    run_marks,
    run_path,
    run_row,
    waiting_text,
)
from app.panels.rows import BudgetRow, HoldRow, local_time
from app.readable import counted, short_run_id
from app.waiting import run_waiting
from engine.runtime.transitions import TERMINAL

if TYPE_CHECKING:
    from app.run_details import RunDetails
    from app.window import MainWindow
    from canvas.document import FlowDocument
    from canvas.editor import FlowEditor
    from engine.flow import Flow
    from engine.flowtest.model import FlowTest
    from engine.money.ledger import BudgetState
    from engine.read_models import (
        Approval,
        CancelledRun,
        Decision,
        FlowVersion,
        Hold,
        PublishedFlow,
        Run,
        RunSummary,
        StartedRun,
    )
    from engine.runtime.live_change import LiveChange

    PublishedVersion = tuple[PublishedFlow, Flow]
    """A published version as the bridge reads it: its record and its flow."""

REFRESH_DELAY_MS = 150
LIVE_RUNS_REFRESH_MS = 1000
"""While live changes stream in, the full list of runs (cost, finish time) is read at most this often."""
COUNTDOWN_MS = 1000
RUN_FAILED_MS = 30_000
"""How long the status bar says a run started from the window failed (a success: the usual 8 s)."""
APPROVAL_EVENTS = frozenset({"approval_requested", "approval_decided", "approval_expired", "run_parked",
                             "run_resumed", "run_succeeded", "run_failed", "run_cancelled"})


def _micros(value: int) -> float:
    return value / 1_000_000


class EngineController(QObject):
    """Owns what the window shows of the engine; the window forwards Publish, Run and Live here."""

    published = Signal(str, int)
    """(flow id, version) after a successful publish."""
    run_started = Signal(str)

    def __init__(self, window: MainWindow, bridge: EngineBridge) -> None:
        super().__init__(window)
        self.window = window
        self.bridge = bridge
        self.live = LiveState()
        self.live_on = False
        self.selected_run: str | None = None
        self.clock: Callable[[], float] = time.time
        self._runs_timer = self._single_shot(self.refresh_runs)
        self._live_runs_timer = self._single_shot(self.refresh_runs)
        self._live_runs_timer.setInterval(LIVE_RUNS_REFRESH_MS)
        self._money_timer = self._single_shot(self.refresh_money)
        self._approvals_timer = self._single_shot(self.refresh_approvals)
        self._live_timer = self._single_shot(self.repaint_live)
        self._countdown = QTimer(self)
        self._countdown.setInterval(COUNTDOWN_MS)
        self._countdown.timeout.connect(self.tick)
        window.runs.now = lambda: datetime.fromtimestamp(self.clock(), UTC)
        self._run_editor: tuple[str, FlowEditor] | None = None
        self.started_here: set[str] = set()
        """Runs started from this window (Run, Rerun from here) whose end is not announced yet."""
        self.run_started.connect(self._follow_to_end)
        """(run id, editor) the followed run is drawn on: it stays there while the draft is edited."""
        bridge.state_changed.connect(self._state_changed)
        bridge.runs_changed.connect(self._runs_timer.start)
        bridge.holds_changed.connect(self._money_timer.start)
        bridge.approvals_changed.connect(self._approvals_timer.start)
        bridge.live_changes.connect(self._live_changes)
        window.runs.run_selected.connect(self.select_run)
        window.runs.run_opened.connect(self.open_run)
        from app.rerun_flow import RerunFlow

        self.reruns = RerunFlow(self)
        window.runs.rerun_requested.connect(self.reruns.ask)
        window.approvals.decision_made.connect(self.decide)
        self.details: RunDetails | None = None
        self.version_documents: dict[tuple[str, int], FlowDocument] = {}
        self.published_versions: dict[tuple[str, int], PublishedVersion] = {}
        """(PublishedVersion, Flow) by (flow id, version), read once: a published version never changes, and
        the followed run is re-read every second. Cleared when the engine stops (its data folder may change)."""
        self.versions_dialog: QDialog | None = None
        self.ask_test_target: Callable[[str, Path | None], tuple[str, Path] | None] = self._ask_test_target
        """Save as test…: (flow id, the open flow's folder) -> (test name, folder), or None; tests replace it."""
        self.ask_replace_test: Callable[[Path], bool] = self._ask_replace_test
        """Save as test… onto a test file already there: whether to replace it; tests replace it."""

    def _single_shot(self, slot: Callable[[], None]) -> QTimer:
        timer = QTimer(self)
        timer.setSingleShot(True)
        timer.setInterval(REFRESH_DELAY_MS)
        timer.timeout.connect(slot)
        return timer

    def _state_changed(self, state: str) -> None:
        if state == "running":
            self._countdown.start()
            self.refresh_runs()
            self.refresh_money()
            self.refresh_approvals()
        else:
            self._countdown.stop()
            self.published_versions.clear()

    # ----- publish and run ---------------------------------------------------------------

    def publish(self, document: FlowDocument | None = None, then: Callable[[], None] | None = None) -> None:
        """Publish `document` (default: the current one); on success its draft continues that flow's history
        and `then()` runs. The engine's budgets are read first, so Problems warns of a missing one."""
        document = document or self.window.document
        if document is None:
            return
        flow = document.flow()

        def done(version: PublishedFlow | None, error: BaseException | None) -> None:
            if error is not None:
                diagnostics = getattr(error, "diagnostics", None)
                if diagnostics is not None:
                    self.window.problems.set_diagnostics(diagnostics)
                    self.window.docks["Problems"].raise_()
                self._say(f"Publish of {flow.id} refused: {without_cli_hints(str(error))}")
                return
            if version is None:
                return
            document.history_id = flow.id
            document.id_follows_name = False
            checked = document.validate_now()
            missing = [d for d in checked if isinstance(d, BudgetDiagnostic)]
            if missing:
                names = ", ".join(sorted({f'"{d.budget}"' for d in missing}))
                self._say(f"{flow.id} v{version.version} published, but the engine has no budget {names}: runs "
                          "will be refused until it does (add it in Settings ▸ Budgets; see Problems)")
                self.window.docks["Problems"].show()
                self.window.docks["Problems"].raise_()
            elif warnings := [d for d in checked if d.severity != "error"]:
                self._say(f"{flow.id} v{version.version} published with {counted(len(warnings), 'warning')} "
                          "(see Problems)")
                self.window.docks["Problems"].show()
                self.window.docks["Problems"].raise_()
            else:
                self._say(f"{flow.id} v{version.version} published")
            self.published.emit(flow.id, version.version)
            if then is not None:
                then()

        def budgets_read(budgets: list[BudgetState] | None, error: BaseException | None) -> None:
            if error is None and budgets is not None:
                self.window.set_known_budgets({b.name for b in budgets})
            self.bridge.publish(flow, done)

        self.bridge.list_budgets(budgets_read)

    def start_run(self, flow_id: str, inputs: dict[str, object], draft_text: str | None = None) -> None:
        """Start a run of the latest published version; say so when the open draft differs from it."""

        def done(created: StartedRun | None, error: BaseException | None) -> None:
            if error is not None:
                document = self.window.document
                flow = document.flow_ref() if document is not None and document.flow_ref().id == flow_id else None
                why = (run_refusal(flow, error, self.window.known_budgets) if flow is not None
                       else without_cli_hints(str(error)))
                self._say(f"Run of {flow_id} not started: {why}")
                return
            if created is None:
                return
            started = f"Run {short_run_id(created.run_id)} of {flow_id} v{created.version} started"
            self._say(started)
            self.run_started.emit(created.run_id)
            self._runs_timer.start()
            if draft_text is not None and created.version is not None:
                self.bridge.flow_version(flow_id, created.version,
                                         lambda found, problem: compare(started, found, problem))

        def compare(started: str, found: PublishedVersion | None, error: BaseException | None) -> None:
            from engine.publish import content_hash

            differs = error is None and found is not None and draft_text is not None and (
                content_hash(draft_text) != found[0].content_hash)
            if differs:
                self._say(f"{started}; the open draft has changes that are not published, so they are not in "
                          "this run (Publish to include them)")

        self.bridge.create_run(flow_id, inputs, done, started_by=self.window.settings.your_name or None)

    def cancel_run(self, run_id: str) -> None:
        def done(status: CancelledRun | None, error: BaseException | None) -> None:
            self._say(f"Run {short_run_id(run_id)} not cancelled: {error}" if error or status is None
                      else f"Run {short_run_id(run_id)}: {status.status}")
            self._runs_timer.start()

        self.bridge.cancel_run(run_id, done)

    def _follow_to_end(self, run_id: str) -> None:
        """A run this window started: its end is said in the status bar and the Log (the list of runs, read
        now, catches a run that ended before the live change was heard)."""
        self.started_here.add(run_id)
        self._runs_timer.start()

    def _announce_end(self, run_id: str) -> None:
        """Say how a run started from this window ended: succeeded, or failed where and why."""
        self.started_here.discard(run_id)

        def done(run: Run | None, error: BaseException | None) -> None:
            if error is not None or run is None:
                self._say(f"Run {short_run_id(run_id)} ended; it cannot be read: {error or 'it does not exist'}")
                return
            text = run_end_text(run)
            self.window.statusBar().showMessage(text, 8000 if run.status == "succeeded" else RUN_FAILED_MS)
            self.window.log.append(text)

        self.bridge.get_run(run_id, done)

    # ----- runs and money ------------------------------------------------------------------

    def refresh_runs(self) -> None:
        def done(summaries: list[RunSummary] | None, error: BaseException | None) -> None:
            if error is not None or summaries is None:
                self.window.log.append(f"Runs could not be read: {error}")
                return
            for summary in summaries:
                self.live.seed_from_run(summary)
                if summary.id in self.started_here and summary.status in TERMINAL:
                    self._announce_end(summary.id)
            self.window.runs.set_runs([run_row(summary) for summary in summaries])
            self._refresh_open_run()
            if self.live_on:
                self._live_timer.start()

        if self.bridge.available:
            self.bridge.list_runs(done)

    def refresh_money(self) -> None:
        def done(result: tuple[list[BudgetState], list[Hold]] | None, error: BaseException | None) -> None:
            if error is not None or result is None:
                self.window.log.append(f"Budgets could not be read: {error}")
                return
            budgets, holds = result
            self.window.set_known_budgets({b.name for b in budgets})
            self.window.holds.set_budgets([
                BudgetRow(b.name, _micros(b.limit_micros), _micros(b.spent_micros), _micros(b.held_micros), b.period)
                for b in budgets
            ])
            self.window.holds.set_holds([
                HoldRow(h.id, h.run_id, h.node_id, _micros(h.amount_micros), h.state,
                        datetime.fromisoformat(h.expires_at),
                        _micros(h.charged_micros) if h.charged_micros is not None else None)
                for h in holds
            ])

        if self.bridge.available:
            self.bridge.money(done)

    # ----- approvals -------------------------------------------------------------------------

    def refresh_approvals(self) -> None:
        def done(pending: list[Approval] | None, error: BaseException | None) -> None:
            if isinstance(error, ImportError):
                self.window.approvals.set_unavailable(
                    f"This engine build cannot list approvals ({error}); decide them with the engine's CLI or API.")
                return
            if error is not None or pending is None:
                self.window.log.append(f"Approvals could not be read: {error}")
                return
            rows = [approval_row(a) for a in pending]
            self.window.approvals.set_approvals(rows)
            editor = self.window.tabs.current_editor()
            if editor is not None:
                editor.view.set_quorum_badges(quorum_badges(rows, editor.document.flow_ref().id, self.selected_run))

        if self.bridge.available:
            self.bridge.pending_approvals(done)

    def decide(self, approval_id: str, approved: bool, comment: str) -> None:
        """Decide as Settings ▸ General ▸ Your name; the answer goes back to the Approvals panel."""
        actor = self.window.settings.your_name
        panel = self.window.approvals

        def done(result: Decision | None, error: BaseException | None) -> None:
            if error is not None or result is None:
                text = f"Decision not sent: {without_cli_hints(str(error))}"
                panel.decision_result(approval_id, False, text)
            elif result.accepted and result.port is None:
                left = (result.required or 0) - (result.approved_count or 0)
                text = (f"Approved as {actor}: {result.approved_count} of {result.required} approved; run "
                        f"{short_run_id(str(result.run_id))} waits for {left} more.")
                panel.decision_result(approval_id, True, text, still_pending=True)
            elif result.accepted:
                text = (f"{'Approved' if approved else 'Rejected'} as {actor}: run {short_run_id(str(result.run_id))} "
                        f"continues through {result.port}.")
                panel.decision_result(approval_id, True, text)
            else:
                text = f"Not decided: {without_cli_hints(result.message)}."
                if result.reason == "not_allowed":
                    text += " If you are one of them, set Your name in Settings ▸ General (Change… here)."
                panel.decision_result(approval_id, False, text)
            self._say(text)
            self.refresh_approvals()

        self.bridge.decide_approval(approval_id, approved, actor, comment, done)

    # ----- live mode -----------------------------------------------------------------------

    def set_live(self, on: bool) -> None:
        self.live_on = on
        if on:
            self.refresh_runs()
            self.repaint_live()
        else:
            for index in range(self.window.tabs.count()):
                self.window.tabs.editor_at(index).view.clear_live()

    def _live_changes(self, changes: list[LiveChange]) -> None:
        if any(change.event in APPROVAL_EVENTS for change in changes):
            self._approvals_timer.start()
        for change in changes:
            if change.run_id in self.started_here and change.status in TERMINAL:
                self._announce_end(change.run_id)
        applied = [change for change in changes if self.live.apply_change(change)]
        self._update_run_rows(applied)
        if self.live_on and applied:
            if not self._live_timer.isActive():  # a throttle: a steady stream must still repaint
                self._live_timer.start()
            if self.selected_run and any(change.run_id == self.selected_run for change in applied):
                self.select_run(self.selected_run, focus=False)

    def _update_run_rows(self, applied: list[LiveChange]) -> None:
        """Move rows in place from the live changes (new runs get a row at once); the stored list (cost,
        start and finish times) is read within a second, by a timer later changes do not restart, so a
        steady stream still refreshes without a query per batch."""
        if not applied:
            return
        rows = self.window.runs.rows
        seen_at = datetime.now(UTC)
        moved = []
        for run_id in dict.fromkeys(change.run_id for change in applied):
            place = self.live.runs[run_id]
            row = rows.get(run_id)
            moved.append(row_of_place(place, seen_at) if row is None else row_at_place(row, place))
        self.window.runs.update_runs(moved)
        if not self._live_runs_timer.isActive():
            self._live_runs_timer.start()

    def tick(self) -> None:
        """Once a second: countdowns move even when no event arrives (time from `self.clock`)."""
        self.window.approvals.refresh_times()
        self.window.runs.refresh_times()
        if self.live_on:
            self.repaint_live()
            if self.selected_run is not None:
                self.select_run(self.selected_run, focus=False)

    def repaint_live(self) -> None:
        editor = self.window.tabs.current_editor()
        if not self.live_on or editor is None:
            return
        flow_id = editor.document.flow_ref().id
        version = next((v for (f, v), d in self.version_documents.items() if d is editor.document and f == flow_id),
                       None)
        editor.view.set_live_counts(self.live.node_counts(flow_id, self.clock(), version))

    def select_run(self, run_id: str, focus: bool = True) -> None:
        """Follow one run in live mode: its path so far, its current node and what it waits on.

        A run whose published version differs from the open draft is drawn on its own version's
        graph, in a tab of its own.
        """
        self.selected_run = run_id

        def got_run(run: Run | None, error: BaseException | None) -> None:
            if error is None and run is not None and self.selected_run == run_id:
                self.window.properties.set_preview_run(run)
            if error is not None or run is None or not self.live_on:
                return
            key = (run.flow_id, run.version)
            if key in self.published_versions:
                got_version(run, self.published_versions[key], None)
                return

            def found_version(found: PublishedVersion | None, problem: BaseException | None) -> None:
                if problem is None and found is not None:
                    self.published_versions[key] = found
                got_version(run, found, problem)

            self.bridge.flow_version(*key, found_version)

        def got_version(run: Run, found: PublishedVersion | None, error: BaseException | None) -> None:
            if error is not None or found is None:
                return
            published, flow = found
            editor = self._editor_for_version(run.flow_id, run.version, published.content_hash, flow, focus)
            if editor is None and not focus and self._run_editor is not None and self._run_editor[0] == run_id:
                editor = self._run_editor[1]  # the draft it was drawn on, edited since: keep following it there
                if self.window.tabs.index_of(editor.document) < 0:
                    editor = None
            if editor is None:
                return
            self._run_editor = (run_id, editor)
            waiting = run_waiting(run)
            current = run.current_node or (waiting.node if waiting else None)
            editor.view.set_run_path(run_path(run), current, waiting_text(waiting, self.clock()), run_marks(run))

        self.bridge.get_run(run_id, got_run)

    def _editor_for_version(self, flow_id: str, version: int, content_hash: str, flow: Flow,
                            focus: bool = True) -> FlowEditor | None:
        """The open draft when it equals the version; else that version's own tab (opened once).
        Without `focus` (the once-a-second refresh) no tab is opened or brought forward."""
        from canvas.document import FlowDocument
        from engine.flow import dump_flow
        from engine.publish import content_hash as hash_of

        tabs = self.window.tabs
        for index in range(tabs.count()):
            draft = tabs.document_at(index)
            if draft.flow_ref().id == flow_id and hash_of(dump_flow(draft.flow_ref())) == content_hash:
                if focus:
                    tabs.setCurrentIndex(index)
                return tabs.editor_at(index)
        key = (flow_id, version)
        document: FlowDocument | None = self.version_documents.get(key)
        if not focus:
            return tabs.editor_at(tabs.index_of(document)) if document and tabs.index_of(document) >= 0 else None
        if document is None or tabs.index_of(document) < 0:
            document = FlowDocument.from_flow(flow)
            self.version_documents[key] = document
            self.window.add_document(document)
            tabs.set_fixed_title(document, f"{flow_id} v{version} (published)",
                                 f"Version {version} of {flow_id} as published: runs of this version are drawn "
                                 "here because the open draft differs")
        tabs.setCurrentIndex(tabs.index_of(document))
        self.repaint_live()
        return tabs.editor_at(tabs.index_of(document))

    def show_versions(self, flow_id: str) -> None:
        """A list of the flow's published versions (number, when, content hash)."""

        def done(versions: list[FlowVersion] | None, error: BaseException | None) -> None:
            if error is not None or versions is None:
                self._say(f"Versions of {flow_id} cannot be read: {error}")
                return
            dialog = QDialog(self.window)
            dialog.setWindowTitle(f"Published versions of {flow_id}")
            table = QTableWidget(len(versions), 3, dialog)
            table.setObjectName("versionsTable")
            table.setHorizontalHeaderLabels(["Version", "Published", "Content hash"])
            table.verticalHeader().hide()
            table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
            numbers = [version.version for version in reversed(versions)]
            for row, version in enumerate(reversed(versions)):
                for column, text in enumerate((f"v{version.version}",
                                               local_time(datetime.fromisoformat(version.published_at)),
                                               version.content_hash[:12])):
                    item = QTableWidgetItem(text)
                    item.setToolTip("Double-click to open this version in a new tab (to compare it with another)")
                    table.setItem(row, column, item)
            table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
            table.cellDoubleClicked.connect(lambda row, _column: self.window.open_version(flow_id, numbers[row]))
            layout = QVBoxLayout(dialog)
            layout.addWidget(table if versions else QLabel(f"{flow_id} has not been published yet."))
            if versions:
                layout.addWidget(QLabel("Double-click a version to open it in a new tab; Flow ▸ Compare with "
                                        "version… then compares it with another."))
            dialog.resize(520, 300)
            self.versions_dialog = dialog
            dialog.show()

        self.bridge.list_versions(flow_id, done)

    def open_run(self, run_id: str) -> None:
        """Show a run's steps, state and errors, with Cancel; it refreshes as the run moves."""
        from app.run_details import RunDetails

        if self.details is None:
            self.details = RunDetails(self.window)
            self.details.cancel_requested.connect(self.cancel_run)
            self.details.open_run_requested.connect(self.open_run)
            self.details.rerun_requested.connect(self.reruns.ask)
            self.details.save_test_requested.connect(self.save_run_as_test)

        def done(run: Run | None, error: BaseException | None) -> None:
            if error is not None or run is None or self.details is None:
                self._say(f"Run {short_run_id(run_id)} cannot be shown: {error or 'it does not exist'}")
                return
            key = (run.flow_id, run.version)

            def show(found: PublishedVersion | None, _problem: BaseException | None) -> None:
                if found is not None:
                    self.published_versions[key] = found
                secrets = frozenset(n for n, spec in found[1].inputs.items() if spec.secret) if found else None
                if self.details is not None:
                    self.details.show_run(run, secrets)
                    self.details.show()
                    self.details.raise_()

            if key in self.published_versions:
                show(self.published_versions[key], None)
            else:
                self.bridge.flow_version(*key, show)

        self.bridge.get_run(run_id, done)

    def _ask_test_target(self, flow_id: str, folder: Path | None) -> tuple[str, Path] | None:
        from app.flow_tests import ask_test_target

        return ask_test_target(self.window, flow_id, folder)

    def _ask_replace_test(self, path: Path) -> bool:
        from app.flow_tests import ask_replace_test

        return ask_replace_test(self.window, path)

    def save_run_as_test(self, run_id: str) -> None:
        """Save as test…: record the finished run from the store as `<flow>.<name>.flowtest.json`; a test file
        of that name already there is replaced only when the user says so."""
        from app.flow_tests import flow_folder
        from engine.flowtest.model import file_name, save_test

        run = self.details.run if self.details is not None else None
        if run is None or run.id != run_id:
            return
        flow_id = run.flow_id
        target = self.ask_test_target(flow_id, flow_folder(self.window.tabs.documents(), flow_id))
        if target is None:
            return
        name, folder = target
        existing = folder / file_name(flow_id, name)
        replace = existing.exists()
        if replace and not self.ask_replace_test(existing):
            self._say(f"Not saved: {existing} is kept as it was. Save the run under another name to keep both.")
            return

        def done(test: FlowTest | None, error: BaseException | None) -> None:
            if error is not None or test is None:
                self._say(f"Run {short_run_id(run_id)} cannot be saved as a test: {error or 'no answer'}")
                return
            try:
                path = save_test(test, folder, replace=replace)
            except FileExistsError as exc:
                self._say(f"Not saved: {exc.filename} appeared meanwhile and is kept as it was; save again to "
                          "replace it.")
                return
            except OSError as exc:
                self._say(f"Run {short_run_id(run_id)} cannot be saved as a test in {folder}: {exc.strerror or exc}")
                return
            done_word = "Replaced" if replace else "Saved"
            self._say(f"{done_word} test {path} ({len(test.answers)} recorded answers): Flow ▸ Run tests replays "
                      "it.")

        self.bridge.record_test(run_id, name, done)

    def _refresh_open_run(self) -> None:
        details = self.details
        if details is not None and details.isVisible() and details.run is not None:
            run_id = details.run.id
            def shown(run: Run | None, error: BaseException | None) -> None:
                # Another run may have been opened meanwhile (a rerun opens itself): an older answer is stale.
                if run and not error and details.run is not None and details.run.id == run_id:
                    details.show_run(run)

            self.bridge.get_run(run_id, shown)

    def _say(self, message: str) -> None:
        self.window.statusBar().showMessage(message, 8000)
        self.window.log.append(message)
