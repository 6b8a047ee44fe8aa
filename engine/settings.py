"""Every `LOCKGATE_*` setting in one typed model, read from the environment by `load_settings()`.

Entry points read it once and hand the values down: the CLI (`app.main`, which puts it on each command's
`args.settings`), the app window (`app.gui.run_app`) and the engine's composition root
(`engine.host.EngineServices`, which reads it itself when it is given none). Child processes receive the
same settings through their environment. A bad value is a `SettingsError` naming the variable.

Test hooks read by one subprocess each stay outside the model: `LOCKGATE_CRASH_AT` / `LOCKGATE_CRASH_MARK`
(`engine.runtime.crashpoints`, read at import so a crash point costs nothing when unset) and
`LOCKGATE_SCRIPT_ID` (`engine.runtime.script_runner`, a marker a script child carries, never configured).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, SecretStr, ValidationError, ValidationInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.transport.keys import prefix_problem

ENV_PREFIX = "LOCKGATE_"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
DEFAULT_MAX_INPUT_DEPTH = 64
DEFAULT_MAX_INPUT_BYTES = 1 << 20
INPUT_DEPTH_CEILING = 128
"""The most `LOCKGATE_MAX_INPUT_DEPTH` may allow: events decode values up to about 200 levels, and steps and
events wrap a run's inputs in some levels of their own."""
DEFAULT_MAX_CALL_DEPTH = 8
DEFAULT_HTTP_URL = "http://127.0.0.1:8080"


class SettingsError(ValueError):
    """A `LOCKGATE_*` value that cannot be used; the message names the variable and what it should look like."""


def variable(field_name: str) -> str:
    """`max_input_depth` -> `LOCKGATE_MAX_INPUT_DEPTH`."""
    return ENV_PREFIX + field_name.upper()


def _whole_number(minimum: int, example: int, ceiling: int | None = None) -> BeforeValidator:
    def check(raw: Any, info: ValidationInfo) -> int:
        text = str(raw).strip() if not isinstance(raw, bool) else ""
        value = int(text) if text.isdigit() else None
        if value is None or value < minimum or (ceiling is not None and value > ceiling):
            name = variable(str(info.field_name))
            most = f" and at most {ceiling}" if ceiling is not None else ""
            raise ValueError(f"{name}={raw!r} is not a whole number >= {minimum}{most}; set it like {name}={example}")
        return value

    return BeforeValidator(check)


def _seconds(example: float) -> BeforeValidator:
    def check(raw: Any, info: ValidationInfo) -> float:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = 0.0
        if not value > 0 or value == float("inf"):
            name = variable(str(info.field_name))
            raise ValueError(f"{name}={raw!r} is not a number of seconds above zero; set it like {name}={example:g}")
        return value

    return BeforeValidator(check)


def _port(raw: Any, info: ValidationInfo) -> int:
    text = str(raw).strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{variable(str(info.field_name))} {text!r} is not a port number (1-65535)")
    return int(text)


def _log_level(raw: Any, info: ValidationInfo) -> str:
    level = str(raw).strip().lower()
    if level not in LOG_LEVELS:
        raise ValueError(f"{variable(str(info.field_name))} {raw!r} is not a log level; use one of "
                         f"{', '.join(LOG_LEVELS)}")
    return level


def _switch(raw: Any, info: ValidationInfo) -> bool:
    """`1`/`0` (also true/false, yes/no, on/off)."""
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{variable(str(info.field_name))}={raw!r} is not 1 or 0")


def _present(raw: Any) -> bool:
    """Any non-empty value switches it on (`=1` by convention)."""
    return bool(raw) if isinstance(raw, bool) else bool(str(raw).strip())


def _key_prefix(raw: Any, info: ValidationInfo) -> str:
    prefix = str(raw).strip()
    problem = prefix_problem(prefix)
    if problem is not None:
        raise ValueError(f"{variable(str(info.field_name))}={problem}")
    return prefix


def _folder(raw: Any) -> Path:
    return Path(str(raw)).expanduser()


def _url(raw: Any) -> str:
    return str(raw).strip().rstrip("/")


Folder = Annotated[Path, BeforeValidator(_folder)]
Url = Annotated[str, BeforeValidator(_url)]


class LockgateSettings(BaseSettings):
    """The deployment's `LOCKGATE_*` settings. An unset or empty variable takes the default."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, extra="ignore", frozen=True)

    data_dir: Folder | None = None
    """Data folder (SQLite file, embedded Redis, secrets file); None: the platform's user data folder."""
    redis_url: str | None = None
    """Redis the engine uses; None: the data folder's embedded Redis (Valkey) server."""
    db_url: str | None = None
    """SQLAlchemy URL of the store; None: the SQLite file `lockgate.db` in the data folder."""
    key_prefix: Annotated[str, BeforeValidator(_key_prefix)] = "lg"
    """Namespace of every Redis key, so deployments (and tests) can share one server."""
    event_journal: Annotated[int, _whole_number(0, 100000)] = 0
    """Applied events the projector keeps in the events journal stream (0: none)."""
    auto_migrate: Annotated[bool, BeforeValidator(_switch)] = False
    """A worker on a shared database (`db_url` set) upgrades its schema itself instead of refusing an old one."""
    max_input_depth: Annotated[int, _whole_number(1, DEFAULT_MAX_INPUT_DEPTH, INPUT_DEPTH_CEILING)] = \
        DEFAULT_MAX_INPUT_DEPTH
    """Containers one run input value (or callback body) may nest, 1 to 128 (`[]` is 1 deep)."""
    max_input_bytes: Annotated[int, _whole_number(1, DEFAULT_MAX_INPUT_BYTES)] = DEFAULT_MAX_INPUT_BYTES
    """Size of all of a run's inputs together, serialized as JSON."""
    max_call_depth: Annotated[int, _whole_number(1, DEFAULT_MAX_CALL_DEPTH)] = DEFAULT_MAX_CALL_DEPTH
    """How deep `flow.call` child runs may nest."""
    heartbeat_timeout: Annotated[float, _seconds(15)] = 15.0
    """Seconds without a heartbeat after which the watchdog reclaims a running run's job."""
    job_idle_timeout: Annotated[float, _seconds(30)] = 30.0
    """Seconds a job may stay delivered but unacknowledged before the reaper reclaims it."""
    delivery_claim_timeout: Annotated[float, _seconds(120)] = 120.0
    """Seconds an outgoing delivery (a run's `execution.finished` callback, an approval notice) or an event
    trigger's change stays with the process that took it; after that (its process died), another process takes
    it over."""
    job_retry_cap: Annotated[int, _whole_number(0, 3)] = 3
    """Redeliveries of one job; the next loss dead-letters it and interrupts the run."""
    secret_key: SecretStr | None = None
    """The data key (base64 of 32 bytes) every engine process sharing one Redis uses; None: the data folder's
    own, created at first use. Decoded when first used (`engine.secret_box`), where a bad one refuses the run."""
    public_url: Url | None = None
    """Where outside systems reach this engine's HTTP server (behind a proxy, say); the base of `wait.callback`
    URLs. None: the URL the engine's HTTP server serves at."""
    http_url: Url | None = None
    """Where `lockgate worker --http` (or the app's engine) serves the HTTP API and webhooks; clients and the
    app's engine child use it. None: http://127.0.0.1:8080."""
    api_key: SecretStr | None = None
    """API key `lockgate approvals decide` sends when `--key` is not given."""
    log_level: Annotated[str, BeforeValidator(_log_level)] | None = None
    """Level of the log file (debug, info, warning, error, critical); `--log-level` wins. None: info."""
    log_dir: Folder | None = None
    """Folder of the log files; None: the platform's user log folder (e.g. ~/.local/state/lockgate/log)."""
    simulator_port: Annotated[int, BeforeValidator(_port)] | None = None
    """Port of the app's provider simulator; None: 8765."""
    no_engine: Annotated[bool, BeforeValidator(_present)] = False
    """Set: the app window opens without starting its engine."""
    exit_when_ready: Annotated[bool, BeforeValidator(_present)] = False
    """Set: the app prints `ready <seconds>` once its window is shown and idle, then quits (startup measurement)."""


def load_settings(**overrides: Any) -> LockgateSettings:
    """The settings in the environment now (`overrides` win, e.g. a `--data-dir` flag); SettingsError when a
    value is unusable."""
    try:
        return LockgateSettings(**overrides)
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None


def describe(exc: ValidationError) -> str:
    """One line per bad variable, in the validators' words where they have them."""
    lines = []
    for error in exc.errors():
        field_name = str(error["loc"][0]) if error["loc"] else ""
        cause = (error.get("ctx") or {}).get("error")
        if error["type"] == "value_error" and cause is not None:
            lines.append(str(cause))
        else:
            lines.append(f"{variable(field_name)}={error.get('input')!r}: {error['msg']}")
    return "; ".join(lines)
