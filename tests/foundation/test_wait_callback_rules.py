"""`wait.callback` at validate time: its config, ports and timeout limit, and `callback_url("x")` naming a
`wait.callback` node (`callback_unknown_node`); the template function has no URL outside a run."""

from __future__ import annotations

from typing import Any

import pytest

from engine.catalog import CATALOG, written_keys
from engine.templates import TemplateProblem, render, template_callback_refs
from tests.foundation.builders import chain, codes, diagnose, edge, end, node, of_code, queue, reserve, setter, start


def wait(node_id: str = "wait", **config: Any) -> dict[str, Any]:
    return node(node_id, "wait.callback", {"timeout": "1h", **config})


def _ends(source: str = "wait") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return [end("done"), end("late")], [edge(source, "done", "received"), edge(source, "late", "timed_out")]


def test_a_flow_announcing_its_callback_url_is_clean() -> None:
    ends, end_edges = _ends()
    found = diagnose([start(), setter("announce", url="{{ callback_url('wait') }}"), wait(output_key="reply"),
                      *ends], [*chain("start", "announce", "wait"), *end_edges])
    assert found == []


def test_the_catalog_entry() -> None:
    spec = CATALOG["wait.callback"]
    assert (spec.kind, spec.category, spec.park_reasons) == ("listen", "Waiting", ("callback",))
    assert spec.output_ports({}) == ("received", "timed_out")
    assert spec.default_idempotent({}) is True
    assert written_keys("wait.callback", "wait", {"output_key": "reply"}) == ("reply",)
    assert written_keys("wait.callback", "wait", {}) == ("wait",)


@pytest.mark.parametrize(("template", "named"), [
    ("{{ callback_url('nowhere') }}", "nowhere"),
    ('see {{ callback_url("announce") }} please', "announce"),
    ("{% if true %}{{ callback_url('waitt') }}{% endif %}", "waitt"),
])
def test_callback_url_naming_no_wait_callback_node_is_an_error(template: str, named: str) -> None:
    ends, end_edges = _ends()
    found = diagnose([start(), setter("announce", url=template), wait(), *ends],
                     [*chain("start", "announce", "wait"), *end_edges])
    [problem] = of_code(found, "callback_unknown_node")
    assert problem.severity == "error" and problem.node == "announce"
    assert f'callback_url("{named}")' in problem.message and '"wait"' in problem.message
    if named == "waitt":
        assert 'did you mean "wait"' in problem.message


def test_callback_url_in_a_flow_without_wait_callback_nodes() -> None:
    found = diagnose([start(), node("post", "http.request", {"method": "POST", "url": "https://example.com",
                                                               "body": "{{ callback_url('wait') }}"}), end()],
                     chain("start", "post", "done"))
    [problem] = of_code(found, "callback_unknown_node")
    assert problem.node == "post" and "body" in problem.message and "none in this flow" in problem.message


def test_the_timeout_is_required_and_bounded_by_max_delay() -> None:
    ends, end_edges = _ends()
    missing = diagnose([start(), node("wait", "wait.callback", {}), *ends], [*chain("start", "wait"), *end_edges])
    assert "invalid_config" in codes(missing)
    too_long = diagnose([start(), wait(timeout="72h"), *ends], [*chain("start", "wait"), *end_edges])
    [problem] = of_code(too_long, "delay_too_long")
    assert problem.node == "wait" and "71h" in problem.message
    bad = diagnose([start(), wait(timeout="soon"), *ends], [*chain("start", "wait"), *end_edges])
    assert "bad_duration" in codes(bad)
    unknown = diagnose([start(), wait(url="x"), *ends], [*chain("start", "wait"), *end_edges])
    assert "unknown_config_key" in codes(unknown)


def test_waiting_for_a_callback_inside_a_finance_chain_is_refused() -> None:
    model = node("model", "ai.model", {"provider": "local", "model": "sim", "prompt": "hi", "output_key": "a"})
    found = diagnose([start(), reserve("hold", "model"), wait(), model, end("late"), end()],
                     [*chain("start", "hold", "wait"), edge("wait", "model", "received"),
                      edge("wait", "late", "timed_out"), *chain("model", "done")])
    [problem] = of_code(found, "park_inside_finance_chain")
    assert problem.node == "wait"


def test_received_and_timed_out_are_exclusive_branches() -> None:
    found = diagnose([start(), wait(), setter("a", note="{{ 'got it' }}"), setter("b", note="{{ 'gave up' }}"),
                      queue("q", "1s"), end()],
                     [*chain("start", "wait"), edge("wait", "a", "received"), edge("wait", "b", "timed_out"),
                      edge("a", "q"), edge("b", "q"), *chain("q", "done")])
    assert "write_conflict" not in codes(found)


def test_template_callback_refs() -> None:
    assert template_callback_refs("{{ callback_url('a') }} {{ callback_url(\"b\") }}").nodes == {"a", "b"}
    assert template_callback_refs("{{ callback_url(state.node) }}").dynamic
    assert template_callback_refs("no templates, callback_url('x') is text").nodes == frozenset()


def test_callback_url_outside_a_run_is_a_template_error() -> None:
    with pytest.raises(TemplateProblem, match="only inside a run"):
        render("{{ callback_url('wait') }}", {})
    assert render("{{ callback_url('wait') }}", {"callback_url": lambda n: f"https://x/callbacks/{n}"}) \
        == "https://x/callbacks/wait"
