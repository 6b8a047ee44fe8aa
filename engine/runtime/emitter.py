"""Buffers a run's events and writes them to the events stream in one pipelined round trip."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import redis

from engine.events import EventBase, encode_event
from engine.events.built import BUILT

EVENT_FIELD = b"e"


class RedisEmitter:
    """Events go out at flush: before blocking bodies, at parks, retries and the end of the run."""

    def __init__(self, client: redis.Redis, stream: str) -> None:
        self.client = client
        self.stream = stream
        self._buffer: list[bytes] = []
        self._lock = threading.Lock()

    def emit(self, event: EventBase) -> None:
        payload = encode_event(event)
        BUILT.keep(payload, event)
        with self._lock:
            self._buffer.append(payload)

    def drain_into(self, pipe: Any) -> None:
        """Add the buffered events to `pipe` (the caller executes it)."""
        with self._lock:
            pending, self._buffer = self._buffer, []
        for payload in pending:
            pipe.xadd(self.stream, {EVENT_FIELD: payload})

    def flush(self, extra: Callable[[Any], None] | None = None) -> None:
        """Write buffered events; `extra(pipeline)` adds commands to the same round trip."""
        with self._lock:
            pending, self._buffer = self._buffer, []
        if not pending and extra is None:
            return
        pipe = self.client.pipeline(transaction=False)
        for payload in pending:
            pipe.xadd(self.stream, {EVENT_FIELD: payload})
        if extra is not None:
            extra(pipe)
        pipe.execute()
