"""Publishing checks a flow.call against the published flows: `call_target_unknown` and `call_cycle` refuse the
publish and store nothing; the file check alone (`lockgate validate`) cannot see the store."""

from __future__ import annotations

import pytest

from engine.flow import flow_from_data
from engine.publish import PublishRefused, list_versions
from engine.validation import validate
from tests.catalog_flow_call.flows import child_flow, parent_flow
from tests.engine.conftest import Engine, make_flow


def _refused(engine: Engine, document: dict) -> list[tuple[str, str, str | None]]:
    with pytest.raises(PublishRefused) as refused:
        engine.services.publish_flow(flow_from_data(document))
    return [(d.code, d.severity, d.node) for d in refused.value.diagnostics]


@pytest.mark.postgres
def test_an_unpublished_target_is_refused_at_publish(any_db_engine: Engine) -> None:
    assert _refused(any_db_engine, parent_flow(target="nowhere")) == [("call_target_unknown", "error", "call")]
    assert list_versions(any_db_engine.services.require_handles().sql, "parent") == []
    any_db_engine.services.publish_flow(flow_from_data(child_flow()))
    assert _refused(any_db_engine, parent_flow(version=2)) == [("call_target_unknown", "error", "call")]
    assert any_db_engine.services.publish_flow(flow_from_data(parent_flow(version=1))).version == 1


def test_the_file_check_alone_does_not_see_the_store() -> None:
    assert [d.code for d in validate(flow_from_data(parent_flow(target="nowhere"))) if d.severity == "error"] == []


@pytest.mark.postgres
def test_a_flow_calling_back_to_its_caller_is_refused(any_db_engine: Engine) -> None:
    services = any_db_engine.services
    services.publish_flow(flow_from_data(child_flow("c")))
    services.publish_flow(flow_from_data(parent_flow("b", target="c")))
    services.publish_flow(flow_from_data(parent_flow("a", target="b")))
    codes = _refused(any_db_engine, parent_flow("c", target="a"))
    assert codes == [("call_cycle", "error", "call")]
    assert [v.version for v in list_versions(services.require_handles().sql, "c")] == [1]
    with pytest.raises(PublishRefused) as refused:
        services.publish_flow(flow_from_data(parent_flow("c", target="a")))
    assert "c -> a -> b -> c" in str(refused.value)


def test_a_flow_calling_itself_is_a_cycle(engine: Engine) -> None:
    assert _refused(engine, parent_flow("selfish", target="selfish")) == [("call_cycle", "error", "call")]


def test_a_bad_flow_id_is_invalid_config() -> None:
    document = make_flow("p", [{"id": "start", "type": "trigger.manual"},
                               {"id": "call", "type": "flow.call", "config": {"flow": "Not A Flow", "colour": 1}}],
                         [("start", "call")])
    codes = {d.code for d in validate(flow_from_data(document))}
    assert {"invalid_config", "unknown_config_key"} <= codes


def test_lockgate_validate_warns_of_an_unpublished_target_when_it_has_a_store(tmp_path, redis_url: str,
                                                                             key_prefix: str) -> None:
    import json

    from tests.cli import cli_env, lockgate
    from tests.engine.conftest import start_engine

    path = tmp_path / "parent.flow.json"
    path.write_text(json.dumps(parent_flow(target="nowhere")))
    env = cli_env(tmp_path, redis_url, key_prefix)
    before = lockgate(env, "validate", str(path), "--json")
    assert before.returncode == 0, before.stderr
    assert [d["code"] for d in json.loads(before.stdout)["diagnostics"]] == []
    data = tmp_path / "data"
    services, _sleeps = start_engine(tmp_path, redis_url, f"sqlite:///{data / 'lockgate.db'}", key_prefix)
    services.stop()
    after = lockgate(env, "validate", str(path), "--json")
    assert after.returncode == 0, after.stderr
    [warning] = json.loads(after.stdout)["diagnostics"]
    assert (warning["code"], warning["severity"], warning["node"]) == ("call_target_unknown", "warning", "call")
