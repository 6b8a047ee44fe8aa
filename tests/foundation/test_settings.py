"""The `LOCKGATE_*` settings model: defaults, every variable parsed, bad values named, and who reads it when."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from engine.config import EngineConfig, InputLimits
from engine.host import EngineServices
from engine.runtime.reclaim import RecoveryThresholds
from engine.settings import ENV_PREFIX, LockgateSettings, SettingsError, load_settings, variable
from tests.cli import LOCKGATE
from tests.conftest import EXAMPLES, ROOT

DOCS = ROOT / "docs" / "deployment.md"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No LOCKGATE_* variable set (the test session sets some of its own)."""
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults_when_nothing_is_set(clean_env: pytest.MonkeyPatch) -> None:
    settings = load_settings()
    assert settings == LockgateSettings()
    assert (settings.data_dir, settings.redis_url, settings.db_url, settings.key_prefix) == (None, None, None, "lg")
    assert (settings.event_journal, settings.auto_migrate) == (0, False)
    assert (settings.max_input_depth, settings.max_input_bytes, settings.max_call_depth) == (64, 1 << 20, 8)
    assert (settings.heartbeat_timeout, settings.job_idle_timeout, settings.job_retry_cap) == (15.0, 30.0, 3)
    assert settings.secret_key is None and settings.api_key is None
    assert (settings.public_url, settings.http_url) == (None, None)
    assert (settings.log_level, settings.log_dir, settings.simulator_port) == (None, None, None)
    assert (settings.no_engine, settings.exit_when_ready) == (False, False)


PARSED: dict[str, tuple[str, Any]] = {
    "LOCKGATE_DATA_DIR": ("~/lockgate-data", Path("~/lockgate-data").expanduser()),
    "LOCKGATE_REDIS_URL": ("redis://127.0.0.1:6379/3", "redis://127.0.0.1:6379/3"),
    "LOCKGATE_DB_URL": ("postgresql+psycopg://root@127.0.0.1/test", "postgresql+psycopg://root@127.0.0.1/test"),
    "LOCKGATE_KEY_PREFIX": ("ops", "ops"),
    "LOCKGATE_EVENT_JOURNAL": ("100000", 100000),
    "LOCKGATE_AUTO_MIGRATE": ("1", True),
    "LOCKGATE_MAX_INPUT_DEPTH": ("128", 128),
    "LOCKGATE_MAX_INPUT_BYTES": ("2048", 2048),
    "LOCKGATE_MAX_CALL_DEPTH": ("3", 3),
    "LOCKGATE_HEARTBEAT_TIMEOUT": ("2.5", 2.5),
    "LOCKGATE_JOB_IDLE_TIMEOUT": ("4", 4.0),
    "LOCKGATE_DELIVERY_CLAIM_TIMEOUT": ("2.5", 2.5),
    "LOCKGATE_JOB_RETRY_CAP": ("0", 0),
    "LOCKGATE_SECRET_KEY": ("c2VjcmV0", "c2VjcmV0"),
    "LOCKGATE_PUBLIC_URL": (" https://hooks.example.com/lockgate/ ", "https://hooks.example.com/lockgate"),
    "LOCKGATE_HTTP_URL": ("http://127.0.0.1:9090/", "http://127.0.0.1:9090"),
    "LOCKGATE_API_KEY": ("lgk_abc", "lgk_abc"),
    "LOCKGATE_LOG_LEVEL": ("WARNING", "warning"),
    "LOCKGATE_LOG_DIR": ("/tmp/lockgate-logs", Path("/tmp/lockgate-logs")),
    "LOCKGATE_SIMULATOR_PORT": ("18765", 18765),
    "LOCKGATE_NO_ENGINE": ("1", True),
    "LOCKGATE_EXIT_WHEN_READY": ("yes", True),
}


def test_the_table_covers_every_setting() -> None:
    assert set(PARSED) == {variable(name) for name in LockgateSettings.model_fields}


@pytest.mark.parametrize("name", sorted(PARSED))
def test_every_variable_is_parsed(clean_env: pytest.MonkeyPatch, name: str) -> None:
    raw, expected = PARSED[name]
    clean_env.setenv(name, raw)
    value = getattr(load_settings(), name.removeprefix(ENV_PREFIX).lower())
    assert (value.get_secret_value() if hasattr(value, "get_secret_value") else value) == expected


def test_an_empty_variable_is_unset(clean_env: pytest.MonkeyPatch) -> None:
    for name in PARSED:
        clean_env.setenv(name, "")
    assert load_settings() == LockgateSettings()


def test_the_log_levels_are_the_logging_setup_s() -> None:
    from engine.logs import LEVELS
    from engine.settings import LOG_LEVELS

    assert tuple(LEVELS) == LOG_LEVELS


def test_auto_migrate_is_a_switch(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LOCKGATE_AUTO_MIGRATE", "0")
    assert load_settings().auto_migrate is False


BAD = [("LOCKGATE_EVENT_JOURNAL", "abc"), ("LOCKGATE_EVENT_JOURNAL", "-1"), ("LOCKGATE_MAX_INPUT_DEPTH", "129"),
       ("LOCKGATE_MAX_INPUT_DEPTH", "0"), ("LOCKGATE_MAX_INPUT_DEPTH", "deep"), ("LOCKGATE_MAX_INPUT_BYTES", "1MB"),
       ("LOCKGATE_MAX_CALL_DEPTH", "0"), ("LOCKGATE_HEARTBEAT_TIMEOUT", "soon"), ("LOCKGATE_JOB_IDLE_TIMEOUT", "0"),
       ("LOCKGATE_JOB_RETRY_CAP", "2.5"), ("LOCKGATE_LOG_LEVEL", "loud"), ("LOCKGATE_SIMULATOR_PORT", "70000"),
       ("LOCKGATE_AUTO_MIGRATE", "maybe"), ("LOCKGATE_KEY_PREFIX", "team:a"), ("LOCKGATE_KEY_PREFIX", "lg*")]


@pytest.mark.parametrize(("name", "raw"), BAD)
def test_a_bad_value_names_its_variable(clean_env: pytest.MonkeyPatch, name: str, raw: str) -> None:
    clean_env.setenv(name, raw)
    with pytest.raises(SettingsError) as refused:
        load_settings()
    message = str(refused.value)
    assert message.startswith(name) and repr(raw) in message and "\n" not in message


def test_the_depth_ceiling_is_in_the_message(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LOCKGATE_MAX_INPUT_DEPTH", "500")
    with pytest.raises(SettingsError, match=r"at most 128; set it like LOCKGATE_MAX_INPUT_DEPTH=64"):
        load_settings()


def test_every_bad_variable_is_named_at_once(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("LOCKGATE_EVENT_JOURNAL", "abc")
    clean_env.setenv("LOCKGATE_JOB_RETRY_CAP", "x")
    with pytest.raises(SettingsError, match=r"LOCKGATE_EVENT_JOURNAL.*; LOCKGATE_JOB_RETRY_CAP"):
        load_settings()


def test_overrides_win_over_the_environment(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("LOCKGATE_DATA_DIR", "/nowhere")
    assert load_settings(data_dir=tmp_path).data_dir == tmp_path


def test_the_engine_parts_are_built_from_the_settings(tmp_path: Path) -> None:
    settings = LockgateSettings(data_dir=tmp_path, redis_url="redis://r", db_url="sqlite:///x.db", key_prefix="k",
                                event_journal=7, max_input_depth=5, max_input_bytes=99, heartbeat_timeout=2,
                                job_idle_timeout=3, job_retry_cap=1)
    assert EngineConfig.from_settings(settings) == EngineConfig(tmp_path, "redis://r", "sqlite:///x.db", "k", 7)
    assert EngineConfig.from_settings(settings, tmp_path / "other").data_dir == tmp_path / "other"
    assert InputLimits.from_settings(settings) == InputLimits(max_depth=5, max_bytes=99)
    assert RecoveryThresholds.from_settings(settings) == RecoveryThresholds(2.0, 3.0, 1)


def test_an_engine_reads_the_environment_once_when_built(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("LOCKGATE_MAX_INPUT_DEPTH", "9")
    clean_env.setenv("LOCKGATE_MAX_CALL_DEPTH", "2")
    clean_env.setenv("LOCKGATE_HEARTBEAT_TIMEOUT", "5")
    clean_env.setenv("LOCKGATE_PUBLIC_URL", "https://public.example/")
    services = EngineServices(EngineConfig(data_dir=tmp_path))
    clean_env.setenv("LOCKGATE_MAX_INPUT_DEPTH", "10")  # too late for this engine
    assert services.input_limits.max_depth == 9 and services.max_call_depth == 2
    assert services.recovery.heartbeat_timeout == 5.0
    assert services.callback_links.base_url == "https://public.example"
    given = EngineServices(EngineConfig(data_dir=tmp_path), settings=LockgateSettings(max_input_depth=4))
    assert given.input_limits.max_depth == 4 and given.handles is None  # built, not started


def test_a_bad_value_given_in_code_is_refused_too() -> None:
    with pytest.raises(SettingsError, match="LOCKGATE_MAX_INPUT_DEPTH=0"):
        load_settings(max_input_depth=0)


@pytest.mark.parametrize(("name", "raw"), [("LOCKGATE_EVENT_JOURNAL", "abc"), ("LOCKGATE_MAX_INPUT_DEPTH", "500"),
                                           ("LOCKGATE_HEARTBEAT_TIMEOUT", "soon"), ("LOCKGATE_KEY_PREFIX", "team:")])
def test_the_cli_refuses_a_bad_value_by_name(tmp_path: Path, name: str, raw: str) -> None:
    env = {**os.environ, "LOCKGATE_DATA_DIR": str(tmp_path / "data"), "LOCKGATE_LOG_DIR": str(tmp_path / "logs"),
           name: raw}
    done = subprocess.run([*LOCKGATE, "validate", str(EXAMPLES / "hello.flow.json")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"lockgate: error: {name}={raw!r} is not" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "logs").exists()  # refused before anything was configured


def test_the_deployment_docs_list_every_setting() -> None:
    documented = set(re.findall(r"^\| `(LOCKGATE_[A-Z_]+)` \|", DOCS.read_text(), flags=re.M))
    assert documented >= {variable(name) for name in LockgateSettings.model_fields}
