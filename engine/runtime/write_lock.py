"""One in-process lock per SQLite database for the engine's writers (create_run, the projector).

SQLite allows one writer; a second one waits in SQLite's busy handler, which sleeps in growing
steps (up to tens of ms) and throttles run submission while the projector commits a batch. Taking
this lock first turns that wait into a prompt hand-over between threads. Other processes still
meet busy_timeout, which stays the cross-process guard. PostgreSQL needs no lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import sqlalchemy as sa

_locks: dict[str, threading.Lock] = {}
_guard = threading.Lock()


@contextlib.contextmanager
def sqlite_writer(engine: sa.Engine) -> Iterator[None]:
    """Hold the process's write lock of `engine`'s SQLite file (no-op on other databases)."""
    if engine.dialect.name != "sqlite":
        yield
        return
    key = str(engine.url)
    with _guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        yield
