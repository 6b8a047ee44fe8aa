"""Where the engine keeps things: data folder, Redis and SQL URLs, from settings or the environment."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "lockgate"


def default_data_dir() -> Path:
    """`LOCKGATE_DATA_DIR`, else the platform's user data folder."""
    configured = os.environ.get("LOCKGATE_DATA_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def _count(name: str) -> int:
    raw = os.environ.get(name) or "0"
    if not raw.isdigit():
        raise ValueError(f"{name}={raw!r} is not a whole number >= 0; set it like {name}=100000")
    return int(raw)


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
    def from_env(cls, data_dir: Path | str | None = None) -> EngineConfig:
        """Config from `LOCKGATE_DATA_DIR`, `LOCKGATE_REDIS_URL` and `LOCKGATE_DB_URL`."""
        folder = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
        return cls(
            data_dir=folder,
            redis_url=os.environ.get("LOCKGATE_REDIS_URL") or None,
            db_url=os.environ.get("LOCKGATE_DB_URL") or None,
            key_prefix=os.environ.get("LOCKGATE_KEY_PREFIX") or "lg",
            event_journal=_count("LOCKGATE_EVENT_JOURNAL"),
        )

    @property
    def sql_url(self) -> str:
        """The SQLAlchemy URL in force."""
        return self.db_url or f"sqlite:///{self.data_dir / 'lockgate.db'}"


PUBLIC_URL_ENV = "LOCKGATE_PUBLIC_URL"
HTTP_URL_ENV = "LOCKGATE_HTTP_URL"
DEFAULT_HTTP_URL = "http://127.0.0.1:8080"


def public_url() -> str | None:
    """`LOCKGATE_PUBLIC_URL`: where outside systems reach this engine's HTTP server (behind a proxy, say);
    None when unset (the engine's own HTTP URL is the base then)."""
    configured = (os.environ.get(PUBLIC_URL_ENV) or "").strip()
    return configured.rstrip("/") or None


DEFAULT_MAX_INPUT_DEPTH = 64
DEFAULT_MAX_INPUT_BYTES = 1 << 20
INPUT_DEPTH_CEILING = 128
"""The most `LOCKGATE_MAX_INPUT_DEPTH` may allow: events decode values up to about 200 levels, and steps and
events wrap a run's inputs in some levels of their own."""


@dataclass(frozen=True)
class InputLimits:
    """How large a run's inputs may be: create_run refuses more (`refused_inputs`) before the run exists."""

    max_depth: int = DEFAULT_MAX_INPUT_DEPTH
    """Containers one input value may nest (`[]` is 1 deep)."""
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES
    """Size of all inputs together, serialized as JSON."""

    @classmethod
    def from_env(cls) -> InputLimits:
        """Defaults, overridden by `LOCKGATE_MAX_INPUT_DEPTH` and `LOCKGATE_MAX_INPUT_BYTES`."""
        return cls(max_depth=_whole_number("LOCKGATE_MAX_INPUT_DEPTH", DEFAULT_MAX_INPUT_DEPTH, INPUT_DEPTH_CEILING),
                   max_bytes=_whole_number("LOCKGATE_MAX_INPUT_BYTES", DEFAULT_MAX_INPUT_BYTES))

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= INPUT_DEPTH_CEILING or self.max_bytes < 1:
            raise ValueError(f"input limits {self} are not usable: max_depth must be 1 to {INPUT_DEPTH_CEILING} "
                             "and max_bytes at least 1")


def _whole_number(name: str, default: int, ceiling: int | None = None) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1 or (ceiling is not None and value > ceiling):
        most = f" and at most {ceiling}" if ceiling is not None else ""
        raise ValueError(f"{name}={raw!r} is not a whole number above zero{most}; set it like {name}={default}")
    return value


@functools.cache
def input_limits() -> InputLimits:
    """The input limits in force: the environment's, read once per process."""
    return InputLimits.from_env()
