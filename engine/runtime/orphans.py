"""The orphan sweep: a run that sits `queued` with no job message anywhere is failed, so it does not wait forever.

create_run writes the run record, then enqueues its job; a process that dies in between (or a job refused
later) leaves a queued run no worker will ever take. A job message lives on the jobs stream from its XADD
until the worker that ran it acknowledges and deletes it, whether it waits for a consumer or is pending with
one, so a queued run none of whose messages are on the stream, older than the grace period, has no job —
unless Redis shows it already started (a checkpoint or a due entry: it parked while the projector had not yet
applied its start) or an event of it waits for the projector (a projector failing over applies its end later).
An orphan gets a `run_failed` event (`orphaned_run`), so the projector stays the only writer of run state.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.clock import Clock
from engine.events import ExternalStamper, encode_event
from engine.runtime.emitter import EVENT_FIELD, entry_events
from engine.runtime.jobs import BadJob, decode_job
from engine.store.db import reading
from engine.store.models import Run
from engine.transport.keys import Keyspace

log = logging.getLogger("lockgate.orphans")

ORPHAN_GRACE_SECONDS = 60.0
"""How long a queued run may have no job message: a create_run enqueues within moments of its insert."""
SWEEP_BATCH = 200
"""Queued runs looked at per pass, oldest first."""
_STREAM_PAGE = 1000


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def runs_with_unapplied_events(client: redis.Redis, keys: Keyspace) -> set[str]:
    """Runs named by an event the projector has not applied yet (pending in its group, or not yet read): their row
    in SQL may be behind what Redis shows only because no projector has caught up (one failing over, one cut off
    its database)."""
    found: set[str] = set()
    groups: Any = client.xinfo_groups(keys.events)
    group = next((g for g in groups if _text(g.get("name")) == keys.events_group), None)
    if group is None:
        return found
    start = "(" + _text(group.get("last-delivered-id") or "0-0")
    summary: Any = client.xpending(keys.events, keys.events_group)
    if summary and summary.get("pending"):
        start = _text(summary.get("min"))
    while True:
        entries: Any = client.xrange(keys.events, min=start, count=_STREAM_PAGE)
        for _message_id, fields in entries:
            for raw in entry_events(fields):
                try:
                    run_id = orjson.loads(raw).get("run_id") if raw else None
                except (orjson.JSONDecodeError, AttributeError):
                    continue
                if isinstance(run_id, str):
                    found.add(run_id)
        if len(entries) < _STREAM_PAGE:
            return found
        start = "(" + _text(entries[-1][0])


class OrphanSweep:
    """Fails queued runs without a job; `tick()` is one pass, called by the engine's reaper loop."""

    def __init__(self, client: redis.Redis, keys: Keyspace, sql: sa.Engine, clock: Clock,
                 grace: float = ORPHAN_GRACE_SECONDS) -> None:
        self.client = client
        self.keys = keys
        self.sql = sql
        self.clock = clock
        self.grace = grace
        self._failed: set[str] = set()
        """Runs this sweep already failed, while the projector may not have applied it yet."""

    def tick(self) -> list[str]:
        """Fail every queued run older than the grace period whose job is not on the jobs stream; returns them."""
        cutoff = datetime.fromtimestamp(self.clock.now() - self.grace, UTC)
        with reading(self.sql) as conn:
            rows = conn.execute(sa.select(Run.id, Run.last_seq, Run.created_at)
                                .where(Run.status == "queued", Run.created_at < cutoff)
                                .order_by(Run.created_at).limit(SWEEP_BATCH)).all()
        candidates = {row.id: row for row in rows if row.id not in self._failed}
        self._failed &= {row.id for row in rows}
        if not candidates:
            return []
        with_jobs = self._runs_with_jobs()
        orphans = [run_id for run_id in candidates if run_id not in with_jobs]
        orphans = [run_id for run_id in orphans if not self._started(run_id)]
        if orphans:
            unapplied = runs_with_unapplied_events(self.client, self.keys)
            orphans = [run_id for run_id in orphans if run_id not in unapplied]
        if not orphans:
            return []
        pipe = self.client.pipeline(transaction=False)
        for run_id in orphans:
            row = candidates[run_id]
            waited = self.clock.now() - row.created_at.timestamp()
            reason = (f"run {run_id} sat queued for {waited:.0f}s with no job on the jobs stream (its job was never "
                      "enqueued, or was lost); nothing will start it, so it was failed: start it again")
            log.error("%s", reason)
            event = ExternalStamper(run_id, self.clock, int(row.last_seq or 0)).run_failed(reason, "orphaned_run")
            pipe.xadd(self.keys.events, {EVENT_FIELD: encode_event(event)})
            pipe.delete(self.keys.run_secrets(run_id))
        pipe.execute()
        self._failed.update(orphans)
        return orphans

    def _started(self, run_id: str) -> bool:
        """Whether Redis shows the run past its first job although SQL still says queued (the projector lags):
        a parked run has a checkpoint and a due entry, and no job message until it wakes."""
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(self.keys.run_checkpoint(run_id))
        pipe.zscore(self.keys.due, run_id)
        has_checkpoint, due_at = pipe.execute()
        return bool(has_checkpoint) or due_at is not None

    def _runs_with_jobs(self) -> set[str]:
        """Run ids named by a message on the jobs stream (waiting for a consumer, or pending with one)."""
        found: set[str] = set()
        start = "-"
        while True:
            entries: Any = self.client.xrange(self.keys.jobs, min=start, count=_STREAM_PAGE)
            for _message_id, fields in entries:
                try:
                    found.add(decode_job(fields).run_id)
                except BadJob:
                    continue
            if len(entries) < _STREAM_PAGE:
                return found
            start = "(" + entries[-1][0].decode()
