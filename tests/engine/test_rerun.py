"""Rerun from here, on the real engine (SQLite and PostgreSQL): upstream steps are reused, never executed
again (the counting server sees no second upstream effect), the state container is the one the node first
started with, and versions that differ upstream are refused with the differing nodes named."""

from __future__ import annotations

from typing import Any

import pytest

from engine.flow import flow_from_data
from engine.runtime.rerun import RerunRefused
from tests.engine.conftest import Engine, Site, make_flow

TRIGGER = {"id": "start", "type": "trigger.manual"}


def _flow(site: Site, *, greeting: str = "Hello", tail: str = "done") -> dict[str, Any]:
    """start -> charge (POST, not idempotent) -> greet -> notify (POST) -> done, and a router branch."""
    return make_flow("rerun_me", [
        TRIGGER,
        {"id": "charge", "type": "http.request",
         "config": {"method": "POST", "url": site.url + "/charge", "output_key": "charged"}},
        {"id": "greet", "type": "set",
         "config": {"values": {"greeting": greeting + ", {{ inputs.name }} #{{ state.charged.body.count }}"}}},
        {"id": "notify", "type": "http.request",
         "config": {"method": "POST", "url": site.url + "/notify", "body": "{{ state.greeting }}",
                    "output_key": "notified"}},
        {"id": tail, "type": "terminal", "config": {"output": "{{ state.greeting }}"}},
    ], [("start", "charge"), ("charge", "greet"), ("greet", "notify"), ("notify", tail)],
        inputs={"name": {"type": "string"}})


def _rerun(engine: Engine, run_id: str, node: str, version: Any = "original") -> dict[str, Any]:
    created, _plan = engine.services.rerun_run(run_id, node, version)
    return engine.services.wait_for_run(created.run_id)


def test_a_rerun_repeats_no_upstream_effect_and_starts_from_the_recorded_state(any_db_engine: Engine,
                                                                                site: Site) -> None:
    first = any_db_engine.run(_flow(site), {"name": "Ada"})
    assert first["status"] == "succeeded"
    assert site.hits == {"/charge": 1, "/notify": 1}

    plan = any_db_engine.services.plan_rerun(first["id"], "greet")
    assert [step.node for step in plan.reused] == ["start", "charge"]
    assert plan.repeated_effects == ("notify",)  # charge is reused; notify runs again and already had its effect

    rerun = _rerun(any_db_engine, first["id"], "greet")
    assert rerun["status"] == "succeeded"
    assert site.hits == {"/charge": 1, "/notify": 2}  # the upstream POST is never sent again
    assert (rerun["rerun_of"], rerun["from_node"]) == (first["id"], "greet")
    assert [(s["step"], s["status"], s["reused_from"]) for s in rerun["steps"]] == [
        ("start", "succeeded", first["id"]), ("charge", "succeeded", first["id"]),
        ("greet", "succeeded", None), ("notify", "succeeded", None), ("done", "succeeded", None)]
    reused_charge, original_charge = any_db_engine.step(rerun, "charge"), any_db_engine.step(first, "charge")
    assert (reused_charge["ports"], reused_charge["output"], reused_charge["type"], reused_charge["attempts"]) == (
        original_charge["ports"], original_charge["output"], "http.request", 0)
    assert rerun["result"] == first["result"] == "Hello, Ada #1"
    original_greet = any_db_engine.step(first, "greet")
    assert any_db_engine.step(rerun, "greet")["given"] == original_greet["given"]
    assert rerun["state"]["charged"] == first["state"]["charged"]
    assert rerun["state"]["greeting"] == first["state"]["greeting"]


def test_a_rerun_from_a_non_idempotent_node_runs_it_and_nothing_before_it(any_db_engine: Engine, site: Site) -> None:
    first = any_db_engine.run(_flow(site), {"name": "Ada"})
    rerun = _rerun(any_db_engine, first["id"], "notify")
    assert rerun["status"] == "succeeded"
    assert site.hits == {"/charge": 1, "/notify": 2}
    assert [s["step"] for s in rerun["steps"] if s["reused_from"] is None] == ["notify", "done"]
    assert any_db_engine.services.plan_rerun(first["id"], "charge").repeated_effects == ("charge", "notify")


def test_the_current_version_is_refused_when_it_differs_upstream(any_db_engine: Engine, site: Site) -> None:
    first = any_db_engine.run(_flow(site), {"name": "Ada"})
    any_db_engine.services.publish_flow(flow_from_data(_flow(site, greeting="Hi")))  # greet changed
    with pytest.raises(RerunRefused) as refused:
        any_db_engine.services.rerun_run(first["id"], "notify", "current")
    assert refused.value.kind == "upstream_changed"
    assert refused.value.nodes == ("greet",)
    assert refused.value.original_version == 1
    assert site.hits == {"/charge": 1, "/notify": 1}  # nothing started

    rerun = _rerun(any_db_engine, first["id"], "greet", "current")  # greet itself may change: it runs again
    assert (rerun["status"], rerun["version"], rerun["result"]) == ("succeeded", 2, "Hi, Ada #1")
    assert site.hits == {"/charge": 1, "/notify": 2}


def test_a_rewired_upstream_is_named(any_db_engine: Engine, site: Site) -> None:
    first = any_db_engine.run(_flow(site), {"name": "Ada"})
    rewired = _flow(site)
    rewired["nodes"].insert(2, {"id": "extra", "type": "set", "config": {"values": {"x": "1"}}})
    rewired["edges"] = [e for e in rewired["edges"] if e != {"from": "charge", "to": "greet"}]
    rewired["edges"] += [{"from": "charge", "to": "extra"}, {"from": "extra", "to": "greet"}]
    any_db_engine.services.publish_flow(flow_from_data(rewired))
    with pytest.raises(RerunRefused) as refused:
        any_db_engine.services.plan_rerun(first["id"], "notify", "current")
    assert set(refused.value.nodes) == {"extra", "charge", "greet"}
    downstream_only = _flow(site, tail="end")  # only what follows notify changed
    any_db_engine.services.publish_flow(flow_from_data(downstream_only))
    rerun = _rerun(any_db_engine, first["id"], "notify", "current")
    assert [s["step"] for s in rerun["steps"] if s["reused_from"] is None] == ["notify", "end"]


def test_refusals_are_kinds(any_db_engine: Engine, site: Site) -> None:
    first = any_db_engine.run(_flow(site), {"name": "Ada"})
    for node, kind in (("nope", "unknown_node"),):
        with pytest.raises(RerunRefused) as refused:
            any_db_engine.services.plan_rerun(first["id"], node)
        assert refused.value.kind == kind
    with pytest.raises(RerunRefused) as unknown:
        any_db_engine.services.plan_rerun("no-such-run", "greet")
    assert unknown.value.kind == "unknown_run"
    branchy = make_flow("branchy", [TRIGGER, {"id": "route", "type": "router", "config": {
        "branches": [{"port": "never", "when": "{{ false }}"}]}},
        {"id": "skipped", "type": "set", "config": {"values": {"x": "1"}}},
        {"id": "done", "type": "terminal"}],
        [("start", "route"), ("route", "never", "skipped"), ("route", "default", "done")])
    run = any_db_engine.run(branchy)
    assert run["status"] == "succeeded", run
    with pytest.raises(RerunRefused) as not_run:
        any_db_engine.services.plan_rerun(run["id"], "skipped")
    assert not_run.value.kind == "node_not_run"
    rerun = _rerun(any_db_engine, run["id"], "done")
    # the dead path is worked out again (and recorded as skipped); nothing before "done" runs
    assert sorted((s["step"], s["status"], s["reused_from"]) for s in rerun["steps"]) == [
        ("done", "succeeded", None), ("route", "succeeded", run["id"]), ("skipped", "skipped", None),
        ("start", "succeeded", run["id"])]


def test_a_failure_gone_past_and_a_foreach_upstream_are_reused_as_recorded(any_db_engine: Engine, site: Site) -> None:
    doc = make_flow("reuse", [
        TRIGGER,
        {"id": "flop", "type": "http.request", "config": {"method": "POST", "url": site.url + "/fail"},
         "continue_on_fail": True},
        {"id": "each", "type": "foreach", "config": {"items": "{{ [1, 2] }}", "output_key": "posted"}},
        {"id": "post", "type": "http.request", "config": {"method": "POST", "url": site.url + "/item"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ errors.flop.type }} {{ state.posted | length }}"}},
    ], [("start", "flop"), ("flop", "each"), ("each", "item", "post"), ("each", "done", "done")])
    first = any_db_engine.run(doc)
    assert (first["status"], first["result"]) == ("succeeded", "http_status 2"), first
    with pytest.raises(RerunRefused) as inside:
        any_db_engine.services.plan_rerun(first["id"], "post")
    assert inside.value.kind == "node_in_foreach"
    rerun = _rerun(any_db_engine, first["id"], "done")
    assert (rerun["status"], rerun["result"]) == ("succeeded", "http_status 2"), rerun
    assert rerun["errors"] == first["errors"]
    flop = any_db_engine.step(rerun, "flop")
    assert (flop["status"], flop["reused_from"], flop["error_type"]) == ("failed", first["id"], "http_status")
    assert flop["error"] == any_db_engine.step(first, "flop")["error"]
    assert any_db_engine.step(rerun, "each")["output"] == any_db_engine.step(first, "each")["output"]
    assert site.hits == {"/fail": 1, "/item": 2}
    again = _rerun(any_db_engine, first["id"], "each")  # a foreach reruns whole, its body included
    assert again["status"] == "succeeded"
    assert site.hits == {"/fail": 1, "/item": 4}


def test_an_unfinished_run_and_a_run_given_secrets_are_refused(any_db_engine: Engine) -> None:
    services = any_db_engine.services
    services.publish_flow(flow_from_data(make_flow("later", [
        TRIGGER, {"id": "wait", "type": "queue", "config": {"delay": "1h"}}, {"id": "done", "type": "terminal"}],
        [("start", "wait"), ("wait", "done")])))
    waiting = services.create_run("later").run_id
    services.wait_for_run(waiting, statuses=frozenset({"waiting"}))
    with pytest.raises(RerunRefused) as unfinished:
        services.plan_rerun(waiting, "wait")
    assert unfinished.value.kind == "run_not_finished"
    secret = make_flow("secret", [TRIGGER, {"id": "done", "type": "terminal"}], [("start", "done")],
                       inputs={"token": {"type": "string", "secret": True}})
    run = any_db_engine.run(secret, {"token": "s3cr3t"})
    with pytest.raises(RerunRefused) as gone:
        services.plan_rerun(run["id"], "done")
    assert gone.value.kind == "secret_inputs_gone" and "token" in str(gone.value)


def test_a_rerun_can_be_rerun_from_a_step_it_ran_or_one_it_reused(any_db_engine: Engine, site: Site) -> None:
    """A rerun's record holds its seed and reused steps (its events carry them), so it plans like any run."""
    first = any_db_engine.run(_flow(site), {"name": "Ada"})
    second = _rerun(any_db_engine, first["id"], "notify")
    assert second["state"] == first["state"] | {"notified": second["state"]["notified"]}
    plan = any_db_engine.services.plan_rerun(second["id"], "notify")
    assert [step.node for step in plan.reused] == ["start", "charge", "greet"]
    assert plan.state == any_db_engine.services.plan_rerun(first["id"], "notify").state
    third = _rerun(any_db_engine, second["id"], "greet")  # greet was reused in the second run
    assert (third["status"], third["result"], third["rerun_of"]) == ("succeeded", "Hello, Ada #1", second["id"])
    assert [(s["step"], s["reused_from"]) for s in third["steps"]] == [
        ("start", second["id"]), ("charge", second["id"]), ("greet", None), ("notify", None), ("done", None)]
    assert third["state"]["charged"] == first["state"]["charged"]
    assert site.hits == {"/charge": 1, "/notify": 3}


def _told(tail: list[dict[str, Any]] | None = None, edges: list[Any] | None = None) -> dict[str, Any]:
    """start -> tell (renders wait's URL, by name) -> also (by a name known only at run time) -> wait
    (wait.callback, ends through timed_out at once) -> late; or `tell` and `also` followed by `tail`."""
    return make_flow("told", [
        TRIGGER,
        {"id": "tell", "type": "set", "config": {"values": {"url": "{{ callback_url('wait') }}"}}},
        {"id": "also", "type": "set",
         "config": {"values": {"again": "{% set which = 'wait' %}{{ callback_url(which) }}"}}},
        *(tail or [{"id": "wait", "type": "wait.callback", "config": {"timeout": "0s", "output_key": "reply"}},
                   {"id": "late", "type": "terminal", "config": {"output": "{{ 'late' }}"}}]),
    ], [("start", "tell"), ("tell", "also"),
        *(edges or [("also", "wait"), ("wait", "timed_out", "late")])])


def test_a_rerun_reusing_a_rendered_callback_url_of_a_node_that_runs_again_is_refused(engine: Engine) -> None:
    first = engine.run(_told())
    assert (first["status"], first["result"]) == ("succeeded", "late"), first
    assert first["state"]["url"] == first["state"]["again"]
    for node in ("wait", "late"):
        if node == "late":  # wait is reused too: nothing needs its URL again
            assert [step.node for step in engine.services.plan_rerun(first["id"], node).reused] == [
                "start", "tell", "also", "wait"]
            continue
        with pytest.raises(RerunRefused) as refused:
            engine.services.plan_rerun(first["id"], node)
        assert refused.value.kind == "callback_url_reused"
        assert refused.value.nodes == ("tell", "also")
        message = str(refused.value)
        assert '"tell" calls callback_url("wait")' in message and '"also" calls callback_url("wait")' in message
        assert 'Rerun from "tell" or earlier' in message
    with pytest.raises(RerunRefused) as started:
        engine.services.rerun_run(first["id"], "also")  # also runs again; tell still holds the old URL
    assert (started.value.kind, started.value.nodes) == ("callback_url_reused", ("tell",))
    assert len(engine.services.list_runs()) == 1  # nothing started
    rerun = _rerun(engine, first["id"], "tell")
    assert (rerun["status"], rerun["result"]) == ("succeeded", "late")
    assert rerun["state"]["url"] != first["state"]["url"]  # the rerun's own URL


def test_a_callback_url_for_a_node_the_reused_steps_ruled_out_refuses_nothing(engine: Engine) -> None:
    doc = _told([
        {"id": "route", "type": "router", "config": {"branches": [{"port": "never", "when": "{{ false }}"}]}},
        {"id": "wait", "type": "wait.callback", "config": {"timeout": "1h"}},
        {"id": "done", "type": "terminal"},
    ], [("also", "route"), ("route", "never", "wait"), ("route", "default", "done"), ("wait", "received", "done")])
    first = engine.run(doc)
    assert first["status"] == "succeeded", first
    assert engine.step(first, "wait")["status"] == "skipped"
    rerun = _rerun(engine, first["id"], "done")  # route is reused: wait stays on a dead path
    assert rerun["status"] == "succeeded"
    with pytest.raises(RerunRefused) as refused:  # route runs again and might take the wait
        engine.services.plan_rerun(first["id"], "route")
    assert refused.value.kind == "callback_url_reused"


def test_an_unknown_version_names_the_original_as_the_default(engine: Engine, site: Site) -> None:
    first = engine.run(_flow(site), {"name": "Ada"})
    engine.services.publish_flow(flow_from_data(_flow(site, greeting="Hi")))
    with pytest.raises(RerunRefused) as refused:
        engine.services.plan_rerun(first["id"], "notify", 9)
    message = str(refused.value)
    assert refused.value.kind == "unknown_version"
    assert "has no version 9 (its versions are 1 to 2)" in message
    assert "the original run's version (1)" in message and '"current"' in message
    assert "latest" not in message
