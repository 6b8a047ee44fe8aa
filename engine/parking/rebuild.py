"""Rebuild the due set from the store at engine start.

The SQL run row is the source of truth for who waits; a due set lost with Redis' data (a server restored from
an older snapshot, or none) is rebuilt from it. At start every `waiting` run is scheduled
again at its checkpoint's wake time (or its `waiting_on.due_at`), unless a job for it is still live: the
jobs stream holds exactly the jobs not yet acknowledged (workers delete a message when they ack it), so a
run named there is already being resumed (or is about to be) and gets no second job. Duplicates that arise
anyway (a job created after this read) are dropped by the resume claim (`engine.parking.resume`) without
touching the live job's state.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.runtime import crashpoints
from engine.runtime.jobs import BadJob, decode_job
from engine.runtime.orphans import runs_with_unapplied_events
from engine.store.db import reading
from engine.store.models import Run
from engine.transport.due import DueSet
from engine.transport.keys import Keyspace

log = logging.getLogger("lockgate.parking")

CHUNK = 500


def rebuild_due_set(sql: sa.Engine, client: redis.Redis, keys: Keyspace) -> int:
    """Schedule every waiting run at its wake time; returns how many were scheduled."""
    with reading(sql) as conn:
        waiting = [(row.id, row.waiting_on) for row in
                   conn.execute(sa.select(Run.id, Run.waiting_on).where(Run.status == "waiting"))]
    live = runs_with_live_jobs(client, keys)
    waiting = [(run_id, waiting_on) for run_id, waiting_on in waiting if run_id not in live]
    crashpoints.reached("rebuild.mid")
    due = DueSet(client, keys)
    scheduled = 0
    without_checkpoint: list[str] = []
    for start in range(0, len(waiting), CHUNK):
        chunk = waiting[start:start + CHUNK]
        raws: list[Any] = client.mget([keys.run_checkpoint(run_id) for run_id, _ in chunk])
        wakes: dict[str, float] = {}
        for (run_id, waiting_on), raw in zip(chunk, raws, strict=True):
            if raw is None:
                without_checkpoint.append(run_id)
                continue
            checkpoint = orjson.loads(raw)
            wake = checkpoint.get("wake_at")
            if wake is None and waiting_on:
                wake = waiting_on.get("due_at")
            if wake is not None:
                wakes[run_id] = float(wake)
        due.schedule_many(wakes)
        scheduled += len(wakes)
    if without_checkpoint:
        _report_lost_checkpoints(client, keys, without_checkpoint)
    if scheduled:
        log.info("due set rebuilt: %d waiting run(s) scheduled", scheduled)
    return scheduled


def _report_lost_checkpoints(client: redis.Redis, keys: Keyspace, run_ids: list[str]) -> None:
    """Warn of waiting runs that cannot resume. A run whose newer events are still on the events stream is not one
    of them: it resumed (its checkpoint went with that) and SQL only lags behind a projector catching up."""
    lagging = runs_with_unapplied_events(client, keys)
    for run_id in run_ids:
        if run_id in lagging:
            log.info("run %s: SQL still says waiting, but events of it are not yet projected; left to them", run_id)
        else:
            log.warning("run %s is waiting but has no checkpoint in Redis (was Redis emptied?); "
                        "it cannot resume: cancel it with the runs API", run_id)


def runs_with_live_jobs(client: redis.Redis, keys: Keyspace) -> set[str]:
    """Run ids named by a job message still on the jobs stream (not yet delivered, or pending)."""
    live: set[str] = set()
    cursor = "-"
    while True:
        entries: Any = client.xrange(keys.jobs, min=cursor, max="+", count=CHUNK)
        for _message_id, fields in entries:
            try:
                live.add(decode_job(fields).run_id)
            except BadJob:
                continue
        if len(entries) < CHUNK:
            return live
        last = entries[-1][0].decode()
        cursor = "(" + last
