"""Fencing: a worker's writes for a job go through only while the job's attempt is still its own.

The reaper and the watchdog redeliver a reclaimed job as a new message carrying attempt N+1 and set
the job's attempt key (`Keyspace.job_attempt`) to N+1 in the same script. Every write a worker makes
for a job (its events, checkpoints, acks) is one Lua script call that first compares that key with
the worker's attempt, so a zombie of attempt N (paused, partitioned, slow) changes nothing once its
job was taken from it: the check and the writes are atomic on the Redis server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from engine.runtime import crashpoints
from engine.runtime.emitter import RedisEmitter, entry_fields
from engine.transport.keys import Keyspace

_FENCED_WRITE = """
local current = tonumber(redis.call('GET', KEYS[1]) or '1')
if current ~= tonumber(ARGV[1]) then
  return 0
end
local i = 2
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  if ARGV[i + 1] == 'LG_IF_EXISTS' then
    if redis.call('EXISTS', ARGV[i + 2]) == 1 then
      redis.call(unpack(ARGV, i + 3, i + n))
    end
  else
    redis.call(unpack(ARGV, i + 1, i + n))
  end
  i = i + n + 1
end
return 1
"""
_IF_EXISTS = "LG_IF_EXISTS"
"""Pseudo-command of a recorded write: run the command after it only when the key named exists."""


class JobFenced(Exception):
    """This worker's attempt of a job is no longer current: the job was reclaimed and redelivered."""


@dataclass(frozen=True)
class JobFence:
    """Which job attempt a worker holds: the job's first message id and the attempt number."""

    origin: str
    attempt: int


class CommandRecorder:
    """Collects the commands of a job's write (the subset of the pipeline API workers use) as argv lists."""

    def __init__(self) -> None:
        self.commands: list[list[Any]] = []

    def xadd(self, stream: str, fields: dict[Any, Any]) -> None:
        argv: list[Any] = ["XADD", stream, "*"]
        for name, value in fields.items():
            argv += [name, value]
        self.commands.append(argv)

    def set(self, key: str, value: Any) -> None:
        self.commands.append(["SET", key, value])

    def zadd(self, key: str, member: str, score: float) -> None:
        self.commands.append(["ZADD", key, repr(float(score)), member])

    def publish(self, channel: str, message: Any) -> None:
        self.commands.append(["PUBLISH", channel, message])

    def delete(self, *keys: str) -> None:
        if keys:
            self.commands.append(["DEL", *keys])

    def xadd_if_exists(self, key: str, stream: str, fields: dict[Any, Any]) -> None:
        """XADD to `stream` only if `key` exists when the write runs (checked atomically with the write)."""
        argv: list[Any] = [_IF_EXISTS, key, "XADD", stream, "*"]
        for name, value in fields.items():
            argv += [name, value]
        self.commands.append(argv)

    def hdel(self, key: str, *fields: Any) -> None:
        if fields:
            self.commands.append(["HDEL", key, *fields])

    def xack(self, stream: str, group: str, *ids: Any) -> None:
        self.commands.append(["XACK", stream, group, *ids])

    def xdel(self, stream: str, *ids: Any) -> None:
        self.commands.append(["XDEL", stream, *ids])

    def argv(self) -> list[Any]:
        flat: list[Any] = []
        for command in self.commands:
            flat.append(len(command))
            flat.extend(command)
        return flat


class FencedWriter:
    """Runs a recorded write only while the fence's attempt is current (one script call)."""

    def __init__(self, client: redis.Redis, keys: Keyspace) -> None:
        self.keys = keys
        self._script = client.register_script(_FENCED_WRITE)

    def write(self, fence: JobFence, recorder: CommandRecorder, pipe: Any = None) -> Any:
        """1 when written, 0 when fenced off; with `pipe`, the call is queued there and its reply comes
        with the pipeline's results."""
        key, args = self.keys.job_attempt(fence.origin), [fence.attempt, *recorder.argv()]
        if pipe is None:
            return self._script(keys=[key], args=args)
        # EVAL, not the Script object: a pipeline holding a Script first asks the server whether it knows the
        # script (SCRIPT EXISTS), one more round trip per batch; EVAL sends the body and cannot miss the cache.
        return pipe.eval(_FENCED_WRITE, 1, key, *args)


class FencedEmitter(RedisEmitter):
    """A run's emitter whose every flush is fenced and carries the run's progress checkpoint.

    `progress()` returns the serialized context as of this flush (or None); it is stored under the job's own
    `run_progress` key in the same atomic write, so what the store knows of the run and what a next
    attempt restores never disagree, and no other job of the run can touch it.
    """

    def __init__(self, client: redis.Redis, keys: Keyspace, writer: FencedWriter, fence: JobFence, run_id: str,
                 progress: Callable[[], bytes | None] | None = None) -> None:
        super().__init__(client, keys.events)
        self.keys = keys
        self.writer = writer
        self.fence = fence
        self.run_id = run_id
        self.progress = progress
        self.after_flush: Callable[[], None] | None = None
        self._flush_lock = threading.Lock()

    def flush(self, extra: Callable[[Any], None] | None = None) -> None:
        with self._flush_lock:
            recorder = CommandRecorder()
            with self._lock:
                pending, self._buffer = self._buffer, []
            if not pending and extra is None:
                return
            if pending:
                recorder.xadd(self.stream, entry_fields(pending))
            snapshot = self.progress() if self.progress is not None else None
            if snapshot is not None:
                recorder.set(self.keys.run_progress(self.run_id, self.fence.origin), snapshot)
            if extra is not None:
                extra(recorder)
            crashpoints.reached("worker.before_flush")
            written = self.writer.write(self.fence, recorder)
            crashpoints.reached("worker.after_flush")
            if not written:
                raise JobFenced(f'run "{self.run_id}": attempt {self.fence.attempt} of job {self.fence.origin} was '
                                "reclaimed and redelivered; this worker's events are refused")
            if self.after_flush is not None:
                self.after_flush()

