"""`ChangeQueue`: live changes a batch listener picked, handled one at a time on a thread of its own, so the
projector's thread never waits for what a part does with them (deliver a notice, start a run)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from engine.outages import described, outage, outage_subject
from engine.runtime.live_change import LiveChange

POLL_SECONDS = 0.2
"""How long `run` waits for a change before it looks at `stop` again."""

OUTAGE_RETRY_SECONDS = (0.5, 2.0, 5.0, 15.0, 30.0)
"""The waits before a change whose handler met an outage (`engine.outages.outage`) is handled again; after the
last one it is dropped with an error in the log."""

Handler = Callable[[LiveChange, threading.Event], None]
"""Handles one change; the event is set when the engine stops (for waits inside the handler). A handler is
called again for a change after an outage, so what it does must be safe to repeat (idempotent starts, notices
with a delivery id)."""


class ChangeQueue:
    """Changes `put` from a batch listener, handled in order by `run` (a part's thread). A handler that meets an
    outage of Redis or the database is called again for the same change (`retry_seconds`) before the next one;
    one that raises anything else, or whose retries run out, is logged and the next change is handled."""

    def __init__(self, handle: Handler, what: str, log: logging.Logger,
                 retry_seconds: tuple[float, ...] = OUTAGE_RETRY_SECONDS) -> None:
        self.handle = handle
        self.what = what
        """What handling a change is, for the log (`approval notice`)."""
        self.log = log
        self.retry_seconds = retry_seconds
        self.dropped = 0
        """Changes given up on: their handler raised other than an outage, or met one past every retry."""
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
                self._handle(change, stop)
            finally:
                self._pending.task_done()

    def _handle(self, change: LiveChange, stop: threading.Event) -> None:
        subject = f"{self.what} for {change.event} of run {change.run_id}"
        for attempt, wait in enumerate((*self.retry_seconds, None), start=1):
            try:
                self.handle(change, stop)
                return
            except Exception as exc:
                if not outage(exc):
                    self.dropped += 1
                    self.log.exception("%s failed; continuing", subject)
                    return
                if wait is None:
                    self.dropped += 1
                    self.log.error("%s dropped: %s did not answer in %d attempts (%s)", subject,
                                   outage_subject(exc), attempt, described(exc))
                    return
                self.log.warning("%s: %s did not answer (%s); trying again in %gs", subject, outage_subject(exc),
                                 described(exc), wait)
            if stop.wait(wait):
                self.dropped += 1
                self.log.warning("%s not handled: the engine stopped while it waited to try again", subject)
                return
