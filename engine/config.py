"""Where the engine keeps things: data folder, Redis and SQL URLs, from settings or the environment."""

from __future__ import annotations

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
