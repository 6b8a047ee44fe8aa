"""Template lookups: mapping keys before attributes, and Python internals refused at validate time."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from engine.templates import TemplateProblem, evaluate, render, template_reads, template_state_refs, truthy
from tests.foundation.builders import chain, diagnose, node, of_code

METHOD_NAMES = ["items", "keys", "values", "get", "update", "copy"]
TRIGGER = node("start", "trigger.manual")
DONE = node("done", "terminal")


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_a_key_named_like_a_mapping_method_is_the_users_value(name: str) -> None:
    inputs = MappingProxyType({name: (1, 2, 3)})
    state = {name: "mine"}
    assert render(f"{{{{ inputs.{name} | length }}}}", {"inputs": inputs}) == "3"
    assert evaluate(f"{{{{ inputs.{name} }}}}", {"inputs": inputs}) == (1, 2, 3)
    assert evaluate(f"{{{{ state.{name} }}}}", {"state": state}) == "mine"
    assert render(f"{{{{ state.{name} | upper }}}}", {"state": state}) == "MINE"


def test_a_missing_key_still_reaches_the_safe_method() -> None:
    assert evaluate('{{ state.get("k", 7) }}', {"state": {}}) == 7
    assert render("{% for k, v in state.items() %}{{ k }}={{ v }}{% endfor %}", {"state": {"a": 1}}) == "a=1"


def test_attributes_of_other_values_are_unchanged() -> None:
    assert render("{{ state.name.upper() }}", {"state": {"name": "ada"}}) == "ADA"


def test_the_sandbox_still_refuses_internals_at_run_time() -> None:
    with pytest.raises(TemplateProblem, match="unsafe"):
        render("{{ ''.__class__ }}", {})


def test_a_missing_optional_input_is_null_and_false_in_a_condition() -> None:
    inputs = MappingProxyType({"tag": None})
    assert evaluate("{{ inputs.tag }}", {"inputs": inputs}) is None
    assert truthy("{{ inputs.tag }}", {"inputs": inputs}) is False
    assert truthy("{{ inputs.tag == 'x' }}", {"inputs": inputs}) is False


@pytest.mark.parametrize(
    ("source", "refs"),
    [
        ("{{ state.items }}", {"items"}),
        ("{{ state.items | length }}", {"items"}),
        ("{{ state['keys'] }}", {"keys"}),
        ("{{ state.values | join(',') }} {{ state.update }}", {"values", "update"}),
        ('{{ state.get("answer") }}', {"answer"}),
        ("{% for k in state.keys() %}{{ k }}{% endfor %}", set()),
        ("{{ state.copy }}", {"copy"}),
    ],
)
def test_reference_detection_reads_keys_first(source: str, refs: set[str]) -> None:
    assert template_state_refs(source) == refs


@pytest.mark.parametrize(
    ("source", "unsafe"),
    [
        ("{{ ''.__class__ }}", ("__class__",)),
        ("{{ state.x.__class__.__mro__ }}", ("__class__", "__mro__")),
        ("{{ ''.__class__.__mro__[1].__subclasses__() }}", ("__class__", "__mro__", "__subclasses__")),
        ("{{ state['__dict__'] }}", ("__dict__",)),
        ("{{ state | attr('__init__') }}", ("__init__",)),
        ("{{ __builtins__ }}", ("__builtins__",)),
        ("{{ state.items }} {{ inputs._private }}", ()),
        ("plain", ()),
    ],
)
def test_unsafe_names_are_found(source: str, unsafe: tuple[str, ...]) -> None:
    assert sorted(template_reads(source).unsafe) == sorted(unsafe)


@pytest.mark.parametrize("source", ["{{ ''.__class__ }}", "{% if state.__init__ %}x{% endif %}",
                                    "{{ inputs.items.__globals__ }}"])
def test_template_unsafe_is_an_error_at_validate_time(source: str) -> None:
    found = diagnose([TRIGGER, node("s", "set", {"values": {"x": source}}), DONE], chain("start", "s", "done"))
    unsafe = of_code(found, "template_unsafe")
    assert [(d.node, d.severity) for d in unsafe] == [("s", "error")]
    assert "values.x" in unsafe[0].message and "__" in unsafe[0].message


def test_template_unsafe_is_found_in_a_cyclic_flow_too() -> None:
    nodes = [TRIGGER, node("a", "set", {"values": {"x": "{{ run.__class__ }}"}}), node("b", "set"), DONE]
    edges = [*chain("start", "a", "b", "a")]
    assert [d.node for d in of_code(diagnose(nodes, edges), "template_unsafe")] == ["a"]


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_a_state_key_named_like_a_method_is_a_known_reference(name: str) -> None:
    nodes = [TRIGGER, node("w", "set", {"values": {name: "v"}}),
             node("r", "terminal", {"output": f"{{{{ state.{name} | length }}}}"})]
    found = diagnose(nodes, chain("start", "w", "r"))
    assert of_code(found, "template_unknown_reference") == []
    unwritten = diagnose([TRIGGER, nodes[2]], chain("start", "r"))
    assert [d.message for d in of_code(unwritten, "template_unknown_reference")] == [
        f'node "r": output reads state.{name}, which no node writes']
