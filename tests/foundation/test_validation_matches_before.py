"""The sped-up validator gives exactly the diagnostics of the one before it, on many varied generated flows.

Shapes that stress the rewritten parts: parallel writers of shared keys, routers and approvals (exclusive
ports) above and between them, joins with and without reducers, several triggers, budget reserves naming
missing or misplaced models, dangling edges.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import validation
from engine.validation import Diagnostic, validate

from .graph_shapes import HOSTILE_SHAPES
from .validation_before import validate_before

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from canvas_frames import generated_flow
from validate_scale import SHAPES

KEYS = ["reply", "tags", "note", "answer"]
MODEL = {"provider": "local", "model": "sim-small", "prompt": "hi"}


def random_flow(seed: int, smallest: int = 6, largest: int = 60) -> dict[str, Any]:
    """A random DAG of `smallest`-`largest` nodes: edges only go to later nodes, ports random, keys shared."""
    rng = random.Random(seed)
    count = rng.randint(smallest, largest)
    kinds = ["set", "set", "set", "router", "approval", "join", "foreach", "ai.model", "budget.reserve", "queue"]
    kinds += ["mystery.step"] if rng.random() < 0.2 else []  # an unknown type: ports unknown, not exclusive
    nodes: list[dict[str, Any]] = []
    triggers = rng.randint(0, 3)
    for index in range(count):
        node_id = f"n{index}"
        kind = "trigger.manual" if index < triggers and index == 0 else rng.choice(kinds)
        if 0 < index < triggers:
            kind = "trigger.event"
        config: dict[str, Any] = {}
        if kind == "trigger.event":
            config = {"event_type": rng.choice(["run.completed", "run.failed", "run.completd"])}
        elif kind == "set":
            keys = rng.sample(KEYS, rng.randint(1, 2))
            config = {"values": {key: f"{{{{ state.{rng.choice(KEYS)} }}}}" for key in keys}}
        elif kind == "router":
            ports = rng.sample(["hi", "lo", "mid"], rng.randint(1, 3))
            config = {"branches": [{"port": port, "when": "{{ inputs.x }}"} for port in ports]}
        elif kind == "approval":
            config = {"timeout": "1h"}
        elif kind == "join":
            config = {"mode": rng.choice(["all", "any"])}
            if rng.random() < 0.5:
                config["reduce"] = {rng.choice(KEYS): "append"}
        elif kind == "foreach":
            config = {"items": "{{ inputs.list }}", "output_key": rng.choice(KEYS)}
        elif kind == "ai.model":
            config = {"provider": "local", "model": "sim-small", "prompt": "hi", "output_key": rng.choice(KEYS)}
        elif kind == "budget.reserve":
            config = {"for": f"n{rng.randrange(count)}" if rng.random() < 0.8 else "modle", "amount": 0.1}
        elif kind == "queue":
            config = {"delay": "1h"}
        nodes.append({"id": node_id, "type": kind, "config": config})
    ports_of = {
        "router": ["hi", "lo", "mid", "default"],
        "approval": ["approved", "rejected"],
        "foreach": ["item", "done"],
        "mystery.step": ["a", "b"],
    }
    edges: list[dict[str, Any]] = []
    for _ in range(rng.randint(count, count * 2)):
        a = rng.randrange(count - 1)
        b = rng.randrange(a + 1, count)
        edge: dict[str, Any] = {"from": f"n{a}", "to": f"n{b}"}
        if nodes[a]["type"] in ports_of:
            edge["port"] = rng.choice(ports_of[nodes[a]["type"]])
        edges.append(edge)
    if rng.random() < 0.2:
        edges.append({"from": "n0", "to": "gone"})
    return {"format": "lockgate.flow/1", "id": f"random-{seed}", "name": "Random", "nodes": nodes, "edges": edges}


def as_tuples(diagnostics: list[Any]) -> list[tuple[str, str, str | None, str]]:
    return [(d.code, d.severity, d.node, d.message) for d in diagnostics]


def assert_same(document: dict[str, Any]) -> list[Diagnostic]:
    # The undeclared-inputs check came after the validator this one is compared with.
    found = [d for d in validate(document) if not (d.code == "template_unknown_reference" and "inputs." in d.message)]
    assert as_tuples(found) == as_tuples(validate_before(document))
    return found


def test_random_flows_give_the_same_diagnostics() -> None:
    conflicts = 0
    for seed in range(400):
        conflicts += sum(d.code == "write_conflict" for d in assert_same(random_flow(seed)))
    assert conflicts > 100  # the flows do exercise the write-conflict rule


def test_larger_random_flows_give_the_same_diagnostics() -> None:
    for seed in range(25):
        found = assert_same(random_flow(1000 + seed, 150, 400))
        assert any(d.code == "write_conflict" for d in found)


def behind_diamonds(document: dict[str, Any], count: int) -> dict[str, Any]:
    """`document` entered after a trigger and `count` parallel diamonds (fork, two branches, join) in a row.

    Every node below then has more forks above it than the validator tries one by one.
    """
    nodes: list[dict[str, Any]] = [{"id": "pre", "type": "trigger.manual", "config": {}}]
    edges: list[dict[str, Any]] = []
    entry = "pre"
    for index in range(count):
        join = f"pre_join{index}"
        for side in ("l", "r"):
            branch = f"pre_{side}{index}"
            nodes.append({"id": branch, "type": "set", "config": {"values": {f"{branch}_key": "x"}}})
            edges += [{"from": entry, "to": branch}, {"from": branch, "to": join}]
        nodes.append({"id": join, "type": "join", "config": {"mode": "all"}})
        entry = join
    heads = [n["id"] for n in document["nodes"][:6] if not n["type"].startswith("trigger.")]
    edges += [{"from": entry, "to": head} for head in heads]
    return {**document, "nodes": nodes + document["nodes"], "edges": edges + document["edges"]}


def test_random_flows_behind_many_forks_give_the_same_diagnostics() -> None:
    conflicts = 0
    for seed in range(120):
        found = assert_same(behind_diamonds(random_flow(2000 + seed, 20, 120), 40))
        conflicts += sum(d.code == "write_conflict" for d in found)
    assert conflicts > 100


@pytest.mark.parametrize("nodes", [60, 300])
def test_canvas_benchmark_flows_give_the_same_diagnostics(nodes: int) -> None:
    conflicts = 0
    for seed in range(4):
        found = assert_same(generated_flow(nodes, nodes * 6 // 5, seed=seed))
        conflicts += sum(d.code == "write_conflict" for d in found)
    assert conflicts > 0


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_benchmark_shapes_give_the_same_diagnostics(shape: str) -> None:
    for seed in range(2):
        assert_same(SHAPES[shape](300, seed))


def test_hints_for_one_missing_name_repeated_past_the_budget_match() -> None:
    models = [{"id": f"model{i}", "type": "ai.model", "config": {**MODEL, "output_key": f"k{i}"}} for i in range(100)]
    reserves = [
        {"id": f"reserve{i}", "type": "budget.reserve", "config": {"for": "modle7" if i % 2 else "x", "amount": 1}}
        for i in range(1200)
    ]
    document = {
        "format": "lockgate.flow/1",
        "id": "hints",
        "name": "Hints",
        "nodes": [{"id": "start", "type": "trigger.manual", "config": {}}, *models, *reserves],
        "edges": [{"from": "start", "to": node["id"]} for node in models + reserves],
    }
    invalid = [d for d in assert_same(document) if d.code == "reserve_target_invalid"]
    assert len(invalid) == 1200
    hinted = [d for d in invalid if "did you mean" in d.message]
    assert 0 < len(hinted) < 1200  # the comparison budget ran out part way, as before


@pytest.mark.parametrize("shape", sorted(HOSTILE_SHAPES))
def test_hostile_shapes_give_the_same_diagnostics(shape: str) -> None:
    assert_same(HOSTILE_SHAPES[shape](250))


def test_with_no_search_budget_every_pair_settled_from_the_other_side_still_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The budgets only choose which exact search runs; at zero every writer with a hard pair walks up and gives
    # up, so the pairs are all settled from the later writer's side.
    monkeypatch.setattr(validation, "FEW_FORKS", 0)
    monkeypatch.setattr(validation, "WALK_BUDGET", 0)
    monkeypatch.setattr(validation, "FEW_CANDIDATES", 0)
    for seed in range(150):
        assert_same(random_flow(3000 + seed, 10, 80))
    for seed in range(30):
        assert_same(behind_diamonds(random_flow(4000 + seed, 20, 120), 5))
    for build in HOSTILE_SHAPES.values():
        assert_same(build(120))
