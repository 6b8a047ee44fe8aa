"""Rerun from here in the app: read the versions a rerun may use (dry runs, on the engine thread), confirm
with `RerunDialog`, start the rerun and open it. Asked from run details, the Runs panel's context menu, or
the canvas (the selected node, with that run selected)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from app.engine_messages import without_cli_hints
from app.rerun_dialog import RerunDialog, RerunOption
from engine.facade import rerun_answer_of
from engine.read_models import ErrorDetail

if TYPE_CHECKING:
    from app.engine_controller import EngineController


def rerun_options(services: Any, run_id: str, node: str) -> list[RerunOption]:
    """The original version's dry run, and the current one's when it is another version (engine thread)."""
    from engine.runtime.rerun import RerunRefused

    options: list[RerunOption] = []
    original: int | None = None
    for choice in ("original", "current"):
        try:
            plan = services.plan_rerun(run_id, node, choice)
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
        options.append(RerunOption(choice, label, preview=rerun_answer_of(plan)))
    return options


class RerunFlow(QObject):
    """Owns the confirmation dialog of the rerun being asked for."""

    def __init__(self, controller: EngineController) -> None:
        super().__init__(controller)
        self.controller = controller
        self.dialog: RerunDialog | None = None

    def ask(self, run_id: str, node: str | None = None) -> None:
        """Confirm a rerun of `run_id` from `node` (None: the node selected on the canvas)."""
        node = node or self._canvas_node()
        if not node:
            self.controller._say("Rerun from here: pick the node to rerun from on the canvas, or a step in the "
                                 "run's details")
            self.controller.open_run(run_id)
            return

        def done(options: Any, error: BaseException | None) -> None:
            if error is not None or not options:
                self.controller._say(f"Run {run_id[:8]} cannot be rerun: {error}")
                return
            self.dialog = RerunDialog(run_id, node, options, self.controller.window)
            self.dialog.accepted.connect(lambda: self._start(run_id, node))
            self.dialog.open()

        self.controller.bridge.request(lambda services: rerun_options(services, run_id, node), done)

    def _start(self, run_id: str, node: str) -> None:
        option = self.dialog.chosen() if self.dialog is not None else None
        if option is None:
            return

        def done(result: Any, error: BaseException | None) -> None:
            if error is not None:
                self.controller._say(f"Rerun of {run_id[:8]} from {node} refused: {without_cli_hints(str(error))}")
                return
            created, plan = result
            self.controller._say(f"Run {created.run_id[:8]} started: a rerun of {run_id[:8]} from {node} "
                                 f"(v{plan.version})")
            self.controller.run_started.emit(created.run_id)
            self.controller.refresh_runs()
            self.controller.open_run(created.run_id)

        choice = option.choice
        self.controller.bridge.request(lambda services: services.rerun_run(run_id, node, choice), done)

    def _canvas_node(self) -> str | None:
        editor = self.controller.window.tabs.current_editor()
        selected = editor.view.flow_scene.selected_node_ids() if editor is not None else []
        return selected[0] if len(selected) == 1 else None
