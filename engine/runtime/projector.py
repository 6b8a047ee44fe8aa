"""The projector: the only writer of run state. Reads the events stream in batches, applies each
batch in one SQL transaction (`projection.apply_batch`), acknowledges it, and publishes every
applied change on the live channel. A Redis lease keeps exactly one projector active among
processes; a standby takes over when the lease lapses.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
import redis
import sqlalchemy as sa

from engine.events.built import BUILT
from engine.runtime import crashpoints
from engine.runtime.emitter import EVENT_FIELD, entry_events
from engine.runtime.live_change import LiveChange
from engine.runtime.projection import BatchResult, apply_batch
from engine.transport.held import HeldConnection
from engine.transport.keys import Keyspace
from engine.transport.streams import ensure_group

log = logging.getLogger("lockgate.projector")

LEASE_SECONDS = 5.0
RENEW_FRACTION = 0.2
"""The part of its lease after which the active projector renews it: a batch starts only while at least four
fifths of the lease is left by the time of its last renewal, so no standby can have taken it over."""
BATCH_SIZE = 1000
"""Events-stream entries read at most per batch (an entry holds one flush of one run: one event or several)."""
BATCH_INTERVAL_SECONDS = 0.01
"""Longest time between the starts of two batches applied back to back (see `linger`)."""
LINGER_RATIO = 1.0
"""How long the projector lets events gather after a batch, as a multiple of the time that batch took to apply."""


def linger(applied_in: float, interval: float = BATCH_INTERVAL_SECONDS, ratio: float = LINGER_RATIO) -> float:
    """Seconds to wait before reading the next batch, after one that took `applied_in` seconds to apply.

    A batch's transaction and commit cost about the same whatever it holds (about 0.5 ms on SQLite), so waiting
    lets the next one share that cost. Waiting as long as the batch took keeps the projector busy at most about
    half of the time (`ratio` 1): under light load batches are quick and the wait short, so a run's last events
    are applied within a millisecond or two; under load the batches grow, and so does the wait, up to batches
    starting `interval` apart."""
    return max(0.0, min(interval - applied_in, applied_in * ratio))

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

_TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""

_PUBLISH_ALL = """
for i = 2, #ARGV do
  redis.call('PUBLISH', KEYS[1], ARGV[i])
end
redis.call('PUBLISH', KEYS[2], ARGV[1])
return #ARGV - 1
"""
"""A batch's live changes in one command: each is still its own message on `live`, in order (the client packs
one command instead of one per change, about 6 us each with redis-py), then the batch's summary (ARGV[1]) on
`live_batches`."""


def batch_summary(changes: list[LiveChange]) -> list[tuple[str, int, str]]:
    """`live_batches`' message for a batch's changes: each run's latest change, as `(run_id, seq, status)`, in the
    order the runs first changed. The batch is committed whole before it is published, so a listener that reads
    the store on hearing it sees the run as its latest change left it, never in a status between; one entry a run
    (a 5-node run's dozen events in one batch are one entry) is what every listener's parsing costs."""
    latest: dict[str, LiveChange] = {}
    for change in changes:
        known = latest.get(change.run_id)
        if known is None or change.seq > known.seq:
            latest[change.run_id] = change
    return [(change.run_id, change.seq, change.status) for change in latest.values()]


_READ_AS_HOLDER = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return false
end
local reply = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS', KEYS[2], ARGV[5])
if reply then
  return {reply[1][2], ''}
end
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[2])) do
  local name, last
  for i = 1, #group, 2 do
    if group[i] == 'name' then name = group[i + 1] elseif group[i] == 'last-delivered-id' then last = group[i + 1] end
  end
  if name == ARGV[2] then
    return {{}, last}
  end
end
return {{}, '0-0'}
"""
"""The projector's read, delivered only while the reader holds the lease: `false` when it does not, else the
entries and, when there are none, the group's last delivered id (the blocking wait's start). The check and the
delivery are one step on the server, so a read that reaches Redis after the lease has passed on (a projector cut
off from the network while its read was on the way) hands nothing to a former holder: every entry is delivered
to the holder of the moment, which applies them in stream order."""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class LeaseLost(Exception):
    """The projector's read found another holder (or none) on the lease: it is a standby from now on."""


def lease_holder() -> str:
    """`host:pid:nonce`: who holds the lease, and whether a process on this host can tell it is gone."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _holder_gone(holder: str, host: str) -> bool:
    """True when `holder` was a process of this host that no longer exists."""
    parts = holder.split(":")
    if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class ProjectorLease:
    """The Redis lease that makes one projector active: SET NX PX, renewed only by its holder.

    A lease held by a process of this host that has died is taken over at once, so a projector restarted
    after a crash does not wait for its predecessor's lease to lapse."""

    def __init__(self, client: redis.Redis, key: str, holder: str, seconds: float = LEASE_SECONDS) -> None:
        self.client = client
        self.key = key
        self.holder = holder
        self.host = socket.gethostname()
        self.ms = int(seconds * 1000)
        self._renew = client.register_script(_RENEW)
        self._take_over = client.register_script(_TAKE_OVER)
        self._release = client.register_script(_RELEASE)

    def acquire_or_renew(self) -> bool:
        """True while this holder has the lease."""
        if self._renew(keys=[self.key], args=[self.holder, self.ms]):
            return True
        if self.client.set(self.key, self.holder, nx=True, px=self.ms):
            return True
        current: Any = self.client.get(self.key)
        if current is not None and _holder_gone(current.decode(), self.host):
            return bool(self._take_over(keys=[self.key], args=[current, self.holder, self.ms]))
        return False

    def release(self) -> None:
        self._release(keys=[self.key], args=[self.holder])


class Projector:
    """Consumes the events stream (group `projector`) while it holds the lease."""

    def __init__(self, client: redis.Redis, keys: Keyspace, sql: sa.Engine, *, holder: str | None = None,
                 on_batch: Callable[[BatchResult], None] | None = None,
                 fill_ack: Callable[[BatchResult, redis.client.Pipeline], None] | None = None, block_ms: int = 200,
                 journal: int = 0, batch_interval: float = BATCH_INTERVAL_SECONDS,
                 lease_seconds: float = LEASE_SECONDS) -> None:
        self.client = client
        self.keys = keys
        self.sql = sql
        self.holder = holder or lease_holder()
        self.lease = ProjectorLease(client, keys.projector_lease, self.holder, lease_seconds)
        self.renew_seconds = lease_seconds * RENEW_FRACTION
        self.held = HeldConnection(client)
        """The projecting thread's own connection for its reads and batch writes."""
        self.on_batch = on_batch
        self.fill_ack = fill_ack
        """Adds commands to each batch's acknowledgement, ahead of it in the same round trip: what a part must
        not lose to a crash is written there (e.g. an outbox), from the batch's changes and its `replayed` ones."""
        self.block_ms = block_ms
        self.journal = journal
        """Applied events kept in `Keyspace.events_journal` (0: none)."""
        self.batch_interval = batch_interval
        self.active = False
        self.done_through: str | None = None
        """Id of the last event message whose batch is applied and was passed to `on_batch`."""
        self._recover = True
        """Re-read entries delivered but not acknowledged (after taking the lease or a failed batch)."""
        self._renewed_at = float("-inf")
        """Monotonic time just before the last renewal that kept the lease."""
        self.entries_read = 0
        """Events-stream entries the last `step` read."""
        self.applied_in = 0.0
        """Seconds the last `step` took from the moment its entries were read to the end of its batch."""
        self._last_delivered: str | bytes | None = None
        """The group's last delivered id when the last read found nothing new: where the blocking wait starts."""

    def run(self, stop: threading.Event) -> None:
        ensure_group(self.client, self.keys.events, self.keys.events_group)
        try:
            while not stop.is_set():
                try:
                    was_active = self.active
                    self.active = self._hold_lease()
                    if self.active and not was_active:
                        self._recover = True
                        BUILT.keeping = True
                    if not self.active:
                        if was_active:
                            BUILT.stop_keeping()
                        stop.wait(self.renew_seconds)
                        continue
                    try:
                        self.step(block_ms=self.block_ms)
                    except LeaseLost:
                        log.warning("projector %s: the lease has passed to another holder; standing by", self.holder)
                        self.active = False
                        self._renewed_at = float("-inf")
                        BUILT.stop_keeping()
                        continue
                    read = self.entries_read
                    if 0 < read < BATCH_SIZE and not self._recover:  # a full batch: a backlog, go on at once
                        rest = linger(self.applied_in, self.batch_interval)
                        if rest > 0:
                            stop.wait(rest)
                except redis.ConnectionError:
                    if stop.is_set():
                        return
                    log.warning("projector %s: Redis connection lost; retrying in 1s", self.holder)
                    self._recover = True  # a batch read before the loss is pending: apply it first, in order
                    stop.wait(1.0)
                except (sa.exc.OperationalError, sa.exc.IntegrityError) as exc:
                    log.warning("projector %s: database error, batch left pending for retry: %s", self.holder, exc)
                    self._recover = True
                    stop.wait(0.5)
                except Exception:
                    log.exception("projector %s: batch failed; left pending for retry", self.holder)
                    self._recover = True
                    stop.wait(0.5)
        finally:
            BUILT.stop_keeping()
            if self.active:
                try:
                    self.lease.release()
                except redis.RedisError:
                    pass
            self.active = False

    def _hold_lease(self) -> bool:
        """Whether this projector holds the lease; asks Redis only once `renew_seconds` have passed since the last
        renewal (a round trip per batch otherwise)."""
        asked = time.monotonic()
        if self.active and asked - self._renewed_at < self.renew_seconds:
            return True
        held = self.lease.acquire_or_renew()
        self._renewed_at = asked if held else float("-inf")
        return held

    def step(self, block_ms: int | None = None) -> BatchResult:
        """Apply one batch: first anything delivered but not acknowledged (when recovering), then new events."""
        entries = []
        if self._recover:
            entries = self._read("0", None)
            self._recover = bool(entries)
        if not entries:
            entries = self._read(">", block_ms)
        self.entries_read = len(entries)
        if not entries:
            return BatchResult()
        read_at = time.monotonic()
        messages = [(mid.decode(), raw) for mid, fields in entries for raw in entry_events(fields)]
        result = apply_batch(self.sql, messages, source=self.keys.events)
        crashpoints.reached("projector.after_commit")
        ids = [mid for mid, _ in entries]
        pipe = self.held.pipeline()
        if self.fill_ack is not None:
            self.fill_ack(result, pipe)
        if self.journal:
            for _mid, raw in messages:
                pipe.xadd(self.keys.events_journal, {EVENT_FIELD: raw}, maxlen=self.journal, approximate=True)
        pipe.xack(self.keys.events, self.keys.events_group, *ids)
        pipe.xdel(self.keys.events, *ids)
        if result.published:
            summary = orjson.dumps(batch_summary(result.changes))
            pipe.eval(_PUBLISH_ALL, 2, self.keys.live, self.keys.live_batches, summary, *result.published)
        self.held.execute(pipe)
        if self.on_batch is not None:
            self.on_batch(result)
        self.done_through = messages[-1][0]
        self.applied_in = time.monotonic() - read_at
        return result

    def _read(self, start: str, block_ms: int | None) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Entries from `start` ("0": this group's pending ones; ">": new ones), read only while this projector
        holds the lease (`LeaseLost` otherwise). With `block_ms` and nothing new, waits that long for an entry."""
        entries = self._read_as_holder(start)
        if entries or start != ">" or not block_ms or self._last_delivered is None:
            return entries
        # A plain XREAD changes no delivery state, so waiting outside the lease check is safe: it only wakes the
        # scripted read again once an entry past the last delivered one arrives.
        wait = self.held.pipeline()
        wait.xread({self.keys.events: self._last_delivered}, count=1, block=block_ms)
        if not self.held.execute(wait)[0]:
            return []
        return self._read_as_holder(start)

    def _read_as_holder(self, start: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
        # Every projector reads as the same consumer: the lease, not the group, decides who is active,
        # so a successor sees its predecessor's unacknowledged batch as its own pending entries.
        read = self.held.pipeline()
        read.eval(_READ_AS_HOLDER, 2, self.keys.projector_lease, self.keys.events,
                  self.holder, self.keys.events_group, "projector", BATCH_SIZE, start)
        reply: Any = self.held.execute(read)[0]
        if reply is None:
            raise LeaseLost(self.holder)
        items, last = reply
        self._last_delivered = last or None
        return [(mid, dict(zip(flat[0::2], flat[1::2], strict=True))) for mid, flat in items if flat]
