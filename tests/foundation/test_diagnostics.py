"""Every diagnostic code of the flow-format spec, with its boundaries."""

from __future__ import annotations

import time

import pytest

from engine.validation import has_errors, validate, validate_document
from tests.foundation.builders import (
    approval,
    chain,
    codes,
    diagnose,
    edge,
    end,
    flow_doc,
    model,
    node,
    of_code,
    queue,
    reserve,
    setter,
    start,
)


def test_a_clean_flow_has_no_diagnostics() -> None:
    found = diagnose(
        [start(), setter("greet", greeting="Hi {{ inputs.name }}"), end()], chain("start", "greet", "done"),
        inputs={"name": {"type": "string"}},
    )
    assert found == []
    assert not has_errors(found)


# invalid_document


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ("{not json", "$"),
        ('{"format": "lockgate.flow/0", "id": "x"}', "$.format"),
        ('{"format": "lockgate.flow/1"}', "$.id"),
        ('{"format": "lockgate.flow/1", "id": "x", "nodes": "many"}', "$.nodes"),
        ('{"format": "lockgate.flow/1", "id": "x", "nodes": [{"type": "set"}]}', "$.nodes[0].id"),
        (
            '{"format": "lockgate.flow/1", "id": "x", "nodes": [{"id": "a", "type": "set", "position": "here"}]}',
            "$.nodes[0].position",
        ),
        ('{"format": "lockgate.flow/1", "id": "x", "edges": [{"from": "a"}]}', "$.edges[0].to"),
        ('{"format": "lockgate.flow/1", "id": "x", "colour": "red"}', "$.colour"),
        ('{"format": "lockgate.flow/1", "id": "Not An Id"}', "$.id"),
        ("[1, 2]", "$"),
    ],
)
def test_invalid_document_names_the_json_path(document: str, path: str) -> None:
    flow, found = validate_document(document)
    assert flow is None
    assert codes(found) and set(codes(found)) == {"invalid_document"}
    assert all(d.severity == "error" and d.node is None for d in found)
    assert any(d.message.startswith(f"{path}:") for d in found), [d.message for d in found]


def test_unknown_top_level_key_is_refused_with_a_fix() -> None:
    _, found = validate_document({**flow_doc([start()], []), "extra": 1})
    assert "remove it or check its spelling" in found[0].message


# duplicate_node_id, unknown_node_type, invalid_config, unknown_config_key


def test_duplicate_node_id() -> None:
    found = diagnose([start(), setter("a", x="1"), setter("a", y="2")], chain("start", "a"))
    assert of_code(found, "duplicate_node_id")[0].node == "a"
    assert "defined twice" in of_code(found, "duplicate_node_id")[0].message


def test_unknown_node_type_suggests_the_close_one() -> None:
    found = diagnose([start(), node("x", "sett", {"values": {"a": "1"}})], chain("start", "x"))
    (problem,) = of_code(found, "unknown_node_type")
    assert problem.node == "x" and 'did you mean "set"' in problem.message


def test_missing_required_config_is_invalid_config_with_the_field() -> None:
    found = diagnose([start(), node("s", "set")], chain("start", "s"))
    (problem,) = of_code(found, "invalid_config")
    assert problem.node == "s" and "config.values" in problem.message and "required" in problem.message


def test_mistyped_config_is_invalid_config_with_the_field_path() -> None:
    found = diagnose(
        [start(), node("r", "budget.reserve", {"for": "m", "amount": -1}), model("m")],
        chain("start", "r", "m"),
    )
    (problem,) = of_code(found, "invalid_config")
    assert "config.amount" in problem.message


def test_router_branch_field_path_is_in_the_message() -> None:
    found = diagnose(
        [start(), node("route", "router", {"branches": [{"port": "a", "when": 3}]})],
        chain("start", "route"),
    )
    assert any("branches.0.when" in d.message for d in of_code(found, "invalid_config"))


def test_unknown_config_key_with_did_you_mean() -> None:
    found = diagnose(
        [start(), node("wait", "queue", {"delay": "1h", "dealy": "2h"}), end()], chain("start", "wait", "done")
    )
    (problem,) = of_code(found, "unknown_config_key")
    assert problem.node == "wait" and '"dealy"' in problem.message and 'did you mean "delay"' in problem.message


def test_unknown_config_key_for_a_type_without_config() -> None:
    found = diagnose([start("s"), node("t", "trigger.manual", {"cron": "* * * * *"})], [])
    assert codes(of_code(found, "unknown_config_key")) == ["unknown_config_key"]


# bad_duration, bad_template


@pytest.mark.parametrize("delay", ["soon", "", "1x", "PT", [1]])
def test_bad_duration(delay: object) -> None:
    found = diagnose([start(), queue("wait", delay), end()], chain("start", "wait", "done"))
    assert "bad_duration" in codes(found) or "invalid_config" in codes(found)
    if isinstance(delay, str):
        assert of_code(found, "bad_duration")[0].node == "wait"


def test_bad_duration_in_settings() -> None:
    found = diagnose([start()], [], settings={"max_delay": "forever"})
    (problem,) = of_code(found, "bad_duration")
    assert problem.node is None and "settings.max_delay" in problem.message


def test_bad_template() -> None:
    found = diagnose([start(), setter("s", x="{{ oops"), end()], chain("start", "s", "done"))
    (problem,) = of_code(found, "bad_template")
    assert problem.node == "s" and "values.x" in problem.message


# edges


def test_edge_unknown_node_with_did_you_mean() -> None:
    found = diagnose([start(), setter("greet", a="1")], [edge("start", "gret")])
    (problem,) = of_code(found, "edge_unknown_node")
    assert '"gret"' in problem.message and 'did you mean "greet"' in problem.message


def test_edge_unknown_port_with_did_you_mean() -> None:
    found = diagnose(
        [start(), approval("ask"), end("yes"), end("no")],
        [*chain("start", "ask"), edge("ask", "yes", "approve"), edge("ask", "no", "rejected")],
    )
    (problem,) = of_code(found, "edge_unknown_port")
    assert problem.node == "ask" and 'did you mean "approved"' in problem.message


def test_edge_without_port_from_a_node_with_several_outputs() -> None:
    found = diagnose([start(), approval("ask"), end()], chain("start", "ask", "done"))
    assert "name the port" in of_code(found, "edge_unknown_port")[0].message


def test_edge_from_a_terminal_and_into_a_trigger_are_refused() -> None:
    found = diagnose([start(), end(), start("other")], [*chain("start", "done"), edge("done", "other")])
    assert len(of_code(found, "edge_unknown_port")) == 1
    found = diagnose([start(), setter("s", a="1"), start("other")], [*chain("start", "s"), edge("s", "other")])
    assert "is a trigger" in of_code(found, "edge_unknown_port")[0].message


def test_router_ports_come_from_its_branches() -> None:
    router = node("route", "router", {"branches": [{"port": "urgent", "when": "{{ true }}"}]})
    found = diagnose(
        [start(), router, end("a"), end("b")],
        [*chain("start", "route"), edge("route", "a", "urgent"), edge("route", "b", "default")],
    )
    assert found == []


# no_trigger, cycle


def test_no_trigger() -> None:
    found = diagnose([setter("s", a="1")], [])
    assert "no_trigger" in codes(found)


def test_cycle_is_listed() -> None:
    found = diagnose(
        [start(), setter("a", x="1"), setter("b", y="2"), setter("c", z="3")],
        [*chain("start", "a", "b", "c"), edge("c", "a")],
    )
    (problem,) = of_code(found, "cycle")
    for name in ("a", "b", "c"):
        assert f'"{name}"' not in problem.message  # plain names in a path, not quoted
        assert name in problem.message.split(": ", 1)[1]
    assert problem.message.count("→") == 3


def test_several_cycles_are_each_listed() -> None:
    found = diagnose(
        [start(), setter("a", x="1"), setter("b", y="2"), setter("c", z="3"), setter("d", w="4")],
        [*chain("start", "a", "b"), edge("b", "a"), *chain("start", "c", "d"), edge("d", "c")],
    )
    assert len(of_code(found, "cycle")) == 2


# delay_too_long, decision_time_too_long


@pytest.mark.parametrize(
    ("delay", "too_long"),
    [
        ("71h", False),
        ("71h1s", True),
        ("PT71H", False),
        (255600, False),
        (255601, True),
        ("3d", True),
        ("2d23h", False),
    ],
)
def test_queue_delay_limit_defaults_to_71h(delay: object, too_long: bool) -> None:
    found = diagnose([start(), queue("wait", delay), end()], [*chain("start", "wait"), edge("wait", "done")])
    assert ("delay_too_long" in codes(found)) is too_long
    if too_long:
        assert "71h" in of_code(found, "delay_too_long")[0].message
        assert of_code(found, "delay_too_long")[0].node == "wait"


@pytest.mark.parametrize(("timeout", "too_long"), [("71h", False), ("71h1s", True), ("255600", False)])
def test_approval_timeout_limit_defaults_to_71h(timeout: str, too_long: bool) -> None:
    found = diagnose(
        [start(), approval("ask", timeout), end("yes"), end("no")],
        [*chain("start", "ask"), edge("ask", "yes", "approved"), edge("ask", "no", "rejected")],
    )
    assert ("decision_time_too_long" in codes(found)) is too_long
    assert "delay_too_long" not in codes(found)


@pytest.mark.parametrize(
    ("max_delay", "delay", "too_long"), [("2h", "2h", False), ("2h", "2h1s", True), ("100h", "80h", False)]
)
def test_settings_max_delay_sets_the_limit(max_delay: str, delay: str, too_long: bool) -> None:
    nodes = [start(), queue("wait", delay), approval("ask", delay), end("yes"), end("no")]
    edges = [
        *chain("start", "wait"),
        edge("wait", "ask"),
        edge("ask", "yes", "approved"),
        edge("ask", "no", "rejected"),
    ]
    found = diagnose(nodes, edges, settings={"max_delay": max_delay})
    assert ("delay_too_long" in codes(found)) is too_long
    assert ("decision_time_too_long" in codes(found)) is too_long


# park_inside_finance_chain


def test_queue_between_reserve_and_model_is_refused() -> None:
    found = diagnose(
        [start(), reserve("reserve", "model"), queue("wait"), model(), end()],
        chain("start", "reserve", "wait", "model", "done"),
    )
    (problem,) = of_code(found, "park_inside_finance_chain")
    assert problem.node == "wait" and '"reserve"' in problem.message and '"model"' in problem.message


def test_parking_after_the_model_is_fine() -> None:
    found = diagnose(
        [start(), reserve("reserve", "model"), model(), queue("wait"), approval("ask"), end("yes"), end("no")],
        [
            *chain("start", "reserve", "model", "wait", "ask"),
            edge("ask", "yes", "approved"),
            edge("ask", "no", "rejected"),
        ],
    )
    assert found == []


def test_parking_before_the_reserve_is_fine() -> None:
    found = diagnose(
        [start(), queue("wait"), reserve("reserve", "model"), model(), end()],
        chain("start", "wait", "reserve", "model", "done"),
    )
    assert found == []


def test_a_parallel_branch_from_the_reserve_that_parks_is_refused() -> None:
    found = diagnose(
        [start(), reserve("reserve", "model"), model(), end(), approval("ask"), end("yes"), end("no")],
        [
            *chain("start", "reserve", "model", "done"),
            edge("reserve", "ask"),
            edge("ask", "yes", "approved"),
            edge("ask", "no", "rejected"),
        ],
    )
    assert [d.node for d in of_code(found, "park_inside_finance_chain")] == ["ask"]


def test_parking_reachable_both_through_and_around_the_model_is_refused() -> None:
    found = diagnose(
        [start(), reserve("reserve", "model"), model(), setter("side", x="1"), queue("wait"), end()],
        [*chain("start", "reserve", "model", "wait", "done"), edge("reserve", "side"), edge("side", "wait")],
    )
    assert [d.node for d in of_code(found, "park_inside_finance_chain")] == ["wait"]


def test_only_the_reserves_own_model_ends_the_chain() -> None:
    found = diagnose(
        [start(), reserve("reserve", "model"), model("other", output_key="o"), queue("wait"), model(), end()],
        chain("start", "reserve", "other", "wait", "model", "done"),
    )
    assert [d.node for d in of_code(found, "park_inside_finance_chain")] == ["wait"]


# reserve_target_invalid


def test_reserve_for_a_node_that_is_not_a_model() -> None:
    found = diagnose(
        [start(), reserve("reserve", "note"), setter("note", a="1"), end()], chain("start", "reserve", "note", "done")
    )
    (problem,) = of_code(found, "reserve_target_invalid")
    assert problem.node == "reserve" and "a set, not an ai.model" in problem.message


def test_reserve_for_a_missing_node_suggests_a_model() -> None:
    found = diagnose([start(), reserve("reserve", "modle"), model(), end()], chain("start", "reserve", "model", "done"))
    (problem,) = of_code(found, "reserve_target_invalid")
    assert "no such node" in problem.message and 'did you mean "model"' in problem.message


def test_reserve_for_an_upstream_model() -> None:
    found = diagnose([start(), model(), reserve("reserve", "model"), end()], chain("start", "model", "reserve", "done"))
    (problem,) = of_code(found, "reserve_target_invalid")
    assert "not downstream" in problem.message


def test_reserve_for_a_model_on_another_branch() -> None:
    found = diagnose(
        [start(), reserve("reserve", "model"), model(), end(), end("other")],
        [*chain("start", "reserve", "other"), edge("start", "model"), edge("model", "done")],
    )
    assert codes(of_code(found, "reserve_target_invalid")) == ["reserve_target_invalid"]


# triggers


def test_duplicate_webhook_trigger() -> None:
    found = diagnose(
        [node("a", "trigger.webhook"), node("b", "trigger.webhook"), end()], [edge("a", "done"), edge("b", "done")]
    )
    (problem,) = of_code(found, "duplicate_webhook_trigger")
    assert problem.node == "b" and '"a"' in problem.message


def test_duplicate_event_trigger_and_distinct_events_are_fine() -> None:
    failed = node("f", "trigger.event", {"event_type": "run.failed"})
    also_failed = node("g", "trigger.event", {"event_type": "run.failed"})
    succeeded = node("h", "trigger.event", {"event_type": "run.succeeded"})
    found = diagnose([failed, also_failed, succeeded, end()], [edge(n, "done") for n in "fgh"])
    assert [d.node for d in of_code(found, "duplicate_event_trigger")] == ["g"]


def test_unknown_event_type_with_did_you_mean() -> None:
    found = diagnose([node("t", "trigger.event", {"event_type": "run.faild"}), end()], [edge("t", "done")])
    (problem,) = of_code(found, "unknown_event_type")
    assert 'did you mean "run.failed"' in problem.message


@pytest.mark.parametrize(
    ("config", "bad"),
    [
        ({"cron": "0 9 * * 1-5"}, False),
        ({"every": "15m"}, False),
        ({"every": 30, "timezone": "Europe/Berlin"}, False),
        ({"cron": "every morning"}, True),
        ({"cron": "61 * * * *"}, True),
        ({"every": "0s"}, True),
        ({"every": -5}, True),
        ({}, True),
        ({"cron": "0 9 * * *", "every": "1h"}, True),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, True),
    ],
)
def test_bad_schedule(config: dict[str, object], bad: bool) -> None:
    found = diagnose([node("tick", "trigger.schedule", config), end()], [edge("tick", "done")])
    assert ("bad_schedule" in codes(found)) is bad
    assert has_errors(found) is bad


# join_needs_two_inputs


def test_join_needs_two_inputs() -> None:
    found = diagnose([start(), node("j", "join"), end()], chain("start", "j", "done"))
    assert of_code(found, "join_needs_two_inputs")[0].node == "j"
    found = diagnose(
        [start(), setter("a", x="1"), setter("b", y="2"), node("j", "join"), end()],
        [*chain("start", "a", "j", "done"), *chain("start", "b", "j")],
    )
    assert "join_needs_two_inputs" not in codes(found)


# warnings


def test_unreachable_node_is_a_warning() -> None:
    found = diagnose(
        [start(), end(), setter("orphan", a="1"), end("after")], [*chain("start", "done"), edge("orphan", "after")]
    )
    assert sorted(str(d.node) for d in of_code(found, "unreachable_node")) == ["after", "orphan"]
    assert not has_errors(found)


def test_port_unconnected_names_the_port() -> None:
    found = diagnose([start(), approval("ask"), end()], [*chain("start", "ask"), edge("ask", "done", "approved")])
    (problem,) = of_code(found, "port_unconnected")
    assert problem.severity == "warning" and problem.node == "ask" and '"rejected"' in problem.message


def test_template_reading_a_key_written_upstream_is_fine() -> None:
    found = diagnose(
        [start(), setter("a", greeting="hi"), setter("b", loud="{{ state.greeting | upper }}"), end()],
        chain("start", "a", "b", "done"),
    )
    assert found == []


@pytest.mark.parametrize(
    "template", ["{{ state.greting }}", "{{ state['greting'] }}", "{% if state.greting %}x{% endif %}"]
)
def test_template_unknown_reference_with_did_you_mean(template: str) -> None:
    found = diagnose(
        [start(), setter("a", greeting="hi"), setter("b", loud=template), end()], chain("start", "a", "b", "done")
    )
    (problem,) = of_code(found, "template_unknown_reference")
    assert problem.node == "b" and "state.greting" in problem.message and 'did you mean "greeting"' in problem.message


def test_template_reading_a_key_only_written_downstream_warns() -> None:
    found = diagnose(
        [start(), setter("b", loud="{{ state.greeting }}"), setter("a", greeting="hi"), end()],
        chain("start", "b", "a", "done"),
    )
    (problem,) = of_code(found, "template_unknown_reference")
    assert '"a"' in problem.message and "not upstream" in problem.message


def test_model_output_key_and_approval_id_are_written_keys() -> None:
    found = diagnose(
        [start(), model(output_key="label"), approval("ask"), end("yes"), end("no")],
        [
            *chain("start", "model", "ask"),
            edge("ask", "yes", "approved"),
            edge("ask", "no", "rejected"),
        ],
    )
    assert found == []
    found = diagnose(
        [start(), model(output_key="label"), setter("s", a="{{ state.label }} {{ state.model }}"), end()],
        chain("start", "model", "s", "done"),
    )
    assert [d.message.split("reads ")[1].split(",")[0] for d in of_code(found, "template_unknown_reference")] == [
        "state.model"
    ]


@pytest.mark.parametrize("template", ["{{ inputs.nmae }}", "{{ inputs['nmae'] }}", "{% if inputs.nmae %}x{% endif %}"])
def test_template_reading_an_undeclared_input_warns_with_did_you_mean(template: str) -> None:
    found = diagnose([start(), setter("s", a=template), end()], chain("start", "s", "done"),
                     inputs={"name": {"type": "string"}})
    (problem,) = of_code(found, "template_unknown_reference")
    assert problem.severity == "warning" and problem.node == "s"
    assert "inputs.nmae" in problem.message and 'did you mean "name"' in problem.message


def test_declared_inputs_and_their_fields_are_not_reported() -> None:
    found = diagnose([start(), setter("s", a="{{ inputs.ticket.body }} {{ inputs.name | upper }}"), end()],
                     chain("start", "s", "done"),
                     inputs={"ticket": {"type": "object"}, "name": {"type": "string"}})
    assert of_code(found, "template_unknown_reference") == []


# write_conflict


def test_parallel_writers_of_one_key_warn() -> None:
    found = diagnose(
        [start(), setter("a", reply="a"), setter("b", reply="b"), end("x"), end("y")],
        [*chain("start", "a", "x"), *chain("start", "b", "y")],
    )
    (problem,) = of_code(found, "write_conflict")
    assert problem.severity == "warning" and "state.reply" in problem.message


def test_a_join_reducer_decides_parallel_writes() -> None:
    nodes = [
        start(),
        setter("a", reply="a"),
        setter("b", reply="b"),
        node("j", "join", {"reduce": {"reply": "append"}}),
        end(),
    ]
    edges = [*chain("start", "a", "j", "done"), *chain("start", "b", "j")]
    assert diagnose(nodes, edges) == []
    nodes[3] = node("j", "join", {"reduce": {"other": "append"}})
    assert codes(diagnose(nodes, edges)) == ["write_conflict"]


def test_router_exclusive_branches_do_not_conflict() -> None:
    router = node("route", "router", {"branches": [{"port": "hi", "when": "{{ true }}"}]})
    found = diagnose(
        [start(), router, setter("a", reply="a"), setter("b", reply="b"), node("j", "join", {"mode": "any"}), end()],
        [
            *chain("start", "route"),
            edge("route", "a", "hi"),
            edge("route", "b", "default"),
            *chain("a", "j", "done"),
            edge("b", "j"),
        ],
    )
    assert found == []


def test_approval_branches_do_not_conflict() -> None:
    found = diagnose(
        [start(), approval("ask"), setter("a", reply="a"), setter("b", reply="b"), end("x"), end("y")],
        [
            *chain("start", "ask"),
            edge("ask", "a", "approved"),
            edge("ask", "b", "rejected"),
            *chain("a", "x"),
            *chain("b", "y"),
        ],
    )
    assert found == []


def test_one_router_port_to_two_targets_runs_both() -> None:
    router = node("route", "router", {"branches": [{"port": "hi", "when": "{{ true }}"}]})
    found = diagnose(
        [start(), router, setter("a", reply="a"), setter("b", reply="b"), end("x"), end("y"), end("z")],
        [
            *chain("start", "route"),
            edge("route", "a", "hi"),
            edge("route", "b", "hi"),
            edge("route", "z", "default"),
            *chain("a", "x"),
            *chain("b", "y"),
        ],
    )
    assert codes(found) == ["write_conflict"]


def test_exclusive_branches_below_an_earlier_parallel_diamond_do_not_conflict() -> None:
    router = node("route", "router", {"branches": [{"port": "hi", "when": "{{ true }}"}]})
    nodes = [
        start(),
        setter("left", l="1"),
        setter("right", r="2"),
        node("j", "join"),
        router,
        setter("a", reply="a"),
        setter("b", reply="b"),
        end("x"),
        end("y"),
    ]
    edges = [
        *chain("start", "left", "j"),
        *chain("start", "right", "j"),
        *chain("j", "route"),
        edge("route", "a", "hi"),
        edge("route", "b", "default"),
        *chain("a", "x"),
        *chain("b", "y"),
    ]
    assert diagnose(nodes, edges) == []


def test_sequential_writers_and_different_triggers_do_not_conflict() -> None:
    found = diagnose([start(), setter("a", reply="a"), setter("b", reply="b"), end()], chain("start", "a", "b", "done"))
    assert found == []
    found = diagnose(
        [start("one"), start("two"), setter("a", reply="a"), setter("b", reply="b"), end("x"), end("y")],
        [*chain("one", "a", "x"), *chain("two", "b", "y")],
    )
    assert found == []


def test_parallel_branches_behind_a_foreach_conflict() -> None:
    loop = node("each", "foreach", {"items": "{{ inputs.list }}"})
    found = diagnose(
        [start(), loop, setter("a", reply="a"), setter("b", reply="b"), end("x"), end("y")],
        [
            *chain("start", "each"),
            edge("each", "a", "item"),
            edge("each", "b", "done"),
            *chain("a", "x"),
            *chain("b", "y"),
        ],
        inputs={"list": {"type": "array"}},
    )
    assert codes(found) == ["write_conflict"]


# order and shape


def test_errors_come_before_warnings() -> None:
    found = diagnose([start(), setter("orphan", a="1"), node("x", "nope")], [])
    severities = [d.severity for d in found]
    assert severities == sorted(severities, key=lambda s: s != "error")
    assert "error" in severities and "warning" in severities


def test_validate_accepts_text_bytes_dicts_and_flows() -> None:
    doc = flow_doc([start(), setter("orphan", a="{{ state.nope }}")], [])
    import json

    from engine.flow import flow_from_data

    expected = validate(flow_from_data(doc))
    assert expected
    assert validate(doc) == expected
    assert validate(json.dumps(doc)) == expected
    assert validate(json.dumps(doc).encode()) == expected
    assert expected[0].to_dict().keys() == {"code", "severity", "node", "message"}


def test_many_parallel_writers_get_one_warning_each_and_stay_fast() -> None:
    writers = [setter(f"w{i}", reply=str(i)) for i in range(1500)]
    nodes = [start(), *writers, end()]
    edges = [edge("start", w["id"]) for w in writers] + [edge(w["id"], "done") for w in writers]
    started = time.process_time()
    found = diagnose(nodes, edges)
    assert time.process_time() - started < 5  # one warning per pair took minutes and printed 1.1 million lines
    conflicts = of_code(found, "write_conflict")
    flagged = {d.node for d in conflicts}
    raced = {d.message.split('"')[1] for d in conflicts}
    assert len(conflicts) == len(flagged) == 1499
    assert len(raced) == 1 and raced.isdisjoint(flagged)


def test_thousands_of_dangling_names_stay_fast_and_the_first_get_hints() -> None:
    steps = [setter(f"step{i}", **{f"key{i}": f"{{{{ state.kye{i} }}}}"}) for i in range(3000)]
    ids = ["start", *(s["id"] for s in steps)]
    dangling = [edge(f"step{i}", f"step{i}x") for i in range(1000)]
    started = time.process_time()
    found = diagnose([start(), *steps], [*chain(*ids), *dangling])
    assert time.process_time() - started < 5  # a did-you-mean for each took over half a minute
    missing = of_code(found, "edge_unknown_node")
    assert len(missing) == 1000 and len(of_code(found, "template_unknown_reference")) == 3000
    assert "did you mean \"step0\"" in missing[0].message
