"""The shared examples validate as their descriptions say and save back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.flow import dump_flow, flow_to_data, load_flow, load_flow_text, save_flow
from engine.validation import has_errors, validate
from tests.conftest import EXAMPLES, ROOT

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.flow.json"))


def test_the_three_shared_examples_are_there() -> None:
    assert [p.name for p in EXAMPLE_FILES] == ["hello.flow.json", "parked-reserve.flow.json", "ticket-triage.flow.json"]


@pytest.mark.parametrize("name", ["hello", "ticket-triage"])
def test_publishable_examples_have_no_diagnostics(name: str) -> None:
    assert validate(load_flow(EXAMPLES / f"{name}.flow.json")) == []


def test_parked_reserve_is_refused_with_park_inside_finance_chain() -> None:
    flow = load_flow(EXAMPLES / "parked-reserve.flow.json")
    assert "refuses" in flow.description and "park_inside_finance_chain" in flow.description
    found = validate(flow)
    assert [(d.code, d.severity, d.node) for d in found] == [("park_inside_finance_chain", "error", "wait")]
    assert has_errors(found)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_examples_save_back_byte_identical(path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    assert dump_flow(load_flow(path)).encode("utf-8") == original
    copy = tmp_path / path.name
    save_flow(load_flow(path), copy)
    assert copy.read_bytes() == original
    assert not list(tmp_path.glob("*.tmp"))


def test_save_uses_spec_key_order_two_space_indent_and_a_trailing_newline() -> None:
    text = dump_flow(load_flow(EXAMPLES / "ticket-triage.flow.json"))
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.splitlines()[1] == '  "format": "lockgate.flow/1",'
    assert list(json.loads(text)) == ["format", "id", "name", "description", "inputs", "nodes", "edges"]
    first_node = json.loads(text)["nodes"][0]
    assert list(first_node) == ["id", "type", "title", "position", "config"]


def test_load_save_load_is_identical_for_a_flow_with_every_optional_field(tmp_path: Path) -> None:
    data = {
        "format": "lockgate.flow/1",
        "id": "all-fields",
        "name": "Every field",
        "description": "d",
        "enabled": False,
        "inputs": {
            "ticket": {"type": "object", "required": True, "description": "t", "default": {"a": 1}},
            "token": {"type": "string", "secret": True},
        },
        "settings": {"max_delay": "10h", "max_wait": 3600, "suspended_step_timeout": "PT1H", "budget": "team"},
        "nodes": [
            {"id": "start", "type": "trigger.manual", "title": "Go", "position": [1.5, -2], "config": {}},
            {
                "id": "call",
                "type": "http.request",
                "title": "Call",
                "position": [200, 0],
                "config": {"method": "POST", "url": "http://127.0.0.1:9/x", "headers": {"X-A": "b"}, "body": "ü ✓"},
                "retry": {"max_attempts": 5, "backoff": "linear", "base_delay": "3s"},
                "continue_on_fail": True,
                "idempotent": False,
            },
        ],
        "edges": [{"from": "start", "to": "call", "port": "out"}],
    }
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    flow = load_flow_text(text)
    assert dump_flow(flow) == text
    path = tmp_path / "all.flow.json"
    save_flow(flow, path)
    again = load_flow(path)
    assert again == flow
    assert flow_to_data(again) == data


def test_defaults_are_left_out_and_integral_positions_written_as_integers() -> None:
    node = '{"id": "s", "type": "trigger.manual", "position": [3.0, 4]}'
    flow = load_flow_text('{"format": "lockgate.flow/1", "id": "d", "nodes": [' + node + ']}')
    data = json.loads(dump_flow(flow))
    assert data == {
        "format": "lockgate.flow/1",
        "id": "d",
        "name": "",
        "nodes": [{"id": "s", "type": "trigger.manual", "title": "", "position": [3, 4], "config": {}}],
        "edges": [],
    }


def test_the_examples_shipped_in_resources_match_the_spec_examples() -> None:
    shipped = ROOT / "resources" / "examples"
    for path in EXAMPLE_FILES:
        assert (shipped / path.name).read_bytes() == path.read_bytes(), f"resources/examples/{path.name} drifted"
