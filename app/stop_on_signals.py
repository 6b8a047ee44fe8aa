"""Ctrl-C in the terminal that started the app, or SIGTERM (a logout, `kill`), closes the main window as its
close button does: unsaved flows are asked about, the engine child stops cleanly. A second signal ends the
process at once (its engine child and Valkey still get SIGTERM from the kernel as their parent dies)."""

from __future__ import annotations

import logging
import os
import signal

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QWidget

from engine.stop_signals import StopSignals

log = logging.getLogger("lockgate.app")

EXIT_ON_SECOND_SIGNAL = 130


class WindowCloser(QObject):
    """Relays SIGINT/SIGTERM (told in the `StopSignals` relay thread) to `window.close()` in the GUI thread."""

    asked = Signal(str)

    def __init__(self, window: QWidget) -> None:
        super().__init__()
        self._window = window
        self._received = 0
        self._signals = StopSignals(self._on_signal)
        self.asked.connect(self._close, Qt.ConnectionType.QueuedConnection)

    def install(self) -> WindowCloser:
        self._signals.install()
        log.info("Ctrl-C or SIGTERM closes the window")
        return self

    def restore(self) -> None:
        self._signals.restore()

    def _on_signal(self, received: signal.Signals) -> None:
        self._received += 1
        if self._received > 1:
            os.write(2, f"lockgate: a second {received.name}; quitting without closing\n".encode())
            os._exit(EXIT_ON_SECOND_SIGNAL)
        self.asked.emit(received.name)

    @Slot(str)
    def _close(self, name: str) -> None:
        log.info("%s: closing the window", name)
        if not self._window.close():
            self._received = 0  # the person kept the window open (a save question); a later signal asks again
