"""The seam between the window and the embedded engine.

`EngineBridge` owns the engine thread and speaks Qt signals to the panels. It
never invents data: until the engine's services can be started, it reports
itself unavailable and the panels say so.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

from PySide6.QtCore import QObject, Signal

from app.engine_thread import EngineThread
from engine.config import EngineConfig

EngineState = Literal["stopped", "starting", "running", "stopping", "unavailable", "failed"]
SERVICES_MODULE = "engine.runtime.services"


class EngineBridge(QObject):
    """Starts and stops the engine off the GUI thread and relays what it reports."""

    state_changed = Signal(str)
    runs_changed = Signal()
    run_updated = Signal(dict)
    approvals_changed = Signal()
    holds_changed = Signal()
    log_message = Signal(str)

    def __init__(self, config: EngineConfig, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.config = config
        self.engine_thread = EngineThread()
        self.services: Any = None
        self.state: EngineState = "stopped"
        self.unavailable_reason = ""

    @property
    def available(self) -> bool:
        return self.state == "running" and self.services is not None

    def _set_state(self, state: EngineState, message: str = "") -> None:
        self.state = state
        self.state_changed.emit(state)
        if message:
            self.log_message.emit(message)

    def start(self) -> None:
        """Start the engine in its thread; `state_changed` says how it went."""
        if self.state in ("starting", "running"):
            return
        try:
            services_module = importlib.import_module(SERVICES_MODULE)
        except ImportError as exc:
            self.unavailable_reason = (
                f"the embedded engine is not part of this build yet ({SERVICES_MODULE}: {exc}); "
                "editing, validation and saving work, runs do not"
            )
            self._set_state("unavailable", f"Engine unavailable: {self.unavailable_reason}")
            return
        self._set_state("starting", f"Starting the engine in {self.config.data_dir}")
        self.engine_thread.start()
        services = services_module.EngineServices(self.config)
        self.services = services

        def started(_result: object, error: BaseException | None) -> None:
            if error is not None:
                self.services = None
                self.unavailable_reason = f"the engine did not start: {error}"
                self._set_state("failed", f"Engine failed to start: {error}; check the data folder and Redis URL "
                                          "in Settings")
                return
            self._set_state("running", "Engine running")
            self.runs_changed.emit()
            self.approvals_changed.emit()
            self.holds_changed.emit()

        self.engine_thread.call(_maybe_await(services.start()), started)

    def stop(self) -> None:
        """Stop the engine cleanly (parked runs stay parked) and end its thread; blocks until done."""
        services = self.services
        if self.state in ("running", "starting") and services is not None:
            self._set_state("stopping", "Stopping the engine")
            self.engine_thread.stop(_maybe_await(services.stop()))
        else:
            self.engine_thread.stop()
        self.services = None
        if self.state != "unavailable":
            self._set_state("stopped")


async def _maybe_await(value: Any) -> Any:
    """Await coroutines, pass plain results through (the services may be sync or async)."""
    if hasattr(value, "__await__"):
        return await value
    return value
