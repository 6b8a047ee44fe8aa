"""Typed run events: models, factories, the wire codec and the committed contract."""

from engine.events.codec import PoisonEvent, decode_event, encode_event, event_to_data
from engine.events.factory import EventStamper, ExternalStamper, new_event_id
from engine.events.models import EVENT_MODELS, EVENT_TYPE_NAMES, SCHEMA_VERSION, Event, EventBase, RerunSeed

__all__ = [
    "EVENT_MODELS",
    "EVENT_TYPE_NAMES",
    "SCHEMA_VERSION",
    "Event",
    "EventBase",
    "EventStamper",
    "ExternalStamper",
    "PoisonEvent",
    "RerunSeed",
    "decode_event",
    "encode_event",
    "event_to_data",
    "new_event_id",
]
