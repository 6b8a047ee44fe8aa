"""Template state references (fast path agrees with Jinja's parser) and the flow graph's reachability."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine.flow_graph import FlowGraph
from engine.templates import TemplateProblem, check_template, template_reads, template_state_refs

_reference_env = ImmutableSandboxedEnvironment()


def parser_refs(source: str) -> frozenset[str]:
    """State keys as Jinja's own parser sees them: the reference the fast path must agree with."""
    refs = set()
    for found in _reference_env.parse(source).find_all((nodes.Getattr, nodes.Getitem)):
        reads_state = isinstance(found, (nodes.Getattr, nodes.Getitem)) and _is_state(found.node)
        if isinstance(found, nodes.Getattr) and reads_state:
            refs.add(found.attr)
        elif isinstance(found, nodes.Getitem) and reads_state:
            key = found.arg.value if isinstance(found.arg, nodes.Const) else None
            if isinstance(key, str):
                refs.add(key)
    return frozenset(refs)


def _is_state(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "state"


names = st.sampled_from(["state", "inputs", "run", "item", "a", "not", "and", "if", "x_1"])
holes = st.lists(names, min_size=1, max_size=3).map(lambda parts: "{{ " + ".".join(parts) + " }}")
pieces = st.lists(holes | st.sampled_from(["text ", "}}", "{", "}", " ", "{{", "{%", "-", "|", "\n"]), max_size=6)


@settings(max_examples=150, deadline=None)
@given(pieces)
def test_simple_template_references_agree_with_the_parser(parts: list[str]) -> None:
    source = "".join(parts)
    try:
        expected: frozenset[str] | None = parser_refs(source)
    except Exception:
        expected = None
    template_reads.cache_clear()
    if expected is None:
        with pytest.raises(TemplateProblem):
            template_state_refs(source)
    else:
        assert template_state_refs(source) == expected


@pytest.mark.parametrize(
    ("source", "refs"),
    [
        ("{{ state.label }}", {"label"}),
        ("{{state.label.text}} and {{ state.other }}", {"label", "other"}),
        ("{{ state['label'] }}", {"label"}),
        ("{{ state.a == 'x' and state.b }}", {"a", "b"}),
        ("{% for t in state.tags %}{{ t }}{% endfor %}", {"tags"}),
        ("{{ inputs.state.x }}", set()),
        ("plain text", set()),
    ],
)
def test_state_references(source: str, refs: set[str]) -> None:
    assert template_state_refs(source) == refs


@pytest.mark.parametrize("source", ["{{ oops", "{{ not }}", "{% if %}", "{{ state. }}"])
def test_templates_that_do_not_parse(source: str) -> None:
    with pytest.raises(TemplateProblem):
        check_template(source)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30))
    )
)
def test_flow_graph_reachability_matches_networkx(case: tuple[int, list[tuple[int, int]]]) -> None:
    count, pairs = case
    links = [(f"n{a}", f"n{b}") for a, b in pairs if a < b]  # forwards only: acyclic
    ids = [f"n{i}" for i in range(count)]
    graph = FlowGraph(ids, links)
    reference = nx.DiGraph()
    reference.add_nodes_from(ids)
    reference.add_edges_from(links)
    assert graph.acyclic
    chosen = ids[::2]
    below_wanted = graph.below_ancestors_in(graph.mask(chosen))
    for node_id in ids:
        assert set(graph.members(graph.descendants(node_id))) == nx.descendants(reference, node_id)
        assert set(graph.members(graph.ancestors(node_id))) == nx.ancestors(reference, node_id)
        above = nx.ancestors(reference, node_id)
        related = {n for a in above for n in nx.descendants(reference, a)}
        assert set(graph.members(graph.related(node_id))) == related
        assert set(graph.members(below_wanted[node_id])) == {
            n for a in above if a in chosen for n in nx.descendants(reference, a)
        }
    for blocked in ids[:3]:
        wanted = graph.mask(ids)
        without = reference.copy()
        without.remove_node(blocked)
        start = next(i for i in ids if i != blocked) if count > 1 else blocked
        expected = nx.descendants(without, start) if start in without else set()
        assert set(graph.members(graph.reachable_avoiding(start, blocked, wanted))) == expected


def test_flow_graph_finds_cycles() -> None:
    graph = FlowGraph(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "a"), ("a", "b")])
    assert not graph.acyclic
    assert [sorted(cycle) for cycle in graph.cycles(5)] == [["a", "b", "c"]]
