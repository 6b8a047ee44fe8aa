"""Claiming jobs in one command: read a worker's next jobs and mark them started, atomically on the server.

A worker marks each job it reads before running it: the job's heartbeat and running entry (what the
watchdog reclaims by) are written, and the run's cancel flag is read. `CLAIM` does that for a non-blocking
read of the jobs stream inside one script, so a worker that finishes a batch while jobs are waiting queues
the claim of its next batch behind the writes of the last one and gets both in one round trip. The marks
are exactly those of `Worker.handle_batch`'s check: the same keys, the same values, before any step runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.runtime.cancel import WORKER_ENDS
from engine.transport.keys import Keyspace

_CLAIM = """
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
if not reply then
  return {}
end
local entries = reply[1][2]
local flags = {}
for i, entry in ipairs(entries) do
  local id, fields = entry[1], entry[2]
  local raw, origin, attempt = nil, id, 1
  for j = 1, #fields, 2 do
    local name = fields[j]
    if name == 'j' then
      raw = fields[j + 1]
    elseif name == 'o' then
      origin = fields[j + 1]
    elseif name == 'a' then
      attempt = tonumber(fields[j + 1]) or 1
    end
  end
  local flag = -1
  if raw then
    local ok, job = pcall(cjson.decode, raw)
    if ok and type(job) == 'table' and type(job['run_id']) == 'string' then
      redis.call('HSET', KEYS[2], origin, ARGV[4])
      redis.call('HSET', KEYS[3], origin,
                 cjson.encode({message = id, run = job['run_id'], attempt = attempt, worker = ARGV[2]}))
      local value = redis.call('GET', ARGV[5] .. job['run_id'] .. ARGV[6])
      if not value then
        flag = 0
      elseif string.sub(value, 1, 1) == ARGV[7] then
        flag = 2
      else
        flag = 1
      end
    end
  end
  flags[i] = flag
end
return {entries, flags}
"""

UNMARKED = -1
"""The flag of a claimed entry the script could not read as a job: nothing was written for it. The others are
`engine.runtime.cancel.FlagState` values, as `flag_state` reads the flag's value."""


@dataclass(frozen=True)
class Claimed:
    """Entries claimed by `CLAIM`, and per entry its run's cancel flag (a `FlagState`, or `UNMARKED`)."""

    entries: list[tuple[bytes, dict[bytes, bytes]]]
    flags: list[int]


def queue_claim(pipe: Any, keys: Keyspace, consumer: str, count: int, now: float) -> None:
    """Add the claim of up to `count` new jobs for `consumer` to `pipe`; `claimed()` reads its reply."""
    head, _, tail = keys.run_cancel("\0").partition("\0")
    pipe.eval(_CLAIM, 3, keys.jobs, keys.heartbeats, keys.running_jobs,
              keys.jobs_group, consumer, count, repr(float(now)), head, tail, WORKER_ENDS)


def claimed(reply: Sequence[Any]) -> Claimed:
    """The entries and flags of a `queue_claim` reply."""
    if not reply:
        return Claimed([], [])
    raw_entries, flags = reply
    entries: list[tuple[bytes, dict[bytes, bytes]]] = []
    for message_id, fields in raw_entries:
        entries.append((message_id, dict(zip(fields[::2], fields[1::2], strict=True))))
    return Claimed(entries, [int(flag) for flag in flags])
