"""Every kind end to end: real Redis streams, real workers, the projector into a real SQL store."""

from __future__ import annotations

from tests.engine.conftest import Engine, Site, make_flow

T = {"id": "start", "type": "trigger.manual"}


def test_hello_flow_succeeds_with_its_greeting(any_db_engine: Engine) -> None:
    greet = {"id": "greet", "type": "set", "config": {"values": {"greeting": "Hello, {{ inputs.name }}!"}}}
    doc = make_flow("hello", [T, greet,
                              {"id": "done", "type": "terminal", "config": {"output": "{{ state.greeting }}"}}],
                    [("start", "greet"), ("greet", "done")], {"name": {"type": "string", "required": True}})
    run = any_db_engine.run(doc, {"name": "Ada"})
    assert run["status"] == "succeeded"
    assert run["result"] == "Hello, Ada!"
    assert run["state"] == {"greeting": "Hello, Ada!"}
    assert [s["status"] for s in run["steps"]] == ["succeeded"] * 3
    assert run["step_counts"] == {"succeeded": 3}


def test_router_takes_one_port_and_skips_the_dead_path(any_db_engine: Engine) -> None:
    doc = make_flow("route", [
        T,
        {"id": "route", "type": "router", "config": {"branches": [
            {"port": "big", "when": "{{ inputs.n > 10 }}"}, {"port": "mid", "when": "{{ inputs.n > 5 }}"}]}},
        {"id": "big", "type": "set", "config": {"values": {"size": "big"}}},
        {"id": "mid", "type": "set", "config": {"values": {"size": "mid"}}},
        {"id": "small", "type": "set", "config": {"values": {"size": "small"}}},
        {"id": "after_big", "type": "set", "config": {"values": {"x": "1"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.size }}"}},
    ], [("start", "route"), ("route", "big", "big"), ("route", "mid", "mid"), ("route", "default", "small"),
        ("big", "after_big"), ("after_big", "done"), ("mid", "done"), ("small", "done")],
        {"n": {"type": "integer", "required": True}})
    run = any_db_engine.run(doc, {"n": 7})
    assert run["result"] == "mid"
    statuses = {s["step"]: s["status"] for s in run["steps"]}
    assert statuses == {"start": "succeeded", "route": "succeeded", "mid": "succeeded", "big": "skipped",
                        "after_big": "skipped", "small": "skipped", "done": "succeeded"}
    assert any_db_engine.step(run, "route")["ports"] == ["mid"]
    assert any_db_engine.run(doc, {"n": 1})["result"] == "small"


def test_join_all_merges_branches_with_reducers(any_db_engine: Engine) -> None:
    doc = make_flow("joinall", [
        T,
        {"id": "a", "type": "set", "config": {"values": {"tags": "{{ ['a'] }}", "total": "{{ 2 }}"}}},
        {"id": "b", "type": "set", "config": {"values": {"tags": "{{ ['b', 'c'] }}", "total": "{{ 3 }}"}}},
        {"id": "both", "type": "join", "config": {"mode": "all", "reduce": {"tags": "append", "total": "sum"}}},
        {"id": "done", "type": "terminal",
         "config": {"output": "{{ state.tags | sort | join(',') }}={{ state.total }}"}},
    ], [("start", "a"), ("start", "b"), ("a", "both"), ("b", "both"), ("both", "done")])
    run = any_db_engine.run(doc)
    assert run["status"] == "succeeded"
    assert run["result"] == "a,b,c=5"
    assert any_db_engine.step(run, "both")["output"] == {"tags": ["a", "b", "c"], "total": 5}


def test_join_any_runs_once_on_the_first_branch(any_db_engine: Engine) -> None:
    doc = make_flow("joinany", [
        T,
        {"id": "a", "type": "set", "config": {"values": {"who": "a"}}},
        {"id": "b", "type": "set", "config": {"values": {"who": "b"}}},
        {"id": "first", "type": "join", "config": {"mode": "any"}},
        {"id": "count", "type": "set", "config": {"values": {"seen": "{{ state.who }}"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.seen }}"}},
    ], [("start", "a"), ("start", "b"), ("a", "first"), ("b", "first"), ("first", "count"), ("count", "done")])
    run = any_db_engine.run(doc)
    assert run["status"] == "succeeded"
    assert run["result"] == "a"
    assert [s["step"] for s in run["steps"]].count("first") == 1
    assert any_db_engine.step(run, "b")["status"] == "succeeded"  # the later branch ran, then ended at the join


def test_foreach_runs_its_body_per_item_within_its_concurrency(any_db_engine: Engine, site: Site) -> None:
    doc = make_flow("loop", [
        T,
        {"id": "each", "type": "foreach", "config": {"items": "{{ inputs.ids }}", "concurrency": 2,
                                                       "output_key": "fetched"}},
        {"id": "fetch", "type": "http.request", "config": {"method": "GET", "url": site.url + "/slow?id={{ item }}",
                                                            "output_key": "page"}},
        {"id": "label", "type": "set",
         "config": {"values": {"label": "item {{ index }}={{ state.page.body.count > 0 }}"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.fetched | map(attribute='label') | list }}"}},
    ], [("start", "each"), ("each", "item", "fetch"), ("fetch", "label"), ("each", "done", "done")],
        {"ids": {"type": "array", "required": True}})
    run = any_db_engine.run(doc, {"ids": [10, 11, 12, 13, 14]})
    assert run["status"] == "succeeded", run["error"]
    assert run["result"] == [f"item {i}=True" for i in range(5)]
    assert site.hits["/slow"] == 5
    assert site.max_in_flight == 2
    steps = {s["step"] for s in run["steps"]}
    assert {"fetch[0]", "fetch[4]", "label[3]"} <= steps
    assert any_db_engine.step(run, "each")["ports"] == ["done"]


def test_http_request_get_and_post_with_templates(any_db_engine: Engine, site: Site) -> None:
    doc = make_flow("http", [
        T,
        {"id": "post", "type": "http.request", "config": {
            "method": "POST", "url": site.url + "/echo", "body": '{"name": "{{ inputs.name }}"}',
            "headers": {"content-type": "application/json"}, "output_key": "echo"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.echo.body.body }}"}},
    ], [("start", "post"), ("post", "done")], {"name": {"type": "string"}})
    run = any_db_engine.run(doc, {"name": "Ada"})
    assert run["status"] == "succeeded"
    assert run["result"] == '{"name": "Ada"}'
    assert any_db_engine.step(run, "post")["output"]["echo"]["status"] == 200


def test_terminal_result_can_be_structured(any_db_engine: Engine) -> None:
    doc = make_flow("obj", [T, {"id": "done", "type": "terminal", "config": {"output": "{{ {'a': [1, 2]} }}"}}],
                    [("start", "done")])
    assert any_db_engine.run(doc)["result"] == {"a": [1, 2]}


def test_frozen_object_inputs_render_through_tojson(engine: Engine, site: Site) -> None:
    # Inputs are frozen read-only mappings; the triage example posts `{{ inputs.ticket | tojson }}`.
    post = {"id": "post", "type": "http.request",
            "config": {"method": "POST", "url": site.url + "/refunds", "body": "{{ inputs.ticket | tojson }}",
                       "output_key": "posted"}}
    doc = make_flow("tojson", [T, post, {"id": "done", "type": "terminal"}], [("start", "post"), ("post", "done")],
                    {"ticket": {"type": "object", "required": True}})
    run = engine.run(doc, {"ticket": {"id": 7, "tags": ["a", "b"], "customer": {"name": "Ada"}}})
    assert run["status"] == "succeeded", run.get("error")
    assert site.hits == {"/refunds": 1}
    assert "\"customer\": {\"name\": \"Ada\"}" in str(run["state"]["posted"])
