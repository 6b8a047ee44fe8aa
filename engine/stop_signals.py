"""SIGINT and SIGTERM answered in a thread of their own, so answering never waits on a lock the main thread holds.

A Python signal handler runs in the main thread between two bytecodes, wherever that thread is: also inside
`threading.Event.wait`, between the moment the event's lock is taken and released. A handler that then sets
that same event (or starts a thread, or logs) waits for a lock its own thread holds, and the process hangs with
the signal "handled". Here the handler does nothing; Python's C-level handler writes the signal's number to a
wakeup pipe, and a relay thread reading that pipe calls `on_signal` like any other code.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _noted(_signum: int, _frame: FrameType | None) -> None:
    """Installed for the stop signals so that Python's C handler catches them and writes them to the wakeup pipe."""


class StopSignals:
    """While installed, each SIGINT/SIGTERM calls `on_signal` in the relay thread `lockgate-stop-signals`.

    `install` and `restore` are called from the main thread (as `signal.signal` must be)."""

    def __init__(self, on_signal: Callable[[signal.Signals], None]) -> None:
        self._on_signal = on_signal
        self._previous: dict[signal.Signals, object] = {}
        self._previous_wakeup_fd = -1
        self._write_fd: int | None = None
        self._relay: threading.Thread | None = None

    def install(self) -> StopSignals:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # the C handler must never block on a full pipe
        self._write_fd = write_fd
        self._relay = threading.Thread(target=self._run_relay, args=(read_fd,), name="lockgate-stop-signals",
                                       daemon=True)
        self._relay.start()
        self._previous_wakeup_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._previous = {sig: signal.signal(sig, _noted) for sig in STOP_SIGNALS}
        return self

    def restore(self) -> None:
        """Put back the handlers and wakeup descriptor found at `install`; the relay thread ends."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]  # what signal.signal returned for it
        self._previous = {}
        if self._write_fd is not None:
            signal.set_wakeup_fd(self._previous_wakeup_fd)
            os.close(self._write_fd)  # the relay reads end-of-file
            self._write_fd = None

    def _run_relay(self, read_fd: int) -> None:
        numbers = {int(sig) for sig in STOP_SIGNALS}
        try:
            while data := os.read(read_fd, 64):
                for number in data:
                    if number in numbers:
                        self._on_signal(signal.Signals(number))
        finally:
            os.close(read_fd)
