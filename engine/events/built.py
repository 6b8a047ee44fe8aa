"""Events this process built, by their encoded bytes, for a projector in the same process.

The factories validate every event when they make it, so a projector applying an event this process
encoded takes the model back (`take`) instead of parsing and validating its bytes a second time. Only bytes
equal to what `encode_event` wrote for the model are answered; anything else is decoded as before. Kept
only while a projector of this process is active (`keeping`), and at most `limit` events (the oldest go
first: events another process's projector applies are never taken here).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import cast

from engine.events.models import Event, EventBase

LIMIT = 20_000


class BuiltEvents:
    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.keeping = False
        self._events: OrderedDict[bytes, EventBase] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, payload: bytes, event: EventBase) -> None:
        if not self.keeping:
            return
        with self._lock:
            self._events[payload] = event
            if len(self._events) > self.limit:
                self._events.popitem(last=False)

    def take(self, raw: bytes) -> Event | None:
        """The model `raw` was encoded from, if this process built it (once)."""
        if not self._events:
            return None
        with self._lock:
            return cast("Event | None", self._events.pop(raw, None))

    def stop_keeping(self) -> None:
        with self._lock:
            self.keeping = False
            self._events.clear()


BUILT = BuiltEvents()
