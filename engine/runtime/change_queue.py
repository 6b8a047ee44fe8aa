"""`ChangeQueue`: live changes a batch listener picked, handled one at a time on a thread of its own, so the
projector's thread never waits for what a part does with them (deliver a notice, start a run)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from engine.runtime.live_change import LiveChange

POLL_SECONDS = 0.2
"""How long `run` waits for a change before it looks at `stop` again."""

Handler = Callable[[LiveChange, threading.Event], None]
"""Handles one change; the event is set when the engine stops (for waits inside the handler)."""


class ChangeQueue:
    """Changes `put` from a batch listener, handled in order by `run` (a part's thread); a handler that raises
    is logged and the next change is handled."""

    def __init__(self, handle: Handler, what: str, log: logging.Logger) -> None:
        self.handle = handle
        self.what = what
        """What handling a change is, for the log (`approval notice`)."""
        self.log = log
        self._pending: queue.Queue[LiveChange] = queue.Queue()

    def put(self, change: LiveChange) -> None:
        self._pending.put(change)

    @property
    def unfinished(self) -> int:
        """Changes put and not yet handled: 0 once every change put so far is handled."""
        return self._pending.unfinished_tasks

    def run(self, stop: threading.Event) -> None:
        """Handle changes as they come until `stop` is set."""
        while not stop.is_set():
            try:
                change = self._pending.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            try:
                self.handle(change, stop)
            except Exception:
                self.log.exception("%s for %s of run %s failed; continuing", self.what, change.event, change.run_id)
            finally:
                self._pending.task_done()
