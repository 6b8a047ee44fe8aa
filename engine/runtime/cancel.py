"""`cancel_run()`: who ends a cancelled run is decided once, on the Redis server, never from SQL alone.

SQL lags the stream: a run it still calls `queued` may already be in a worker's hands. So one script sets the
run's cancel flag and, in the same step, looks at whether a worker holds the run's job (its `running_jobs`
entry). If none does, the script ends the run itself (its `run_cancelled` event, its wake-up and checkpoint
gone); if one does, the worker ends it at its next step boundary. The flag's first byte records which, so a
worker that claims the job afterwards knows whether the run has ended already (drop the job) or is its to end
(a job handed back after a crash, whose running entry outlived its worker).
"""

from __future__ import annotations

from enum import IntEnum

import sqlalchemy as sa

from engine.events import ExternalStamper, encode_event
from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.handles import EngineHandles
from engine.runtime.transitions import TERMINAL
from engine.store.db import reading
from engine.store.models import Run

CANCEL_FLAG_TTL_SECONDS = 7 * 24 * 3600
ENDED_HERE = b"c"
"""A cancel flag's first byte: the cancel ended the run itself; a worker that meets its job drops it."""
WORKER_ENDS = b"w"
"""A cancel flag's first byte: a worker held the run; whichever worker runs its job next ends it."""

_CANCEL = """
local run_id = ARGV[3]
local held = false
for _, raw in ipairs(redis.call('HVALS', KEYS[2])) do
  local ok, entry = pcall(cjson.decode, raw)
  if ok and type(entry) == 'table' and entry['run'] == run_id then
    held = true
    break
  end
end
if not held and ARGV[6] == 'running' and redis.call('EXISTS', KEYS[5]) == 0 then
  held = true
end
if held then
  redis.call('SET', KEYS[1], ARGV[8] .. ARGV[1], 'EX', ARGV[2])
  return 0
end
redis.call('SET', KEYS[1], ARGV[7] .. ARGV[1], 'EX', ARGV[2])
redis.call('XADD', KEYS[3], '*', ARGV[4], ARGV[5])
redis.call('ZREM', KEYS[4], run_id)
redis.call('DEL', KEYS[5], KEYS[6])
return 1
"""
"""A run SQL calls `running` whose job no worker holds and which has no checkpoint has either ended (its end
not projected yet) or had its job handed back: the worker that runs the job next ends it, so the script never
stamps an end after a run's own end."""


class FlagState(IntEnum):
    """What a worker that claims a job reads off the run's cancel flag."""

    NONE = 0
    ENDED = 1
    """The run was ended by its cancel: drop the job, write nothing."""
    TO_END = 2
    """The run is this worker's to end: write its `run_cancelled`."""


def flag_state(value: bytes | None) -> FlagState:
    """The `FlagState` of a cancel flag's value (None: no flag)."""
    if value is None:
        return FlagState.NONE
    return FlagState.TO_END if value[:1] == WORKER_ENDS else FlagState.ENDED


def flag_reason(value: bytes | None, default: str = "cancelled by request") -> str:
    """The reason a cancel flag carries."""
    return value[1:].decode(errors="replace") if value and value[:1] in (ENDED_HERE, WORKER_ENDS) else default


def cancel_run(handles: EngineHandles, run_id: str, reason: str = "cancelled by request") -> str:
    """Cancel a run: one no worker holds (queued, waiting) at once, one a worker runs at its next step boundary.

    Returns the run's status as seen (`cancelled` when it was stopped at once, `cancelling` for a
    running run, the terminal status unchanged for a finished one). Raises LookupError for an unknown run (its
    message says no more: the CLI and the HTTP API each add how to list runs their way).
    """
    with reading(handles.sql) as conn:
        row = conn.execute(sa.select(Run.status, Run.last_seq).where(Run.id == run_id)).first()
    if row is None:
        raise LookupError(f'run "{run_id}" does not exist')
    status, last_seq = str(row.status), row.last_seq or 0
    if status in TERMINAL:
        return status
    keys = handles.keys
    event = ExternalStamper(run_id, handles.clock, last_seq).run_cancelled(reason)
    ended = handles.client.eval(
        _CANCEL, 6, keys.run_cancel(run_id), keys.running_jobs, keys.events, keys.due,
        keys.run_checkpoint(run_id), keys.run_secrets(run_id),
        reason, CANCEL_FLAG_TTL_SECONDS, run_id, EVENT_FIELD, encode_event(event), status, ENDED_HERE, WORKER_ENDS)
    cancel_children(handles, run_id)
    return "cancelled" if ended else "cancelling"


def cancel_children(handles: EngineHandles, run_id: str) -> list[str]:
    """Cancel the unfinished child runs (`flow.call`) of `run_id`, and theirs; returns the ids cancelled."""
    with reading(handles.sql) as conn:
        children = list(conn.execute(sa.select(Run.id).where(Run.parent_run_id == run_id,
                                                             Run.status.not_in(TERMINAL))).scalars())
    for child in children:
        cancel_run(handles, child, f'its parent run "{run_id}" was cancelled')
    return children
