"""Time as the engine asks for it, so waits of 72h are tested in milliseconds."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    """Wall-clock time."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock tests move by hand; starts at a fixed instant."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move forward `seconds`; returns the new time."""
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, instant: float) -> None:
        with self._lock:
            self._now = instant
