"""Malformed documents yield diagnostics, never an exception; valid flows round-trip unchanged."""

from __future__ import annotations

import copy
import json
import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.catalog import CATALOG
from engine.flow import FlowLoadError, dump_flow, flow_from_data, load_flow_text
from engine.validation import Diagnostic, validate, validate_document
from tests.conftest import EXAMPLES

# Modest by default for suite time; LOCKGATE_FUZZ_EXAMPLES=2000 for a long hunt.
FAST = settings(
    max_examples=int(os.environ.get("LOCKGATE_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
NODE_KEYS = ["id", "type", "title", "position", "config", "retry", "continue_on_fail", "idempotent", "colour"]
CONFIG_KEYS = sorted(
    {k for spec in CATALOG.values() for k in spec.config_model.model_fields} | {"for", "delay", "nope"}
)
type_names = st.sampled_from([*CATALOG, "sett", "", "ai"])
short_ids = st.sampled_from(["a", "b", "c", "start", "model", "wait", "x y", ""])


def assert_only_diagnostics(document: Any) -> list[Diagnostic]:
    flow, found = validate_document(document)
    assert isinstance(found, list) and all(isinstance(d, Diagnostic) for d in found)
    assert all(d.severity in ("error", "warning") and isinstance(d.message, str) and d.message for d in found)
    if flow is None:
        assert found and {d.code for d in found} == {"invalid_document"}
    return found


@FAST
@given(json_values)
def test_any_json_value_yields_diagnostics(document: Any) -> None:
    assert_only_diagnostics(document if isinstance(document, dict) else json.dumps(document))
    assert_only_diagnostics(json.dumps(document).encode())


node_shaped = st.dictionaries(
    st.sampled_from(NODE_KEYS),
    json_values,
    max_size=6,
).flatmap(
    lambda extra: st.fixed_dictionaries(
        {
            "id": short_ids,
            "type": type_names,
            "config": st.dictionaries(st.sampled_from(CONFIG_KEYS), json_values | st.text(max_size=20), max_size=4),
        }
    ).map(lambda base: {**base, **{k: v for k, v in extra.items() if k not in ("id", "type", "config")}})
)
edge_shaped = st.fixed_dictionaries(
    {"from": short_ids, "to": short_ids}, optional={"port": st.sampled_from(["out", "default", "approved", "x"])}
)


@FAST
@given(
    st.lists(node_shaped, max_size=6),
    st.lists(edge_shaped, max_size=8),
    st.dictionaries(st.text(max_size=6), json_values, max_size=2),
)
def test_flow_shaped_documents_yield_diagnostics(nodes: list[Any], edges: list[Any], settings_: dict[str, Any]) -> None:
    document: dict[str, Any] = {"format": "lockgate.flow/1", "id": "fuzz", "nodes": nodes, "edges": edges}
    if settings_:
        document["settings"] = settings_
    assert_only_diagnostics(document)
    assert_only_diagnostics(json.dumps(document))


def _example_documents() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(EXAMPLES.glob("*.flow.json"))]


def _containers(value: Any, found: list[Any]) -> list[Any]:
    if isinstance(value, (dict, list)):
        found.append(value)
        for child in value.values() if isinstance(value, dict) else value:
            _containers(child, found)
    return found


def mutate(document: dict[str, Any], rng: random.Random, replacement: Any) -> None:
    """One random damage: drop a key or item, replace a value, duplicate a node, add an edge, retype a node."""
    action = rng.randrange(5)
    nodes = document.get("nodes") if isinstance(document.get("nodes"), list) else []
    if action == 3 and nodes:
        node = rng.choice(nodes)
        if isinstance(node, dict):
            node["type"] = rng.choice(list(CATALOG))
        return
    if action == 4 and nodes and isinstance(document.setdefault("edges", []), list):
        # An earlier mutation may have replaced "edges" with a non-list; then another damage is drawn below.
        ids = [n.get("id") for n in nodes if isinstance(n, dict)] or ["x"]
        document["edges"].append({"from": rng.choice(ids), "to": rng.choice(ids)})
        return
    if action == 2 and nodes:
        nodes.append(copy.deepcopy(rng.choice(nodes)))
        return
    target = rng.choice(_containers(document, []))
    if not target:
        return
    key = rng.choice(list(target)) if isinstance(target, dict) else rng.randrange(len(target))
    if action == 0:
        del target[key]
    else:
        target[key] = replacement


@FAST
@given(st.integers(0, 2), st.randoms(use_true_random=False), st.lists(json_values, min_size=1, max_size=5))
def test_mutated_valid_flows_yield_diagnostics(example: int, rng: random.Random, replacements: list[Any]) -> None:
    document = _example_documents()[example]
    for replacement in replacements:
        mutate(document, rng, replacement)
    assert_only_diagnostics(document)
    assert_only_diagnostics(json.dumps(document))


# Valid flows: a small palette of correctly configured nodes, edges only forwards (a DAG).
PALETTE: dict[str, Any] = {
    "set": st.fixed_dictionaries(
        {
            "values": st.dictionaries(
                st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                st.sampled_from(["x", "{{ state.a }}", "{{ inputs.b }}"]),
                min_size=1,
                max_size=2,
            )
        }
    ),
    "queue": st.fixed_dictionaries({"delay": st.sampled_from(["1h", "90s", "PT2H", 30, 1.5])}),
    "approval": st.fixed_dictionaries(
        {"timeout": st.sampled_from(["24h", 600])}, optional={"message": st.text(max_size=10)}
    ),
    "ai.model": st.fixed_dictionaries(
        {
            "provider": st.just("local"),
            "model": st.just("sim-small"),
            "prompt": st.text(min_size=1, max_size=10).filter(lambda t: "{" not in t),
            "output_key": st.sampled_from(["a", "label"]),
        },
        optional={"max_tokens": st.integers(1, 500), "pool_wait": st.booleans()},
    ),
    "http.request": st.fixed_dictionaries(
        {"method": st.sampled_from(["GET", "POST"]), "url": st.just("http://127.0.0.1:9/")}
    ),
    "terminal": st.fixed_dictionaries({}, optional={"output": st.just("{{ state.a }}")}),
}


@st.composite
def valid_flows(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(0, 7))
    nodes: list[dict[str, Any]] = [
        {"id": "start", "type": "trigger.manual", "title": "", "position": [0, 0], "config": {}}
    ]
    for index in range(count):
        node_type = draw(st.sampled_from(sorted(PALETTE)))
        node: dict[str, Any] = {
            "id": f"n{index}",
            "type": node_type,
            "title": draw(st.text(max_size=8)),
            "position": [draw(st.integers(-500, 500)), draw(st.floats(-500, 500).map(lambda f: round(f, 2)))],
            "config": draw(PALETTE[node_type]),
        }
        if draw(st.booleans()):
            node["retry"] = draw(
                st.fixed_dictionaries(
                    {},
                    optional={"max_attempts": st.integers(1, 9), "backoff": st.sampled_from(["linear", "exponential"])},
                )
            )
        if draw(st.booleans()):
            node["idempotent"] = draw(st.booleans())
        nodes.append(node)
    edges = []
    for target in range(1, len(nodes)):
        source = draw(st.integers(0, target - 1))
        edges.append({"from": nodes[source]["id"], "to": nodes[target]["id"]})
    document: dict[str, Any] = {
        "format": "lockgate.flow/1",
        "id": draw(st.from_regex(r"[a-z0-9][a-z0-9_-]{0,10}", fullmatch=True)),
        "name": draw(st.text(max_size=10)),
    }
    if draw(st.booleans()):
        document["description"] = draw(st.text(min_size=1, max_size=10))
    if draw(st.booleans()):
        document["settings"] = {"max_delay": "10h"}
    document["nodes"] = nodes
    document["edges"] = edges
    return document


@FAST
@given(valid_flows())
def test_valid_generated_flows_round_trip_unchanged(document: dict[str, Any]) -> None:
    flow = flow_from_data(document)
    text = dump_flow(flow)
    again = load_flow_text(text)
    assert again == flow
    assert dump_flow(again) == text
    assert json.loads(text)["nodes"][1:] == [
        {**n, "position": [int(p) if float(p).is_integer() else p for p in n["position"]]}
        for n in document["nodes"][1:]
    ]
    assert not any(d.code == "invalid_document" for d in validate(flow))


# Explicit cases the issue names.


def test_every_truncation_of_an_example_is_invalid_document() -> None:
    text = (EXAMPLES / "ticket-triage.flow.json").read_text()
    for end in range(0, len(text) - 2, 37):
        flow, found = validate_document(text[:end])
        assert flow is None and [d.code for d in found] == ["invalid_document"]
        assert found[0].message.startswith("$: ")


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"format": "lockgate.flow/1", "id": 7}, "$.id"),
        ({"format": "lockgate.flow/1", "id": "x", "nodes": {}}, "$.nodes"),
        ({"format": "lockgate.flow/1", "id": "x", "edges": [1]}, "$.edges[0]"),
        ({"format": "lockgate.flow/1", "id": "x", "enabled": "yes"}, "$.enabled"),
        ({"format": "lockgate.flow/1", "id": "x", "inputs": {"a": {"type": "colour"}}}, "$.inputs.a.type"),
        (
            {"format": "lockgate.flow/1", "id": "x", "nodes": [{"id": "a", "type": "set", "config": []}]},
            "$.nodes[0].config",
        ),
        ({"format": "lockgate.flow/1", "id": "x", "nodes": [{"type": "set", "config": {}}]}, "$.nodes[0].id"),
        ({"format": 1, "id": "x"}, "$.format"),
    ],
)
def test_wrong_types_name_the_json_path(document: dict[str, Any], path: str) -> None:
    found = assert_only_diagnostics(document)
    assert any(d.message.startswith(f"{path}:") for d in found), [d.message for d in found]


def test_ten_megabytes_of_garbage() -> None:
    rng = random.Random(5)
    chunk = "".join(rng.choices('{}[],:"ab 01\\', k=1024 * 1024))
    text = chunk * 10
    assert [d.code for d in assert_only_diagnostics(text)] == ["invalid_document"]
    assert [d.code for d in assert_only_diagnostics(os.urandom(10 * 1024 * 1024))] == ["invalid_document"]
    big_string = json.dumps({"format": "x" * (10 * 1024 * 1024), "id": "x"})
    (problem,) = assert_only_diagnostics(big_string)
    assert len(problem.message) < 200


@pytest.mark.parametrize(
    "text", ["[" * 100_000, '{"a":' * 100_000, '{"format": "lockgate.flow/1", "id": "x", "nodes": [' + "[" * 50_000]
)
def test_deeply_nested_json(text: str) -> None:
    (problem,) = assert_only_diagnostics(text)
    path, _, message = problem.message.partition(": ")
    assert path.startswith("$") and message == "nested deeper than 100 levels; flatten it"


def test_deeply_nested_values_built_in_python() -> None:
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(20_000):
        cursor["a"] = {}
        cursor = cursor["a"]
    document = {
        "format": "lockgate.flow/1",
        "id": "x",
        "nodes": [{"id": "s", "type": "set", "config": {"values": deep}}],
    }
    (problem,) = assert_only_diagnostics(document)
    assert problem.message.startswith("$.nodes[0].config.values.a.a.a") and "nested deeper than" in problem.message
    document = {"format": "lockgate.flow/1", "id": "x", "nodes": [{"id": "s", "type": "trigger.manual", "title": deep}]}
    assert_only_diagnostics(document)


def test_flow_from_data_raises_only_flow_load_error() -> None:
    with pytest.raises(FlowLoadError) as problem:
        flow_from_data({"format": "lockgate.flow/1", "id": "x", "nodes": [{"type": "set"}]})
    assert ("$.nodes[0].id", "required but missing; add it") in problem.value.problems


@pytest.mark.parametrize("approvers", [[[]], [{"name": "bob"}, "ann"], [None]])
def test_an_approval_with_non_string_approvers_says_invalid_config(approvers: list[Any]) -> None:
    document = json.loads((EXAMPLES / "ticket-triage.flow.json").read_text())
    approval = next(node for node in document["nodes"] if node["type"] == "approval")
    approval["config"]["approvers"] = approvers
    approval["config"]["required"] = 2
    found = assert_only_diagnostics(document)
    assert "invalid_config" in {d.code for d in found if d.node == "approve"}


@pytest.mark.parametrize(("node_type", "config", "key"), [
    ("http.request", {"method": "GET", "url": ""}, "url"),
    ("http.request", {"method": "GET", "url": "   "}, "url"),
    ("ai.model", {"provider": "local", "model": "sim-small", "prompt": "", "output_key": "answer"}, "prompt"),
    ("router", {"branches": [{"port": "yes", "when": " "}]}, "branches.0.when"),
])
def test_a_required_template_left_empty_is_an_error(node_type: str, config: dict[str, Any], key: str) -> None:
    """Empty is not set: a node cannot call an empty URL or ask an empty prompt, and the app's form says so too."""
    flow = flow_from_data({"format": "lockgate.flow/1", "id": "blank", "name": "Blank",
                           "nodes": [{"id": "start", "type": "trigger.manual"},
                                     {"id": "n", "type": node_type, "config": config},
                                     {"id": "done", "type": "terminal"}],
                           "edges": [{"from": "start", "to": "n"}, {"from": "n", "to": "done"}]})
    errors = [d for d in validate(flow) if d.code == "invalid_config"]
    assert [(d.code, d.message) for d in errors] == [
        ("invalid_config", f'node "n" ({node_type}): config.{key} is empty; it is required, set it')], errors
