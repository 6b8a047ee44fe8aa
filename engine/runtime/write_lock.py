"""One lock per SQLite database for the engine's writers (create_run, the projector), across threads and
processes.

SQLite allows one writer; a second one waits in SQLite's busy handler, which sleeps in growing steps (up
to 100 ms) and throttles run submission while the projector commits a batch. Taking this lock first turns
that wait into a prompt hand-over: a thread lock between the threads of a process, then an exclusive
`flock` on `<database>.writer-lock` between processes (an executor, the projector and the process
submitting runs are different processes under `lockgate worker --processes`), which wakes its waiter the
moment it is released. Writers that take neither still meet busy_timeout, which stays the last guard.
PostgreSQL needs no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import sqlalchemy as sa

LOCK_SUFFIX = ".writer-lock"


@dataclass
class _WriterLock:
    thread: threading.Lock
    fd: int | None
    """Open on the lock file in this process (None: an in-memory database, threads only)."""
    pid: int
    """The process that opened `fd` (a forked child opens its own: flock is per open file)."""


_locks: dict[str, _WriterLock] = {}
_guard = threading.Lock()


def _lock_for(engine: sa.Engine) -> _WriterLock:
    key = str(engine.url)
    with _guard:
        found = _locks.get(key)
        if found is None or (found.fd is not None and found.pid != os.getpid()):
            database = engine.url.database
            fd = None
            if database and database != ":memory:":
                fd = os.open(database + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            found = _locks[key] = _WriterLock(threading.Lock(), fd, os.getpid())
        return found


@contextlib.contextmanager
def sqlite_writer(engine: sa.Engine) -> Iterator[None]:
    """Hold the write lock of `engine`'s SQLite file (no-op on other databases)."""
    if engine.dialect.name != "sqlite":
        yield
        return
    lock = _lock_for(engine)
    with lock.thread:
        if lock.fd is None:
            yield
            return
        fcntl.flock(lock.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fd, fcntl.LOCK_UN)
