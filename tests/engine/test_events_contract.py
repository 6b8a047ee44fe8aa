"""The committed event contract matches the models; events round-trip; factories stamp them."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from engine.clock import ManualClock
from engine.events import EVENT_TYPE_NAMES, EventStamper, PoisonEvent, decode_event, encode_event
from engine.events.schema import CONTRACT_DIR, SCHEMA_FILE, contract_documents, contract_drift


def test_committed_contract_matches_the_models() -> None:
    assert contract_drift() == [], "run `python -m engine.events.schema` and commit engine/events/contract/"


def test_contract_drift_is_detected(tmp_path: Path) -> None:
    for name, text in contract_documents().items():
        (tmp_path / name).write_text(text)
    assert contract_drift(tmp_path) == []
    (tmp_path / "fixture.run_started.json").write_text("{}\n")
    (tmp_path / "fixture.run_exploded.json").write_text("{}\n")
    drift = contract_drift(tmp_path)
    assert "fixture.run_started.json: differs from the models" in drift
    assert "fixture.run_exploded.json: no event type produces it" in drift


def test_one_fixture_per_event_type_and_each_decodes() -> None:
    schema = json.loads((CONTRACT_DIR / SCHEMA_FILE).read_text())
    assert set(schema["discriminator"]["mapping"]) == set(EVENT_TYPE_NAMES)
    for type_name in EVENT_TYPE_NAMES:
        raw = (CONTRACT_DIR / f"fixture.{type_name}.json").read_bytes()
        event = decode_event(raw)
        assert event.type == type_name
        assert event.schema_version == 1
        assert decode_event(encode_event(event)) == event


def test_factories_stamp_sequence_time_and_attempt() -> None:
    clock = ManualClock(1000.0)
    stamper = EventStamper("run-1", clock, attempt=3, last_seq=4)
    first = stamper.step_started("a", "a", "set")
    clock.advance(1.5)
    second = stamper.step_completed("a", "a", ["out"], {"x": 1}, 2.0)
    assert (first.seq, second.seq) == (5, 6)
    assert (first.ts, second.ts) == (1000.0, 1001.5)
    assert first.attempt == second.attempt == 3
    assert first.event_id != second.event_id and first.run_id == "run-1"


@pytest.mark.parametrize("raw", [b"not json", b'{"type": "run_exploded"}', b'{"type": "run_started", "run_id": "x"}'])
def test_bad_events_are_poison(raw: bytes) -> None:
    with pytest.raises(PoisonEvent, match="does not match the contract"):
        decode_event(raw)


@pytest.mark.parametrize("type_name", EVENT_TYPE_NAMES)
def test_encoding_is_the_model_dump_through_orjson(type_name: str) -> None:
    event = decode_event((CONTRACT_DIR / f"fixture.{type_name}.json").read_bytes())
    assert encode_event(event) == orjson.dumps(event.model_dump(mode="python"), option=orjson.OPT_NON_STR_KEYS)
