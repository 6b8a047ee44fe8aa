"""Events this process built are taken back by their bytes, once, only while a projector keeps them."""

from __future__ import annotations

from engine.clock import ManualClock
from engine.events import EventStamper, decode_event, encode_event
from engine.events.built import BuiltEvents


def test_built_events_are_taken_back_by_their_bytes_once() -> None:
    stamper = EventStamper("run-1", ManualClock(1_800_000_000.0))
    built = BuiltEvents(limit=2)
    first = stamper.step_completed("a", "a", ["out"], {"x": 1}, 0.5, 1)
    built.keep(encode_event(first), first)
    assert built.take(encode_event(first)) is None, "kept while no projector keeps"

    built.keeping = True
    events = [stamper.run_started("f", 1, "start", {}, "w"), first, stamper.run_succeeded("ok")]
    for event in events:
        built.keep(encode_event(event), event)
    assert built.take(encode_event(events[0])) is None, "the oldest goes past the limit"
    taken = built.take(encode_event(first))
    assert taken is first and decode_event(encode_event(first)) == taken
    assert built.take(encode_event(first)) is None
    assert built.take(encode_event(first).replace(b'"x":1', b'"x":2')) is None

    built.stop_keeping()
    assert not built.keeping and built.take(encode_event(events[2])) is None
