"""New run records, written for concurrent `create_run` calls in shared transactions (group commit).

A run start's insert costs little; its transaction costs the rest: the SQLite writer lock (shared with the
projector, whose batch may hold it for milliseconds) and a commit, which on PostgreSQL waits for the WAL
flush. While one caller's transaction is under way, the records of the callers arriving behind it queue up,
and the next of them writes the whole queue in one transaction. A lone caller writes its own record at once,
as before. Every caller returns only once its own record is committed, and gets its own error: a batch that
fails is written again one record per transaction, so a duplicate idempotency key fails only its own start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, cast

import sqlalchemy as sa

from engine.runtime.write_lock import sqlite_writer
from engine.store.driver_rows import sqlite_execute_rows
from engine.store.models import Run

RUNS = cast(sa.Table, Run.__table__)
_INSERT_RUN = sa.insert(RUNS)

RUN_INSERTED = ("id", "flow_id", "version", "status", "trigger", "idempotency_key", "inputs", "state", "errors",
                "cost_micros", "tokens_in", "tokens_out", "last_seq", "created_at", "updated_at", "parent_run_id",
                "call_depth", "rerun_of", "from_node", "started_by")
"""Every column a new run sets (each one with a default among them: the driver's path applies none)."""
_SQLITE_INSERT_RUN = (f"INSERT INTO {RUNS.name} ({', '.join(RUN_INSERTED)}) "
                      f"VALUES ({', '.join(['?'] * len(RUN_INSERTED))})")


def insert_runs(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    """Insert run records in `conn`'s transaction."""
    if conn.dialect.name == "sqlite":  # the driver's path, each column's own stored form
        sqlite_execute_rows(conn, _SQLITE_INSERT_RUN, RUNS, RUN_INSERTED, rows)
        return
    conn.execute(_INSERT_RUN, rows)


@dataclass
class _Queued:
    row: dict[str, Any]
    written: bool = False
    error: BaseException | None = None


class RunRecords:
    """Group commit of new run records into one SQL store."""

    def __init__(self, sql: sa.Engine) -> None:
        self.sql = sql
        self._queue: list[_Queued] = []
        self._queue_lock = threading.Lock()
        self._writing = threading.Lock()
        """Held by the one caller writing a batch; the callers queued behind it wait here."""

    @property
    def waiting(self) -> int:
        """Records queued behind the transaction under way."""
        with self._queue_lock:
            return len(self._queue)

    def insert(self, row: dict[str, Any]) -> None:
        """Commit one new run record (with whatever others are queued); raises what its own insert raised."""
        mine = _Queued(row)
        with self._queue_lock:
            self._queue.append(mine)
        with self._writing:
            if not mine.written and mine.error is None:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._write(batch)
        if mine.error is not None:
            raise mine.error

    def _write(self, batch: list[_Queued]) -> None:
        if len(batch) > 1:
            try:
                self._commit([queued.row for queued in batch])
            except sa.exc.IntegrityError:
                pass  # some record was refused: write them one at a time to find whose
            except Exception as exc:
                for queued in batch:
                    queued.error = exc
                return
            else:
                for queued in batch:
                    queued.written = True
                return
        for queued in batch:
            self._write_alone(queued)

    def _write_alone(self, queued: _Queued) -> None:
        try:
            self._commit([queued.row])
        except Exception as exc:
            queued.error = exc
        else:
            queued.written = True

    def _commit(self, rows: list[dict[str, Any]]) -> None:
        with sqlite_writer(self.sql), self.sql.begin() as conn:
            insert_runs(conn, rows)
