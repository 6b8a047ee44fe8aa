"""Buffers a run's events and writes them to the events stream in one pipelined round trip."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import redis
from redis.typing import EncodableT, FieldT

from engine.events import EventBase, encode_event
from engine.events.built import BUILT

EVENT_FIELD = b"e"
"""The field of an events-stream entry that holds one event's JSON."""
EVENTS_FIELD = b"E"
"""The field of an entry that holds several events of one run, their JSON texts joined by newlines (compact JSON
never holds a raw newline: a string's newline is written as an escape). One entry per flush instead of one per
event: one XADD, one id to read, acknowledge and delete, however many events a step boundary made."""


def entry_fields(payloads: list[bytes]) -> dict[FieldT, EncodableT]:
    """The fields of the one entry that carries `payloads` (one event, or several of one run)."""
    if len(payloads) == 1:
        return {EVENT_FIELD: payloads[0]}
    return {EVENTS_FIELD: b"\n".join(payloads)}


def entry_events(fields: Mapping[bytes, bytes]) -> list[bytes]:
    """Each event's JSON in an events-stream entry, in the order emitted (an entry with neither field gives one
    empty payload, which the projector captures as a dead letter)."""
    several = fields.get(EVENTS_FIELD)
    if several is not None:
        return several.split(b"\n")
    return [fields.get(EVENT_FIELD, b"")]


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
        if pending:
            pipe.xadd(self.stream, entry_fields(pending))

    def flush(self, extra: Callable[[Any], None] | None = None) -> None:
        """Write buffered events; `extra(pipeline)` adds commands to the same round trip."""
        with self._lock:
            pending, self._buffer = self._buffer, []
        if not pending and extra is None:
            return
        pipe = self.client.pipeline(transaction=False)
        if pending:
            pipe.xadd(self.stream, entry_fields(pending))
        if extra is not None:
            extra(pipe)
        pipe.execute()
