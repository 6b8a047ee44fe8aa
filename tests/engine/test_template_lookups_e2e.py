"""Template lookups on the real engine: keys named like mapping methods, and optional inputs not given."""

from __future__ import annotations

from tests.engine.conftest import Engine, make_flow

T = {"id": "start", "type": "trigger.manual"}
NAMES = ("items", "keys", "values", "get", "update", "copy")


def test_inputs_and_state_named_like_mapping_methods_are_the_users_values(any_db_engine: Engine) -> None:
    lengths = " ".join(f"{{{{ inputs.{name} | length }}}}" for name in NAMES)
    copies = {f"{name}": f"{{{{ inputs.{name} | join('-') }}}}" for name in NAMES}
    doc = make_flow("methods", [
        T,
        {"id": "copy_in", "type": "set", "config": {"values": copies}},
        {"id": "done", "type": "terminal", "config": {
            "output": lengths + " | " + " ".join(f"{{{{ state.{name} }}}}" for name in NAMES)}},
    ], [("start", "copy_in"), ("copy_in", "done")], {name: {"type": "array", "required": True} for name in NAMES})
    given = {name: [name[:1]] * (index + 1) for index, name in enumerate(NAMES)}
    run = any_db_engine.run(doc, given)
    assert run["status"] == "succeeded", run
    assert run["result"] == "1 2 3 4 5 6 | i k-k v-v-v g-g-g-g u-u-u-u-u c-c-c-c-c-c"
    assert run["state"]["update"] == "u-u-u-u-u"


def test_an_optional_input_not_given_is_null_and_its_default_applies(any_db_engine: Engine) -> None:
    doc = make_flow("optional", [
        T,
        {"id": "route", "type": "router", "config": {"branches": [{"port": "tagged", "when": "{{ inputs.tag }}"}]}},
        {"id": "tagged", "type": "set", "config": {"values": {"seen": "{{ inputs.tag }}"}}},
        {"id": "plain", "type": "set", "config": {"values": {"seen": "{{ inputs.tag }}", "mode": "{{ inputs.mode }}"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.seen is none }}/{{ inputs.mode }}"}},
    ], [("start", "route"), ("route", "tagged", "tagged"), ("route", "default", "plain"), ("tagged", "done"),
        ("plain", "done")],
        {"tag": {"type": "string"}, "mode": {"type": "string", "default": "fast"}})
    run = any_db_engine.run(doc)
    assert run["status"] == "succeeded", run
    assert any_db_engine.step(run, "route")["ports"] == ["default"]
    assert run["state"] == {"seen": None, "mode": "fast"}
    assert run["result"] == "True/fast"
    tagged = any_db_engine.run(doc, {"tag": "red", "mode": "slow"})
    assert any_db_engine.step(tagged, "route")["ports"] == ["tagged"]
    assert tagged["result"] == "False/slow"
