"""The committed event fixtures satisfy the committed JSON Schema, checked by a JSON-Schema validator
(`jsonschema`), not by the pydantic models that wrote both."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from engine.events import EVENT_TYPE_NAMES
from engine.events.schema import CONTRACT_DIR, SCHEMA_FILE


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((CONTRACT_DIR / SCHEMA_FILE).read_text(encoding="utf-8"))
    return schema


def _fixture(type_name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONTRACT_DIR / f"fixture.{type_name}.json").read_text(encoding="utf-8"))
    return data


def _errors(instance: Any) -> list[str]:
    """Every complaint, those under `oneOf` (one per event type tried) included."""
    validator = Draft202012Validator(_schema())
    pending = list(validator.iter_errors(instance))
    messages = []
    while pending:
        error = pending.pop()
        messages.append(f"{'/'.join(map(str, error.absolute_path)) or '$'}: {error.message}")
        pending.extend(error.context or ())
    return messages


def test_the_committed_schema_is_a_valid_json_schema() -> None:
    Draft202012Validator.check_schema(_schema())


@pytest.mark.parametrize("type_name", EVENT_TYPE_NAMES)
def test_each_committed_fixture_satisfies_the_committed_schema(type_name: str) -> None:
    assert _errors(_fixture(type_name)) == []


@pytest.mark.parametrize("type_name", EVENT_TYPE_NAMES)
def test_each_fixture_matches_exactly_its_own_type(type_name: str) -> None:
    schema = _schema()
    own = schema["discriminator"]["mapping"][type_name]
    definition = schema["$defs"][own.rsplit("/", 1)[-1]]
    matching = [name for name, other in schema["$defs"].items() if "properties" in other and "type" in
                other["properties"] and not list(Draft202012Validator({**other, "$defs": schema["$defs"]})
                                                 .iter_errors(_fixture(type_name)))]
    assert definition["properties"]["type"]["const"] == type_name
    assert matching == [own.rsplit("/", 1)[-1]]


@pytest.mark.parametrize(("change", "complaint"), [
    (lambda event: event.update(surprise=1), "Additional properties are not allowed"),
    (lambda event: event.update(seq="twelve"), "is not of type 'integer'"),
    (lambda event: event.update(seq=-1), "less than the minimum"),
    (lambda event: event.pop("run_id"), "'run_id' is a required property"),
    (lambda event: event.update(schema_version=2), "1 was expected"),
    (lambda event: event.update(type="run_exploded"), "'run_resumed' was expected"),
])
def test_the_validator_refuses_an_event_outside_the_schema(change: Any, complaint: str) -> None:
    event = _fixture("run_resumed")
    change(event)
    errors = _errors(event)
    assert errors, "an event outside the contract was accepted"
    assert complaint in " ".join(errors)
