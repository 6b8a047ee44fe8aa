"""Rerun from here in the app: read the versions a rerun may use (dry runs, on the engine thread), confirm
with `RerunDialog`, start the rerun and open it. Asked from run details, the Runs panel's context menu, or
the canvas (the selected node, with that run selected)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMenu

from app.engine_messages import without_cli_hints
from app.readable import short_run_id
from app.rerun_dialog import RerunDialog, RerunOption
from engine.read_models import ErrorDetail, RerunRequest
from engine.runtime.transitions import TERMINAL

if TYPE_CHECKING:
    from app.engine_controller import EngineController
    from engine.facade import EngineApi
    from engine.read_models import RerunStarted


def rerun_options(api: EngineApi, run_id: str, node: str) -> list[RerunOption]:
    """The original version's dry run, and the current one's when it is another version (engine thread)."""
    from engine.runtime.rerun import RerunRefused

    options: list[RerunOption] = []
    original: int | None = None
    for choice in ("original", "current"):
        try:
            dry_run = RerunRequest.model_validate({"from_node": node, "version": choice, "dry_run": True})
            plan = api.rerun(run_id, dry_run)
        except RerunRefused as exc:
            refusal = ErrorDetail(code=exc.kind, message=str(exc), nodes=list(exc.nodes) or None,
                                  original_version=exc.original_version)
            label = "the original run's version" if choice == "original" else "the current published version"
            options.append(RerunOption(choice, label.capitalize(), refusal=refusal))
            if choice == "original":
                return options  # the run or node itself is refused: no version helps
            continue
        original = plan.original_version
        if choice == "current" and plan.version == original:
            break
        label = f"Original version (v{plan.version})" if choice == "original" else \
            f"Current published version (v{plan.version})"
        options.append(RerunOption(choice, label, preview=plan))
    return options


class RerunFlow(QObject):
    """Owns the confirmation dialog of the rerun being asked for."""

    def __init__(self, controller: EngineController) -> None:
        super().__init__(controller)
        self.controller = controller
        self.dialog: RerunDialog | None = None
        tabs = controller.window.tabs
        controller.window.runs.run_selected.connect(lambda _run_id: self.install())
        tabs.current_document_changed.connect(lambda _document: self.install())

    def install(self) -> None:
        """Give every open canvas's node menu a Rerun from here entry (shown while a finished run is selected)."""
        tabs = self.controller.window.tabs
        for index in range(tabs.count()):
            flow_id = tabs.document_at(index).flow_ref().id
            tabs.editor_at(index).view.node_menu_hook = \
                lambda menu, node_id, flow_id=flow_id: self._node_menu(menu, node_id, flow_id)

    def _node_menu(self, menu: QMenu, node_id: str, flow_id: str) -> None:
        run_id = self.controller.selected_run
        run = self.controller.window.runs.rows.get(run_id) if run_id else None
        if run is None or run.status not in TERMINAL or run.flow_id != flow_id:
            return
        menu.addSeparator()
        entry = menu.addAction(f"Rerun from here… (run {short_run_id(run.run_id)})")
        entry.setObjectName("menu_rerun_from_here")
        entry.setToolTip(f"A new run that reuses the steps of run {short_run_id(run.run_id)} before {node_id}")
        entry.triggered.connect(lambda _checked=False: self.ask(run.run_id, node_id))

    def ask(self, run_id: str, node: str | None = None) -> None:
        """Confirm a rerun of `run_id` from `node` (None: the node selected on the canvas)."""
        node = node or self._canvas_node()
        if not node:
            self.controller._say("Rerun from here: pick the node to rerun from on the canvas, or a step in the "
                                 "run's details")
            self.controller.open_run(run_id)
            return

        def done(options: list[RerunOption] | None, error: BaseException | None) -> None:
            if error is not None or not options:
                self.controller._say(f"Run {short_run_id(run_id)} cannot be rerun: {error}")
                return
            self.dialog = RerunDialog(run_id, node, options, self.controller.window)
            self.dialog.accepted.connect(lambda: self._start(run_id, node))
            self.dialog.open()

        self.controller.bridge.request(lambda api: rerun_options(api, run_id, node), done)

    def _start(self, run_id: str, node: str) -> None:
        option = self.dialog.chosen() if self.dialog is not None else None
        if option is None:
            return

        def done(started: RerunStarted | None, error: BaseException | None) -> None:
            if error is not None or started is None or started.run_id is None:
                self.controller._say(f"Rerun of {short_run_id(run_id)} from {node} refused: "
                                     f"{without_cli_hints(str(error))}")
                return
            self.controller._say(f"Run {short_run_id(started.run_id)} started: a rerun of {short_run_id(run_id)} "
                                 f"from {node} (v{started.version})")
            self.controller.run_started.emit(started.run_id)
            self.controller.refresh_runs()
            self.controller.open_run(started.run_id)

        # The dialog named the nodes whose effect the rerun repeats (its dry run): confirming it agrees to them.
        confirmed = option.preview is not None and bool(option.preview.repeated_effects)
        request = RerunRequest.model_validate({"from_node": node, "version": option.choice,
                                               "repeat_effects": confirmed})
        self.controller.bridge.request(lambda api: api.rerun(run_id, request), done)

    def _canvas_node(self) -> str | None:
        editor = self.controller.window.tabs.current_editor()
        selected = editor.view.flow_scene.selected_node_ids() if editor is not None else []
        return selected[0] if len(selected) == 1 else None
