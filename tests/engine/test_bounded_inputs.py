"""create_run refuses inputs the engine could not carry to the end, before any run exists; a run and its job
come to exist together or not at all; and `lockgate run --input` says so."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import redis

from engine.config import InputLimits
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.publish import PublishRefused
from engine.runtime.inputs import InputBoundsError, InputError
from tests.cli import LOCKGATE, cli_env
from tests.engine.conftest import Engine, make_flow, start_engine

T = {"id": "start", "type": "trigger.manual"}
ECHO = make_flow("echo", [T, {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.data }}"}}],
                 [("start", "done")], {"data": {"type": "any"}, "note": {"type": "string", "default": "-"}})


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


REFUSED: dict[str, tuple[Any, str, str]] = {
    # name: (the "data" input, the path the refusal names, a word of its reason)
    "200-deep": (_nested(200), "$.inputs.data" + "[0]" * 64, "nested deeper than 64"),
    "65-deep": (_nested(65), "$.inputs.data" + "[0]" * 64, "nested deeper than 64"),
    "253-deep": (_nested(253), "$.inputs.data" + "[0]" * 64, "nested deeper than 64"),
    "nan": ({"x": [1, float("nan")]}, "$.inputs.data.x[1]", "finite"),
    "infinity": (float("inf"), "$.inputs.data", "finite"),
    "lone-surrogate": (["ok", "bad \ud800"], "$.inputs.data[1]", "surrogate"),
    "surrogate-key": ({"\udfff": 1}, '$.inputs.data["\\udfff"]', "surrogate"),
    "huge-int": ({"n": 2**70}, "$.inputs.data.n", "64-bit"),
    "over-1-MB": ("x" * (1 << 20), "$.inputs", "1048576 bytes"),
}


def _assert_nothing_exists(services: EngineServices) -> None:
    handles = services.handles
    assert handles is not None
    assert services.list_runs() == []
    assert handles.client.xlen(handles.keys.jobs) == 0


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_inputs_the_engine_cannot_carry_are_refused_before_any_run_exists(any_db_engine: Engine, name: str) -> None:
    services = any_db_engine.services
    services.publish_flow(flow_from_data(ECHO))
    data, path, reason = REFUSED[name]
    with pytest.raises(InputError) as refused:
        services.create_run("echo", {"data": data})
    assert refused.value.kind == "refused_inputs"
    assert path in str(refused.value) and reason in str(refused.value)
    str(refused.value).encode("utf-8")  # the message itself is printable
    _assert_nothing_exists(services)


def test_inputs_at_the_limits_run_to_the_end_and_list(any_db_engine: Engine) -> None:
    services = any_db_engine.services
    services.publish_flow(flow_from_data(ECHO))
    deepest = _nested(64)
    run = services.wait_for_run(services.create_run("echo", {"data": deepest}).run_id)
    assert run["status"] == "succeeded", run["error"]
    assert run["inputs"]["data"] == deepest
    assert [listed["id"] for listed in services.list_runs()] == [run["id"]]


def test_a_failed_enqueue_leaves_no_queued_run(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> None:
    # No workers or reaper: they would read the jobs stream this test breaks on purpose.
    services, _ = start_engine(tmp_path, redis_url, db_url, key_prefix, workers=0, reaper=False)
    try:
        handles = services.handles
        assert handles is not None
        services.publish_flow(flow_from_data(ECHO))
        # A real Redis refusal: the jobs stream's key holds a string, so XADD answers WRONGTYPE.
        handles.client.delete(handles.keys.jobs)
        handles.client.set(handles.keys.jobs, "not a stream")
        with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
            services.create_run("echo", {"data": 1}, idempotency_key="order-9")
        assert services.list_runs() == []
        handles.client.delete(handles.keys.jobs)
        again = services.create_run("echo", {"data": 1}, idempotency_key="order-9")  # the key was not used up
        assert not again.duplicate and [run["id"] for run in services.list_runs()] == [again.run_id]
    finally:
        services.stop()


def _cli_flow(tmp_path: Path) -> Path:
    path = tmp_path / "echo.flow.json"
    path.write_text(json.dumps(ECHO))
    return path


def _runs_listed(env: dict[str, str]) -> list[dict[str, Any]]:
    listed = subprocess.run([*LOCKGATE, "runs", "list", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    runs: list[dict[str, Any]] = json.loads(listed.stdout)["runs"]
    return runs


def test_lockgate_run_refuses_a_deep_input_with_its_path(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    deep = "[" * 200 + "]" * 200
    refused = subprocess.run([*LOCKGATE, "run", str(_cli_flow(tmp_path)), "--input", f"data={deep}"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1, refused.stderr
    assert "refuses these inputs" in refused.stderr and "$.inputs.data[0][0]" in refused.stderr
    assert "LOCKGATE_MAX_INPUT_DEPTH" in refused.stderr and "Traceback" not in refused.stderr
    assert _runs_listed(env) == []


@pytest.mark.parametrize(("text", "reason"), [("NaN", "finite"), ('"\\ud800"', "surrogate"),
                                              ("9" * 5000, "64-bit")])
def test_lockgate_run_refuses_inputs_json_allows_but_the_engine_cannot_carry(
        tmp_path: Path, redis_url: str, key_prefix: str, text: str, reason: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    refused = subprocess.run([*LOCKGATE, "run", str(_cli_flow(tmp_path)), "--input", f"data={text}"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1, refused.stderr
    assert reason in refused.stderr and "$.inputs.data" in refused.stderr and "Traceback" not in refused.stderr


def test_the_limits_come_from_the_environment(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_MAX_INPUT_DEPTH="3", LOCKGATE_MAX_INPUT_BYTES="100")
    flow = str(_cli_flow(tmp_path))
    deep = subprocess.run([*LOCKGATE, "run", flow, "--input", "data=[[[[1]]]]"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert deep.returncode == 1 and "nested deeper than 3" in deep.stderr, deep.stderr
    big = subprocess.run([*LOCKGATE, "run", flow, "--input", f'data="{"x" * 200}"'], env=env, capture_output=True,
                         text=True, timeout=60)
    assert big.returncode == 1 and "100 bytes" in big.stderr, big.stderr
    fits = subprocess.run([*LOCKGATE, "run", flow, "--input", "data=[[1]]", "--json"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert fits.returncode == 0, fits.stderr
    assert json.loads(fits.stdout)["status"] == "succeeded"
    wrong = subprocess.run([*LOCKGATE, "run", flow, "--input", "data=1"],
                           env={**env, "LOCKGATE_MAX_INPUT_DEPTH": "deep"}, capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "LOCKGATE_MAX_INPUT_DEPTH" in wrong.stderr and "Traceback" not in wrong.stderr


def test_input_limits_read_the_environment_and_refuse_unusable_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGATE_MAX_INPUT_DEPTH", "10")
    monkeypatch.setenv("LOCKGATE_MAX_INPUT_BYTES", "2048")
    assert InputLimits.from_env() == InputLimits(max_depth=10, max_bytes=2048)
    monkeypatch.delenv("LOCKGATE_MAX_INPUT_BYTES")
    assert InputLimits.from_env().max_bytes == 1 << 20
    for name, value in [("LOCKGATE_MAX_INPUT_DEPTH", "500"), ("LOCKGATE_MAX_INPUT_DEPTH", "0"),
                        ("LOCKGATE_MAX_INPUT_BYTES", "1MB")]:
        monkeypatch.setenv(name, value)
        with pytest.raises(ValueError, match=name):
            InputLimits.from_env()
        monkeypatch.delenv(name)


def test_limits_given_to_create_run_apply_to_defaults_too(engine: Engine) -> None:
    services = engine.services
    services.publish_flow(flow_from_data(ECHO))
    small = InputLimits(max_depth=2, max_bytes=30)
    with pytest.raises(InputBoundsError, match=r"\$\.inputs\.data\[0\]\[0\]: nested deeper than 2"):
        services.create_run("echo", {"data": [[[1]]]}, limits=small)
    with pytest.raises(InputBoundsError, match=r"over the 30 bytes allowed.*the largest is \$\.inputs\.data"):
        services.create_run("echo", {"data": "x" * 40}, limits=small)
    deep_default = make_flow("deep-default", [T, {"id": "done", "type": "terminal"}], [("start", "done")],
                             {"data": {"type": "any", "default": [[[1]]]}})
    services.publish_flow(flow_from_data(deep_default))
    with pytest.raises(InputBoundsError, match=r"\$\.inputs\.data\[0\]\[0\]: nested deeper than 2"):
        services.create_run("deep-default", {}, limits=small)
    _assert_nothing_exists(services)
    assert services.wait_for_run(services.create_run("echo", {"data": [[1]]}, limits=small).run_id)["status"] == \
        "succeeded"


def test_publish_refuses_a_flow_its_store_could_not_read_back(engine: Engine) -> None:
    document = json.loads(json.dumps(ECHO))
    document["nodes"][1]["position"] = [0, 1]
    flow = flow_from_data(document)
    flow.nodes[1].position = (0.0, float("nan"))  # as a Flow built in memory may hold it
    with pytest.raises(PublishRefused) as refused:
        engine.services.publish_flow(flow)
    assert [d.code for d in refused.value.diagnostics] == ["invalid_document"]
    assert refused.value.diagnostics[0].message.startswith("$.nodes[1].position[1]")
