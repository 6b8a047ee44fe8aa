"""`ChangeOutbox`: applied changes a part must act on even if its process dies, kept on a Redis stream of the part's
own until the part has acted on them (sent a notice, started a run).

The projector's process writes a part's changes with the acknowledgement of the batch that applied them
(`write`, from an `AckFiller`), so a change is on the stream whenever its batch is acknowledged, whatever process
died when; a batch applied again writes its `replayed` changes. Each process running a projector reads the stream
through one consumer group (`run`, on the part's thread) and acknowledges and deletes each entry once handled:

- a handler that meets an outage of Redis or the database (`engine.outages.outage`) leaves its entry; the reader
  waits (`OUTAGE_WAIT_SECONDS`, the last wait repeated while the outage lasts) and reads its own entries again,
  the same change first;
- a handler that raises anything else is logged and its entry dropped (trying again would only repeat it);
- an entry whose reader died is taken over by another reader once it was left `claim_seconds`.

So each change is handled at least once, in order within one reader; handlers must be safe to repeat (idempotent
starts, notices with a delivery id).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis

from engine.outages import described, outage, outage_subject
from engine.runtime.live_change import LiveChange
from engine.runtime.projector import lease_holder
from engine.transport.streams import ensure_group

CLAIM_SECONDS = 120.0
"""How long an entry stays with its reader before another may take it over."""
OUTAGE_WAIT_SECONDS = (0.5, 2.0, 5.0, 15.0, 30.0)
READ_BLOCK_MS = 200
"""How long a read waits for new entries before the reader looks at `stop` again."""
READ_COUNT = 50
FORGET_IDLE_SECONDS = 24 * 3600.0
"""A reader of the group that holds no entry and has not read for this long is removed from it when a reader
starts (each process start adds one)."""
CHANGE_FIELD = "change"
WRITTEN_TTL_SECONDS = 7 * 24 * 3600
"""How long a change written with a `once` key stays known as written: its events can be applied again (a job
redelivered, a batch read again) well within this."""
_WRITE_ONCE = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return redis.call('XADD', KEYS[2], '*', ARGV[2], ARGV[3])
end
return false
"""
"""Add the change (ARGV[3]) to the stream (KEYS[2]) unless its `once` key (KEYS[1]) is set already."""

_FORGET_IDLE = """
local gone = 0
for _, reader in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local fields = {}
  for i = 1, #reader, 2 do
    fields[reader[i]] = reader[i + 1]
  end
  if fields['pending'] == 0 and fields['idle'] >= tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], fields['name'])
    gone = gone + 1
  end
end
return gone
"""
"""Remove the readers of group ARGV[1] on stream KEYS[1] that hold nothing and were idle ARGV[2] ms."""

Handler = Callable[[LiveChange, threading.Event], bool]
"""Handles one change; the event is set when the engine stops (for waits inside the handler). Returns False to
leave the change on the stream (the engine is stopping before it was handled), True once it is handled."""
Entry = tuple[str, LiveChange | None]
"""A stream entry's id and the change it holds (None: unreadable)."""


class ChangeOutbox:
    """The changes of one part on `stream`, read through consumer group `group` of `client`'s Redis."""

    def __init__(self, client: redis.Redis, stream: str, group: str, handle: Handler, what: str,
                 log: logging.Logger, *, claim_seconds: float = CLAIM_SECONDS,
                 outage_waits: tuple[float, ...] = OUTAGE_WAIT_SECONDS,
                 forget_idle_seconds: float = FORGET_IDLE_SECONDS) -> None:
        self.client = client
        self.stream = stream
        self.group = group
        self.handle = handle
        self.what = what
        """What handling a change is, for the log (`approval notice`)."""
        self.log = log
        self.claim_seconds = claim_seconds
        self.outage_waits = outage_waits
        self.forget_idle_seconds = forget_idle_seconds
        self._started = False
        self.consumer = lease_holder()
        self.dropped = 0
        """Changes given up on: unreadable, or their handler raised other than an outage."""
        self._own_first = True
        """Read this reader's own unacknowledged entries first (at start, and after an outage)."""
        self._next_takeover = 0.0

    def write(self, pipe: redis.client.Pipeline, change: LiveChange, once: str | None = None) -> None:
        """Add `change` to the stream with `pipe`'s commands; with `once`, a key naming what the change stands for,
        only the first change written with that key is added."""
        data = orjson.dumps(change.to_data())
        if once is None:
            pipe.xadd(self.stream, {CHANGE_FIELD: data})
        else:
            pipe.eval(_WRITE_ONCE, 2, once, self.stream, WRITTEN_TTL_SECONDS, CHANGE_FIELD, data)

    @property
    def unfinished(self) -> int:
        """Changes written and not yet handled, by any reader (0: every change so far is handled)."""
        return int(self.client.xlen(self.stream))

    def run(self, stop: threading.Event) -> None:
        """Handle changes as they come until `stop` is set."""
        outages = 0
        while not stop.is_set():
            try:
                for entry_id, change in self._take():
                    if stop.is_set():
                        return
                    if self._handled(change, stop):
                        self._settle(entry_id)
                outages = 0
            except Exception as exc:
                wait = self.outage_waits[min(outages, len(self.outage_waits) - 1)]
                outages += 1
                self._own_first = True  # and the group made again, should the stream have been removed
                if outage(exc):
                    self.log.warning("%s: %s did not answer (%s); trying again in %gs", self.what,
                                     outage_subject(exc), described(exc), wait)
                else:
                    self.log.exception("%s: reading %s failed; trying again in %gs", self.what, self.stream, wait)
                stop.wait(wait)

    def _handled(self, change: LiveChange | None, stop: threading.Event) -> bool:
        if change is None:
            self.dropped += 1
            self.log.error("%s: an entry of %s could not be read; skipped", self.what, self.stream)
            return True
        try:
            return self.handle(change, stop)
        except Exception as exc:
            if outage(exc):
                raise
            self.dropped += 1
            self.log.exception("%s for %s of run %s failed; continuing", self.what, change.event, change.run_id)
            return True

    def _take(self) -> list[Entry]:
        """The next entries to handle: this reader's own left ones, then any another reader left `claim_seconds`,
        then new ones (waiting up to `READ_BLOCK_MS` for them)."""
        if self._own_first:
            ensure_group(self.client, self.stream, self.group)
            if not self._started:
                self._forget_gone_readers()
                self._started = True
            own = _entries(self.client.xreadgroup(self.group, self.consumer, {self.stream: "0"}, count=READ_COUNT))
            if own:
                return own
            self._own_first = False
        if time.monotonic() >= self._next_takeover:
            reply: Any = self.client.xautoclaim(self.stream, self.group, self.consumer,
                                                int(self.claim_seconds * 1000), start_id="0-0", count=READ_COUNT)
            taken = _parsed([(entry_id, fields) for entry_id, fields in reply[1] if fields])
            if taken:
                return taken
            self._next_takeover = time.monotonic() + min(self.claim_seconds, 30.0) / 2
        return _entries(self.client.xreadgroup(self.group, self.consumer, {self.stream: ">"}, count=READ_COUNT,
                                               block=READ_BLOCK_MS))

    def _forget_gone_readers(self) -> None:
        """Remove the group's readers that hold no entry and were idle `forget_idle_seconds`, in one script: a
        reader removed with an entry would lose it (a live one is made again by its next read)."""
        self.client.eval(_FORGET_IDLE, 1, self.stream, self.group, int(self.forget_idle_seconds * 1000))

    def _settle(self, entry_id: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.xack(self.stream, self.group, entry_id)
        pipe.xdel(self.stream, entry_id)
        pipe.execute()


def _entries(reply: Any) -> list[Entry]:
    """The entries of an XREADGROUP reply on one stream (an entry deleted meanwhile has no fields: skipped)."""
    if not reply:
        return []
    _stream, entries = reply[0]
    return _parsed([(entry_id, fields) for entry_id, fields in entries if fields])


def _parsed(entries: list[tuple[Any, dict[bytes, bytes]]]) -> list[Entry]:
    parsed: list[Entry] = []
    for entry_id, fields in entries:
        name = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        try:
            parsed.append((name, LiveChange.from_json(fields[CHANGE_FIELD.encode()])))
        except (KeyError, TypeError, orjson.JSONDecodeError):
            parsed.append((name, None))
    return parsed
