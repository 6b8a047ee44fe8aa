"""Wakes requests waiting on a run the moment this process's projector applies a change to it.

Without a projector in this process (another process holds the lease), waiters fall back to polling
the store every `POLL_SECONDS`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from engine.runtime.projection import BatchResult

POLL_SECONDS = 0.05


class RunWatch:
    def __init__(self) -> None:
        self._waiters: dict[str, list[threading.Event]] = {}
        self._lock = threading.Lock()

    @contextmanager
    def watching(self, run_id: str) -> Iterator[threading.Event]:
        event = threading.Event()
        with self._lock:
            self._waiters.setdefault(run_id, []).append(event)
        try:
            yield event
        finally:
            with self._lock:
                waiters = self._waiters.get(run_id, [])
                if event in waiters:
                    waiters.remove(event)
                if not waiters:
                    self._waiters.pop(run_id, None)

    def on_batch(self, result: BatchResult) -> None:
        if not self._waiters:
            return
        with self._lock:
            woken = [event for change in result.changes for event in self._waiters.get(change.run_id, ())]
        for event in woken:
            event.set()
