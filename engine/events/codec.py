"""Events on the wire: compact JSON bytes (orjson) in, typed models out."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from engine.events.models import EVENT_ADAPTER, Event, EventBase


class PoisonEvent(ValueError):
    """Bytes that are not a valid event; the projector dead-letters them."""


def _nested_model(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def encode_event(event: EventBase) -> bytes:
    """The event as compact JSON bytes: the bytes of `model_dump(mode="python")` through orjson, made from the
    model's own field values (events have no aliases or serializers), nested models dumped as orjson meets them."""
    return orjson.dumps(event.__dict__, default=_nested_model, option=orjson.OPT_NON_STR_KEYS)


def decode_event(raw: bytes | str) -> Event:
    """A typed event from JSON; raises PoisonEvent naming what is wrong."""
    try:
        return EVENT_ADAPTER.validate_json(raw)
    except ValueError as exc:
        text = str(exc).replace("\n", " ")
        raise PoisonEvent(f"event does not match the contract: {text[:500]}") from None


def event_to_data(event: EventBase) -> dict[str, Any]:
    """The event as plain JSON data."""
    return event.model_dump(mode="json")
