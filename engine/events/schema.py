"""The committed event contract: JSON Schema of every event type plus one fixture per type.

`python -m engine.events.schema` rewrites `engine/events/contract/`; the contract test fails when
the models and the committed files differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.clock import ManualClock
from engine.events.factory import EventStamper
from engine.events.models import EVENT_ADAPTER, EVENT_MODELS, EventBase

CONTRACT_DIR = Path(__file__).resolve().parent / "contract"
SCHEMA_FILE = "events.schema.json"


def _fixture_events() -> list[EventBase]:
    stamper = EventStamper("run-0001", ManualClock(1_800_000_000.0), attempt=1)
    events: list[EventBase] = [
        stamper.run_started("hello", 1, "start", {"name": "Ada", "api_token": "***"}, worker="host-1:w0"),
        stamper.step_started("greet", "greet", "set", given={"values": {"greeting": "Hello, Ada!"}}),
        stamper.step_completed("greet", "greet", ["out"], {"greeting": "Hello, Ada!"}, 1.25),
        stamper.step_failed("fetch", "fetch", "HTTP 503 from http://127.0.0.1:9/x", error_type="http_status",
                            will_retry=True, retry_in=2.0, duration_ms=3.5),
        stamper.step_skipped("urgent", "urgent"),
        stamper.run_parked("wait", "queue_delay", 1_800_000_090.0),
        stamper.run_resumed("wait", worker="host-1:w0"),
        stamper.run_succeeded("Hello, Ada!"),
        stamper.run_failed("node \"fetch\" (http.request): HTTP 503", node="fetch"),
        stamper.run_cancelled(node="greet"),
        stamper.run_interrupted("heartbeat lost for 60s"),
        stamper.approval_requested("review", "appr-1", 1_800_086_400.0, ["ada"], "Ship it?"),
        stamper.approval_decided("review", "appr-1", "approved", "ada", "looks good"),
        stamper.hold_placed("reserve", "hold-1", "default", 0.5, 1_800_001_800.0),
        stamper.hold_charged("classify", "hold-1", 0.0123, "default"),
        stamper.hold_released("classify", "hold-1", 0.5, "pool_wait", "default"),
        stamper.approval_reminded("review", "appr-1", 1),
        stamper.approval_escalated("review", "appr-1", ["grace"]),
        stamper.step_reused("greet", "greet", "set", "run-0000", ["out"], {"greeting": "Hello, Ada!"}),
    ]
    ids = iter(f"evt-{n:04d}" for n in range(1, 1000))
    return [event.model_copy(update={"event_id": next(ids)}) for event in events]


def _text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def contract_documents() -> dict[str, str]:
    """File name -> text of every contract file, generated from the models."""
    documents = {SCHEMA_FILE: _text(EVENT_ADAPTER.json_schema(mode="serialization"))}
    fixtures = _fixture_events()
    covered = {type(event) for event in fixtures}
    missing = [model.__name__ for model in EVENT_MODELS if model not in covered]
    if missing:
        raise AssertionError(f"event types without a fixture: {', '.join(missing)}; add one in _fixture_events()")
    for event in fixtures:
        documents[f"fixture.{event.type}.json"] = _text(event.model_dump(mode="json"))  # type: ignore[attr-defined]
    return documents


def write_contract(folder: Path = CONTRACT_DIR) -> list[Path]:
    """Rewrite the contract files; returns the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in contract_documents().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def contract_drift(folder: Path = CONTRACT_DIR) -> list[str]:
    """Names of contract files missing, stale or extra; empty when code and contract agree."""
    expected = contract_documents()
    drift = []
    for name, text in expected.items():
        path = folder / name
        if not path.exists():
            drift.append(f"{name}: missing")
        elif path.read_text(encoding="utf-8") != text:
            drift.append(f"{name}: differs from the models")
    for path in folder.glob("*.json"):
        if path.name not in expected:
            drift.append(f"{path.name}: no event type produces it")
    return drift


if __name__ == "__main__":
    for written_path in write_contract():
        print(written_path)
