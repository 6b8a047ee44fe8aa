"""Rebuild the due set from the store at engine start.

The SQL run row is the source of truth for who waits; a due member popped by a process that died
before enqueuing its resume is gone from the sorted set. At start every `waiting` run is scheduled
again at its checkpoint's wake time (or its `waiting_on.due_at`); duplicates this creates are
harmless, since `engine.parking.resume` lets one resume per park through.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.store.models import Run
from engine.transport.due import DueSet
from engine.transport.keys import Keyspace

log = logging.getLogger("lockgate.parking")

CHUNK = 500


def rebuild_due_set(sql: sa.Engine, client: redis.Redis, keys: Keyspace) -> int:
    """Schedule every waiting run at its wake time; returns how many were scheduled."""
    with sql.connect() as conn:
        waiting = [(row.id, row.waiting_on) for row in
                   conn.execute(sa.select(Run.id, Run.waiting_on).where(Run.status == "waiting"))]
    due = DueSet(client, keys)
    scheduled = 0
    for start in range(0, len(waiting), CHUNK):
        chunk = waiting[start:start + CHUNK]
        raws: list[Any] = client.mget([keys.run_checkpoint(run_id) for run_id, _ in chunk])
        wakes: dict[str, float] = {}
        for (run_id, waiting_on), raw in zip(chunk, raws, strict=True):
            if raw is None:
                log.warning("run %s is waiting but has no checkpoint in Redis (was Redis emptied?); "
                            "it cannot resume: cancel it with the runs API", run_id)
                continue
            checkpoint = orjson.loads(raw)
            wake = checkpoint.get("wake_at")
            if wake is None and waiting_on:
                wake = waiting_on.get("due_at")
            if wake is not None:
                wakes[run_id] = float(wake)
        due.schedule_many(wakes)
        scheduled += len(wakes)
    if scheduled:
        log.info("due set rebuilt: %d waiting run(s) scheduled", scheduled)
    return scheduled
