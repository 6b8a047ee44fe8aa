"""Where the engine keeps things (data folder, Redis and SQL URLs) and how large run inputs may be, built from
`engine.settings.LockgateSettings`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import platformdirs

from engine.settings import (  # noqa: F401  (DEFAULT_HTTP_URL: this module's name for it)
    DEFAULT_HTTP_URL,
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_MAX_INPUT_DEPTH,
    INPUT_DEPTH_CEILING,
    LockgateSettings,
    load_settings,
)

APP_NAME = "lockgate"


def platform_data_dir() -> Path:
    """The platform's user data folder (e.g. ~/.local/share/lockgate)."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def default_data_dir(settings: LockgateSettings | None = None) -> Path:
    """`LOCKGATE_DATA_DIR` (of `settings`, else of the environment now), else the platform's user data folder."""
    configured = (settings if settings is not None else load_settings()).data_dir
    return configured if configured is not None else platform_data_dir()


@dataclass(frozen=True)
class EngineConfig:
    """Locations of everything the engine reads and writes."""

    data_dir: Path
    redis_url: str | None = None
    """None: start (or reuse) the embedded Redis server of `data_dir`."""
    db_url: str | None = None
    """None: the SQLite file `data_dir/lockgate.db`."""
    key_prefix: str = "lg"
    """Namespace of every Redis key; tests use their own so they can share one server."""
    event_journal: int = 0
    """How many applied events the projector keeps in the events journal stream (0: none)."""

    @classmethod
    def from_settings(cls, settings: LockgateSettings, data_dir: Path | str | None = None) -> EngineConfig:
        """Config from `LOCKGATE_DATA_DIR`, `_REDIS_URL`, `_DB_URL`, `_KEY_PREFIX` and `_EVENT_JOURNAL`;
        `data_dir` wins over the first."""
        folder = Path(data_dir).expanduser() if data_dir is not None else default_data_dir(settings)
        return cls(data_dir=folder, redis_url=settings.redis_url, db_url=settings.db_url,
                   key_prefix=settings.key_prefix, event_journal=settings.event_journal)

    @classmethod
    def from_env(cls, data_dir: Path | str | None = None) -> EngineConfig:
        """`from_settings` of the environment now (scripts and tests; entry points hand their settings down)."""
        return cls.from_settings(load_settings(), data_dir)

    @property
    def sql_url(self) -> str:
        """The SQLAlchemy URL in force."""
        return self.db_url or f"sqlite:///{self.data_dir / 'lockgate.db'}"


@dataclass(frozen=True)
class InputLimits:
    """How large a run's inputs may be: create_run refuses more (`refused_inputs`) before the run exists."""

    max_depth: int = DEFAULT_MAX_INPUT_DEPTH
    """Containers one input value may nest (`[]` is 1 deep)."""
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES
    """Size of all inputs together, serialized as JSON."""

    @classmethod
    def from_settings(cls, settings: LockgateSettings) -> InputLimits:
        """`LOCKGATE_MAX_INPUT_DEPTH` and `LOCKGATE_MAX_INPUT_BYTES`."""
        return cls(max_depth=settings.max_input_depth, max_bytes=settings.max_input_bytes)

    @classmethod
    def from_env(cls) -> InputLimits:
        """`from_settings` of the environment now."""
        return cls.from_settings(load_settings())

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= INPUT_DEPTH_CEILING or self.max_bytes < 1:
            raise ValueError(f"input limits {self} are not usable: max_depth must be 1 to {INPUT_DEPTH_CEILING} "
                             "and max_bytes at least 1")
