"""Failures are recorded on their step, never crash a worker; retries, continue_on_fail, secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.clock import ManualClock
from engine.events import EventBase, EventStamper, encode_event
from engine.flow import flow_from_data
from engine.runtime.context import RunContext
from engine.runtime.executor import RunExecutor
from engine.runtime.inputs import redacted_inputs, secret_names
from engine.runtime.plan import FlowPlan
from engine.store.models import Run
from engine.transport.keys import Keyspace
from tests.engine.conftest import Engine, Site, make_flow

T = {"id": "start", "type": "trigger.manual"}
DONE = {"id": "done", "type": "terminal", "config": {"output": "ok"}}


def test_http_failure_fails_the_step_and_the_run_with_the_error(engine: Engine, site: Site) -> None:
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/fail"}}
    doc = make_flow("down", [T, call, DONE], [("start", "call"), ("call", "done")])
    run = engine.run(doc)
    assert run["status"] == "failed"
    assert run["error_type"] == "http_status"
    assert "HTTP 503" in run["error"] and '"call"' in run["error"]
    call = engine.step(run, "call")
    assert call["status"] == "failed" and "HTTP 503" in call["error"]
    assert "done" not in {s["step"] for s in run["steps"]}
    # the worker survived: the next run works
    ok = make_flow("after", [T, DONE], [("start", "done")])
    assert engine.run(ok)["status"] == "succeeded"


def test_refused_connection_and_template_error_fail_their_steps(engine: Engine) -> None:
    doc = make_flow("refused", [T, {"id": "call", "type": "http.request",
                                    "config": {"method": "GET", "url": "http://127.0.0.1:9/nothing", "timeout": "2s"}},
                                DONE], [("start", "call"), ("call", "done")])
    run = engine.run(doc)
    assert run["status"] == "failed" and run["error_type"] == "http_error"
    bad = make_flow("tpl", [T, {"id": "calc", "type": "set", "config": {"values": {"x": "{{ 1 / 0 }}"}}}, DONE],
                    [("start", "calc"), ("calc", "done")])
    run = engine.run(bad)
    assert run["status"] == "failed"
    assert run["error_type"] == "template_error"
    assert "ZeroDivisionError" in engine.step(run, "calc")["error"]


def _first_parked_at(engine: Engine, run_id: str) -> Any:
    assert engine.services.sql is not None
    with engine.services.sql.connect() as conn:
        return conn.execute(sa.select(Run.first_parked_at).where(Run.id == run_id)).scalar_one()


def test_retries_without_a_delay_run_at_once_until_success(engine: Engine, site: Site) -> None:
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/flaky"},
            "retry": {"max_attempts": 4, "backoff": "exponential", "base_delay": "0s"}}
    doc = make_flow("flaky", [T, call, DONE], [("start", "call"), ("call", "done")])
    run = engine.run(doc)
    assert run["status"] == "succeeded" and _first_parked_at(engine, run["id"]) is None
    assert site.hits["/flaky"] == 3
    call = engine.step(run, "call")
    assert call["status"] == "succeeded" and call["attempts"] == 3
    assert engine.sleeps == []


def test_retries_inside_a_foreach_wait_inline_capped_by_max_interval(engine: Engine, site: Site) -> None:
    call = {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/flaky"},
            "retry": {"max_attempts": 4, "backoff": "exponential", "base_delay": "2s", "max_interval": "3s"}}
    doc = make_flow("loop", [T, {"id": "each", "type": "foreach", "config": {"items": "{{ [1] }}"}}, call, DONE],
                    [("start", "each"), ("each", "item", "call"), ("each", "done", "done")])
    run = engine.run(doc)
    assert run["status"] == "succeeded" and _first_parked_at(engine, run["id"]) is None  # a loop's step cannot park
    assert engine.step(run, "call[0]")["attempts"] == 3
    assert engine.sleeps == [2.0, 3.0]  # 2s, then 4s capped at 3s, through the injected sleep


def test_retries_exhausted_then_continue_on_fail_goes_on(engine: Engine, site: Site) -> None:
    doc = make_flow("cof", [
        T,
        {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/fail"},
         "retry": {"max_attempts": 2, "backoff": "linear", "base_delay": 0}, "continue_on_fail": True},
        {"id": "done", "type": "terminal",
         "config": {"output": "{{ errors.call.type }} after {{ errors.call.attempts }}"}},
    ], [("start", "call"), ("call", "done")])
    run = engine.run(doc)
    assert run["status"] == "succeeded"
    assert run["result"] == "http_status after 2"
    assert engine.step(run, "call")["status"] == "failed"
    assert site.hits["/fail"] == 2


def test_a_body_exception_fails_the_step_not_the_worker(engine: Engine) -> None:
    doc = make_flow("loopbad", [T, {"id": "each", "type": "foreach", "config": {"items": "{{ 42 }}"}}, DONE],
                    [("start", "each"), ("each", "done", "done")])
    run = engine.run(doc)
    assert run["status"] == "failed"
    assert "not a list" in engine.step(run, "each")["error"]
    assert engine.run(make_flow("fine", [T, DONE], [("start", "done")]))["status"] == "succeeded"


SECRET = "tok-3f9a-very-secret"


def _secret_flow(url: str) -> dict:
    return make_flow("secret", [
        T,
        {"id": "keep", "type": "set",
         "config": {"values": {"header": "Bearer {{ inputs.token }}", "who": "{{ inputs.who }}"}}},
        {"id": "call", "type": "http.request", "config": {"method": "GET", "url": url + "/echo?k={{ inputs.token }}",
                                                          "headers": {"authorization": "Bearer {{ inputs.token }}"},
                                                          "output_key": "echo"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.echo.body.auth }}"}},
    ], [("start", "keep"), ("keep", "call"), ("call", "done")],
        {"token": {"type": "string", "secret": True, "required": True}, "who": {"type": "string"}})


def test_secret_inputs_are_redacted_in_rows_but_reach_the_step(engine: Engine, site: Site) -> None:
    run = engine.run(_secret_flow(site.url), {"token": SECRET, "who": "ada"})
    assert run["status"] == "succeeded"
    assert run["inputs"] == {"token": "***", "who": "ada"}
    assert run["result"] == "Bearer ***"  # the server got the real token; what is stored is redacted
    everything = orjson.dumps(engine.services.get_run(run["id"])).decode()
    assert SECRET not in everything
    assert "***" in engine.step(run, "keep")["output"]["header"]
    # the secret is gone from Redis once the run ended
    handles = engine.services.handles
    assert handles is not None and handles.client.get(handles.keys.run_secrets(run["id"])) is None


def test_secret_inputs_are_redacted_in_every_event() -> None:
    flow = flow_from_data(_secret_flow("http://127.0.0.1:9"))
    inputs = {"token": SECRET, "who": "ada"}
    ctx = RunContext("r1", flow.id, 1, "start", inputs, secret_names(flow))

    class Capture:
        events: list = []

        def emit(self, event: EventBase) -> None:
            self.events.append(event)

        def flush(self) -> None:
            pass

    capture = Capture()
    clock = ManualClock()
    outcome = RunExecutor(FlowPlan(flow), ctx, EventStamper("r1", clock), capture, clock).start(
        redacted_inputs(flow, inputs))
    assert outcome.status == "failed"  # port 9 refuses; its error message carries the URL
    wire = b"".join(encode_event(event) for event in capture.events).decode()
    assert SECRET not in wire
    assert wire.count("***") >= 3


def test_unreadable_jobs_never_stop_a_worker(tmp_path: Path, redis_url: str, sqlite_url: str,
                                             key_prefix: str) -> None:
    from engine.runtime.jobs import encode_job, start_job
    from tests.engine.conftest import start_engine

    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=0)
    doc = make_flow("plain", [T, DONE], [("start", "done")])
    services.publish_flow(flow_from_data(doc))
    orphan = services.create_run("plain").run_id
    services.stop()
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(key_prefix)
    client.xtrim(keys.jobs, maxlen=0)
    client.xadd(keys.jobs, {b"j": b"{not a job"})
    client.xadd(keys.jobs, encode_job(start_job(orphan, "ghost", 7, "start", {}, False)))
    services, _ = start_engine(tmp_path, redis_url, sqlite_url, key_prefix, workers=1)
    try:
        failed = services.wait_for_run(orphan)
        assert failed["status"] == "failed" and failed["error_type"] == "engine_error"
        assert 'version 7 of flow "ghost" is not published' in failed["error"]
        dead: Any = client.xrange(keys.jobs_dead)
        assert len(dead) == 1 and b"not a job" in dead[0][1][b"error"]
        healthy = services.wait_for_run(services.create_run("plain").run_id)
        assert healthy["status"] == "succeeded"
    finally:
        services.stop()
