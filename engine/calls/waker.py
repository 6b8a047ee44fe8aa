"""Ending a child run wakes its parent; ending a parent other than by success cancels its children.

The projector's process hands this the runs each applied batch ended (`on_batch`). For a child run it
marks the end (`Keyspace.run_ended`) and then reads the parent's checkpoint: a parent already parked on
that child gets its resume job (naming the park, so duplicates are dropped by the resume claim); a parent
not parked yet sees the mark in the same atomic write that seals its park and resumes at once
(`Park.wake_on_key`). Either way the parent's step reads the child's end from the store and the run goes
on through the events like every other resume. `sweep()` at start wakes parents whose child ended while
no projector process was there to do it.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.calls.body import CHILD_RUN
from engine.outages import described, outage
from engine.parking.limits import park_token
from engine.runtime.cancel import cancel_run
from engine.runtime.handles import EngineHandles
from engine.runtime.jobs import encode_job, resume_job
from engine.runtime.projection import BatchResult
from engine.runtime.transitions import TERMINAL
from engine.store.db import reading
from engine.store.models import Run

log = logging.getLogger("lockgate.calls")

ENDED_MARK_TTL_SECONDS = 8 * 24 * 3600
"""Longer than any parent may wait (its max_wait), like the resume claims."""
_CHUNK = 500


class ChildRunWaker:
    """Batch listener that wakes parents and cancels orphaned children, in the projector's thread: a batch
    that ended runs costs one indexed query (two when some did not succeed) and a few Redis calls, and the
    parent's resume is on the jobs stream before the next batch is read."""

    def __init__(self, handles: EngineHandles) -> None:
        self.handles = handles

    def on_batch(self, result: BatchResult) -> None:
        if not result.terminal_runs:
            return
        try:
            self.handle(list(result.terminal_runs), result.parents)
        except (redis.RedisError, sa.exc.SQLAlchemyError) as exc:
            if not outage(exc):
                log.exception("child runs: %d ended run(s) could not be handled; the next start's sweep will",
                              len(result.terminal_runs))
            else:
                log.warning("child runs: %d ended run(s) could not be handled (%s); the next start's sweep will",
                            len(result.terminal_runs), described(exc))

    def handle(self, ended: list[tuple[str, str]], known_parents: dict[str, str] | None = None) -> None:
        """Wake the parents of the ended child runs; cancel the unfinished children of runs that did not succeed.

        `known_parents`: the parent of each ended run that has one, as the projector read it (then no query
        looks them up; a batch of runs that all succeeded and have no parent costs nothing)."""
        ids = [run_id for run_id, _status in ended]
        unsuccessful = [run_id for run_id, status in ended if status != "succeeded"]
        parents: list[tuple[str, str]] = []
        orphans: list[tuple[str, str]] = []
        if known_parents is not None:
            parents = [(run_id, known_parents[run_id]) for run_id in ids if run_id in known_parents]
            ids = []
        if ids or unsuccessful:
            with reading(self.handles.sql) as conn:
                for start in range(0, len(ids), _CHUNK):
                    parents += [(row.id, row.parent_run_id) for row in conn.execute(
                        sa.select(Run.id, Run.parent_run_id).where(Run.id.in_(ids[start:start + _CHUNK]),
                                                                   Run.parent_run_id.is_not(None)))]
                for start in range(0, len(unsuccessful), _CHUNK):
                    chunk = unsuccessful[start:start + _CHUNK]
                    orphans += [(row.id, row.parent_run_id) for row in conn.execute(
                        sa.select(Run.id, Run.parent_run_id).where(Run.parent_run_id.in_(chunk),
                                                                   Run.status.not_in(TERMINAL)))]
        for child_id, parent_id in parents:
            self.wake_parent(child_id, parent_id)
        for child_id, parent_id in orphans:
            cancel_run(self.handles, child_id, f'its parent run "{parent_id}" ended without success')

    def wake_parent(self, child_id: str, parent_id: str) -> bool:
        """Mark `child_id` ended, then resume `parent_id` if it is parked on it; True when a resume was sent."""
        keys = self.handles.keys
        mark = keys.run_ended(child_id)
        self.handles.client.set(mark, "1", ex=ENDED_MARK_TTL_SECONDS)
        raw: Any = self.handles.client.get(keys.run_checkpoint(parent_id))
        if raw is None:
            return False
        checkpoint: dict[str, Any] = orjson.loads(raw)
        if checkpoint.get("wake_on_key") != mark:
            return False
        self.handles.client.xadd(keys.jobs, encode_job(resume_job(parent_id, park_token(checkpoint))))
        return True

    def sweep(self) -> int:
        """At start: wake every parent waiting on a child that has ended; returns how many were woken."""
        with reading(self.handles.sql) as conn:
            waiting = [(row.id, row.waiting_on) for row in conn.execute(
                sa.select(Run.id, Run.waiting_on).where(Run.status == "waiting"))]
            children = {str(w["child_run_id"]): run_id for run_id, w in waiting
                        if isinstance(w, dict) and w.get("reason") == CHILD_RUN and w.get("child_run_id")}
            ended: list[str] = []
            child_ids = list(children)
            for start in range(0, len(child_ids), _CHUNK):
                ended += list(conn.execute(sa.select(Run.id).where(Run.id.in_(child_ids[start:start + _CHUNK]),
                                                                   Run.status.in_(TERMINAL))).scalars())
        woken = sum(1 for child_id in ended if self.wake_parent(child_id, children[child_id]))
        if woken:
            log.info("child runs: %d parent run(s) woken whose child had ended", woken)
        return woken
