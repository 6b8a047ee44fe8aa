"""What a step was given (its config rendered at that moment, redacted, bounded) is kept apart from its output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from engine.clock import ManualClock
from engine.events import EventBase, EventStamper
from engine.events.models import StepFailed, StepStarted
from engine.flow import flow_from_data
from engine.runtime.context import RunContext
from engine.runtime.executor import RunExecutor
from engine.runtime.given import MAX_GIVEN_CHARS, truncated
from engine.runtime.plan import FlowPlan
from engine.store.models import Step
from tests.cli import LOCKGATE, cli_env
from tests.conftest import EXAMPLES
from tests.engine.conftest import Engine, Site, make_flow

T = {"id": "start", "type": "trigger.manual"}
SECRET = "sk-live-7c1e-do-not-show"


def _stored_row(engine: Engine, run_id: str, step: str) -> dict[str, Any]:
    """The steps row as the projector wrote it, read straight from SQL."""
    sql = engine.services.sql
    assert sql is not None
    with sql.connect() as connection:
        row = connection.execute(sa.select(Step.input, Step.output)
                                 .where(Step.run_id == run_id, Step.step == step)).mappings().one()
    return dict(row)


def test_set_records_its_rendered_values_as_given_and_its_writes_as_output(engine: Engine) -> None:
    greet = {"id": "greet", "type": "set",
             "config": {"values": {"greeting": "Hello, {{ inputs.name }}!", "n": "{{ inputs.n * 2 }}"}}}
    doc = make_flow("given_set", [T, greet, {"id": "done", "type": "terminal", "config": {"output": "{{ state.n }}"}}],
                    [("start", "greet"), ("greet", "done")],
                    {"name": {"type": "string"}, "n": {"type": "integer"}})
    run = engine.run(doc, {"name": "Ada", "n": 21})
    assert run["status"] == "succeeded"
    step = engine.step(run, "greet")
    assert step["given"] == {"values": {"greeting": "Hello, Ada!", "n": 42}}
    assert step["output"] == {"greeting": "Hello, Ada!", "n": 42}
    assert _stored_row(engine, run["id"], "greet") == {"input": step["given"], "output": step["output"]}
    # the terminal was given its rendered output; the trigger nothing (its config is empty)
    assert engine.step(run, "done")["given"] == {"output": 42}
    assert engine.step(run, "start")["given"] is None


def test_http_post_records_method_url_headers_and_body_with_the_secret_redacted(engine: Engine, site: Site) -> None:
    call = {"id": "call", "type": "http.request", "config": {
        "method": "POST", "url": site.url + "/orders?who={{ inputs.who }}",
        "headers": {"authorization": "Bearer {{ inputs.token }}", "content-type": "application/json"},
        "body": '{"token": "{{ inputs.token }}", "qty": {{ inputs.qty }}}', "output_key": "echo"}}
    done = {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.token in state.echo.body.body }}"}}
    doc = make_flow("given_http", [T, call, done], [("start", "call"), ("call", "done")],
                    {"token": {"type": "string", "secret": True, "required": True},
                     "who": {"type": "string"}, "qty": {"type": "integer"}})
    run = engine.run(doc, {"token": SECRET, "who": "ada", "qty": 3})
    assert run["status"] == "succeeded"
    assert run["result"] is True  # the server received the real token in the POST body
    step = engine.step(run, "call")
    assert step["given"] == {
        "method": "POST", "url": site.url + "/orders?who=ada",
        "headers": {"authorization": "Bearer ***", "content-type": "application/json"},
        "body": '{"token": "***", "qty": 3}', "timeout": "30s"}
    assert step["output"]["echo"]["status"] == 200
    assert step["output"]["echo"]["body"]["body"] == '{"token": "***", "qty": 3}'
    assert "method" not in step["output"]["echo"]  # output is what the server answered, not the request
    stored = _stored_row(engine, run["id"], "call")
    assert stored["input"] == step["given"]
    assert SECRET not in orjson.dumps(stored).decode()
    assert SECRET not in orjson.dumps(engine.services.get_run(run["id"])).decode()


def test_router_records_each_branch_condition_result(engine: Engine) -> None:
    doc = make_flow("given_route", [
        T,
        {"id": "route", "type": "router", "config": {"branches": [
            {"port": "big", "when": "{{ inputs.n > 10 }}"}, {"port": "mid", "when": "{{ inputs.n > 5 }}"},
            {"port": "odd", "when": "{{ inputs.n is odd }}"}]}},
        {"id": "big", "type": "set", "config": {"values": {"size": "big"}}},
        {"id": "mid", "type": "set", "config": {"values": {"size": "mid"}}},
        {"id": "odd", "type": "set", "config": {"values": {"size": "odd"}}},
        {"id": "small", "type": "set", "config": {"values": {"size": "small"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.size }}"}},
    ], [("start", "route"), ("route", "big", "big"), ("route", "mid", "mid"), ("route", "odd", "odd"),
        ("route", "default", "small"), ("big", "done"), ("mid", "done"), ("odd", "done"), ("small", "done")],
        {"n": {"type": "integer", "required": True}})
    run = engine.run(doc, {"n": 7})
    assert run["result"] == "mid"  # the first true branch wins, though `odd` is true as well
    route = engine.step(run, "route")
    assert route["given"] == {"branches": [{"port": "big", "result": False}, {"port": "mid", "result": True},
                                           {"port": "odd", "result": True}]}
    assert route["ports"] == ["mid"] and route["output"] == {}
    small = engine.run(doc, {"n": 2})
    assert small["result"] == "small"
    assert [b["result"] for b in engine.step(small, "route")["given"]["branches"]] == [False, False, False]


def test_long_values_are_cut_in_given_but_written_whole(engine: Engine) -> None:
    doc = make_flow("given_long", [T, {"id": "big", "type": "set", "config": {"values": {"text": "{{ 'x' * 5000 }}"}}}],
                    [("start", "big")])
    run = engine.run(doc)
    step = engine.step(run, "big")
    assert len(step["output"]["text"]) == 5000
    shown = step["given"]["values"]["text"]
    assert shown.startswith("x" * MAX_GIVEN_CHARS) and shown.endswith("… [truncated 904 of 5000 chars]")
    assert truncated("short") == "short"


def test_step_started_events_carry_given_and_a_failed_render_still_starts_the_step() -> None:
    doc = make_flow("given_events", [
        T,
        {"id": "wait", "type": "queue", "config": {"delay": "2h"}},
    ], [("start", "wait")])
    bad = make_flow("given_bad", [T, {"id": "oops", "type": "set", "config": {"values": {"v": "{{ nope.x }}"}}}],
                    [("start", "oops")])

    class Capture:
        def __init__(self) -> None:
            self.events: list[EventBase] = []

        def emit(self, event: EventBase) -> None:
            self.events.append(event)

        def flush(self) -> None:
            pass

    clock = ManualClock(1_000.0)
    for document, status in ((doc, "parked"), (bad, "failed")):
        flow = flow_from_data(document)
        capture = Capture()
        outcome = RunExecutor(FlowPlan(flow), RunContext("r1", flow.id, 1, "start", {}), EventStamper("r1", clock),
                              capture, clock).start({})
        assert outcome.status == status
        started = {e.step: e for e in capture.events if isinstance(e, StepStarted)}
        if status == "parked":
            assert started["wait"].given == {"delay": "2h", "delay_seconds": 7200.0}
            assert outcome.park is not None and outcome.park.due_at == 1_000.0 + 7200
        else:
            assert started["oops"].given == {}
            failed = [e for e in capture.events if isinstance(e, StepFailed)]
            assert failed and failed[0].error_type == "template_error"


def test_runs_show_json_includes_given_and_output(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    done = subprocess.run([*LOCKGATE, "run", str(EXAMPLES / "hello.flow.json"), "--input", 'name="Ada"', "--json"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["id"]
    shown = subprocess.run([*LOCKGATE, "runs", "show", run_id, "--json"], env=env, capture_output=True, text=True,
                           timeout=30)
    assert shown.returncode == 0, shown.stderr
    steps = {step["step"]: step for step in json.loads(shown.stdout)["steps"]}
    assert steps["greet"]["given"] == {"values": {"greeting": "Hello, Ada!"}}
    assert steps["greet"]["output"] == {"greeting": "Hello, Ada!"}
