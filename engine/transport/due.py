"""Parked runs by due time: a Redis sorted set, and a waker that sleeps exactly until the next one.

`DueSet` keeps member -> due time (epoch seconds) in `Keyspace.due`. `claim_due` is one Lua script, so each
due member is handed to exactly one caller however many processes claim at once.

A claim is a lease, not a pop: the script moves each member it hands out to `Keyspace.due_claims`, scored
with the time its claim lapses. The claimer settles the claim once its callback has enqueued what the
member needs; a claim that is never settled (its process was killed, or its host was cut off and the
script ran on the server while the answer never came back) lapses, and the next claim hands the member out
again. A member is therefore delivered at least once; the resume claim downstream (`engine.parking.resume`)
makes a second delivery harmless.

`DueWaker` is a thread (the engine's services are threads; the app's engine thread and
`lockgate worker` both host it). It never polls on a fixed period: it sleeps on the
`Keyspace.due_nudge` pub/sub channel with the time left until the earliest due member (or lapsing
claim) as its timeout, so it wakes at that time, or earlier when `schedule` publishes a nudge because a
new member became the earliest. The sleep is capped at `max_sleep` only as a safety net (a nudge lost
while the server restarted, a wall clock that jumped). Time comes from an injected `Clock`: with
`ManualClock`, tests `advance` the clock and `nudge()`, and nothing waits for real.

Durability: the SQL run row (`waiting_on.due_at`) is the source of truth; the parking service rebuilds
the set from SQL at start-up (for a Redis that lost its data). A callback that raises gets its members
rescheduled `retry_delay` seconds later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple

import redis

from engine.clock import Clock, SystemClock
from engine.transport.keys import Keyspace

log = logging.getLogger(__name__)

# KEYS[1] due set, KEYS[2] nudge channel; ARGV: member, due_at, member, due_at, ...
# Publishes a nudge when a new member is (now) the earliest, so sleeping wakers recompute.
_SCHEDULE = """
local earliest = nil
for i = 1, #ARGV, 2 do
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  local score = tonumber(ARGV[i + 1])
  if earliest == nil or score < earliest then earliest = score end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if earliest ~= nil and first[2] ~= nil and tonumber(first[2]) >= earliest then
  redis.call('PUBLISH', KEYS[2], first[2])
  return 1
end
return 0
"""

# KEYS[1] due set, KEYS[2] claims; ARGV[1] now, ARGV[2] limit, ARGV[3] when the new claims lapse.
# Hands out lapsed claims first (their score is when they lapsed), then due members; each one handed out is
# (re)claimed until ARGV[3]. Returns member, score, member, score, ...
_CLAIM_DUE = """
local limit = tonumber(ARGV[2])
local out = {}
local seen = {}
local lapsed = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, limit, 'WITHSCORES')
for i = 1, #lapsed, 2 do
  redis.call('ZADD', KEYS[2], ARGV[3], lapsed[i])
  seen[lapsed[i]] = true
  out[#out + 1] = lapsed[i]
  out[#out + 1] = lapsed[i + 1]
end
local room = limit - #lapsed / 2
if room > 0 then
  local items = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, room, 'WITHSCORES')
  for i = 1, #items, 2 do
    redis.call('ZREM', KEYS[1], items[i])
    if not seen[items[i]] then
      redis.call('ZADD', KEYS[2], ARGV[3], items[i])
      out[#out + 1] = items[i]
      out[#out + 1] = items[i + 1]
    end
  end
end
return out
"""

# KEYS[1] claims; ARGV[1] when the claims lapse, ARGV[2..] members. Removes only claims still the caller's:
# one that lapsed and was handed to another caller has another lapse time.
_SETTLE = """
local settled = 0
for i = 2, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[1]) then
    redis.call('ZREM', KEYS[1], ARGV[i])
    settled = settled + 1
  end
end
return settled
"""

CLAIM_SECONDS = 10.0
"""How long a waker's claim on due members holds before another waker may deliver them: far longer than a
callback's one pipelined write, short enough that a run whose waker died resumes within seconds."""


class DueItem(NamedTuple):
    member: str
    due_at: float
    """When it became due: its schedule, or when an earlier claim on it lapsed."""


class DueClaim(NamedTuple):
    """Members handed to one caller, held for it until `until`; `DueSet.settle` ends the hold."""

    items: list[DueItem]
    until: float


class DueSet:
    """Members (e.g. run ids) with due times, in one Redis sorted set."""

    def __init__(self, client: redis.Redis, keyspace: Keyspace) -> None:
        self.client = client
        self.keyspace = keyspace
        self._schedule = client.register_script(_SCHEDULE)
        self._claim_due = client.register_script(_CLAIM_DUE)
        self._settle = client.register_script(_SETTLE)

    def schedule(self, member: str, due_at: float) -> bool:
        """Set `member` due at `due_at` (replacing an earlier schedule). True when it became the
        earliest member, which nudges sleeping wakers."""
        return self.schedule_many({member: due_at})

    def schedule_many(self, due_times: Mapping[str, float]) -> bool:
        """`schedule` for many members in one round trip."""
        if not due_times:
            return False
        args: list[str] = []
        for member, due_at in due_times.items():
            args += [member, repr(float(due_at))]
        return bool(self._schedule(keys=[self.keyspace.due, self.keyspace.due_nudge], args=args))

    def cancel(self, member: str) -> bool:
        """Remove `member`; True when it was scheduled."""
        return bool(self.client.zrem(self.keyspace.due, member))

    def due_at(self, member: str) -> float | None:
        """When `member` is due, or None when it is not scheduled."""
        score = self.client.zscore(self.keyspace.due, member)
        return None if score is None else float(score)

    def claim_due(self, now: float, limit: int = 500, hold: float = CLAIM_SECONDS) -> DueClaim:
        """Claim up to `limit` members due at or before `now` (or whose earlier claim lapsed), earliest first,
        for `hold` seconds. Atomic: concurrent callers never receive the same member while its claim holds."""
        until = now + hold
        flat = self._claim_due(keys=[self.keyspace.due, self.keyspace.due_claims],
                               args=[repr(float(now)), int(limit), repr(until)])
        return DueClaim([DueItem(flat[i].decode(), float(flat[i + 1])) for i in range(0, len(flat), 2)], until)

    def settle(self, claim: DueClaim) -> int:
        """End the claim on its members (their delivery is done); returns how many were still this claim's."""
        if not claim.items:
            return 0
        return int(self._settle(keys=[self.keyspace.due_claims],
                                args=[repr(claim.until), *(item.member for item in claim.items)]))

    def next_due(self) -> float | None:
        """The earliest due time, or None when nothing is scheduled."""
        first = self.client.zrange(self.keyspace.due, 0, 0, withscores=True)
        return float(first[0][1]) if first else None

    def next_wake(self) -> float | None:
        """When a waker next has something to hand out: the earliest due time or lapse of a claim."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zrange(self.keyspace.due, 0, 0, withscores=True)
        pipe.zrange(self.keyspace.due_claims, 0, 0, withscores=True)
        times = [float(first[0][1]) for first in pipe.execute() if first]
        return min(times) if times else None

    def claimed(self) -> int:
        """How many members are claimed and not settled."""
        return int(self.client.zcard(self.keyspace.due_claims))

    def count(self) -> int:
        return int(self.client.zcard(self.keyspace.due))

    def nudge(self) -> None:
        """Wake every waker to recompute (after a `ManualClock.advance`, or on shutdown)."""
        self.client.publish(self.keyspace.due_nudge, b"nudge")


DueCallback = Callable[[list[DueItem]], None]


class DueWaker:
    """A thread that hands due members to `callback` (a list per wake, earliest first) at their due time."""

    def __init__(
        self,
        due: DueSet,
        callback: DueCallback,
        clock: Clock | None = None,
        *,
        batch: int = 500,
        max_sleep: float = 30.0,
        retry_delay: float = 1.0,
        hold: float = CLAIM_SECONDS,
        name: str = "lockgate-due-waker",
    ) -> None:
        self.due = due
        self.callback = callback
        self.clock: Clock = clock or SystemClock()
        self.batch = batch
        self.max_sleep = max_sleep
        self.retry_delay = retry_delay
        self.hold = hold
        self.wakes = 0
        """How many times the loop woke (for benchmarks)."""
        self.delivered = 0
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self, ready_timeout: float = 10.0) -> DueWaker:
        """Start the thread; returns once it listens for nudges (so a following `nudge()` is heard)."""
        self._thread.start()
        if not self._ready.wait(ready_timeout):
            raise RuntimeError(f"due waker did not subscribe to {self.due.keyspace.due_nudge} within {ready_timeout}s")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread after its current delivery."""
        self._stopping.set()
        if self._thread.is_alive():
            try:
                self.due.nudge()
            except redis.RedisError:
                pass  # the loop also wakes by itself within max_sleep
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def deliver_due(self) -> int:
        """Claim everything due now, hand it to the callback, settle; returns how many were delivered.

        Should the process die (or lose Redis) before it settles, the claim lapses and another waker delivers
        the members again."""
        total = 0
        while not self._stopping.is_set():
            claim = self.due.claim_due(self.clock.now(), self.batch, self.hold)
            if not claim.items:
                break
            try:
                self.callback(claim.items)
            except Exception:
                log.exception(
                    "due waker: callback failed for %d member(s); retrying in %ss", len(claim.items),
                    self.retry_delay
                )
                retry_at = self.clock.now() + self.retry_delay
                self.due.schedule_many({item.member: retry_at for item in claim.items})
            self.due.settle(claim)
            total += len(claim.items)
            if len(claim.items) < self.batch:
                break
        self.delivered += total
        return total

    def _seconds_to_next(self) -> float:
        next_wake = self.due.next_wake()
        if next_wake is None:
            return self.max_sleep
        return min(max(next_wake - self.clock.now(), 0.0), self.max_sleep)

    def _run(self) -> None:
        while not self._stopping.is_set():
            pubsub = self.due.client.pubsub()
            try:
                pubsub.subscribe(self.due.keyspace.due_nudge)
                # Wait for the subscription to be live before reading the set: a nudge published
                # between reading next_due and subscribing would otherwise be missed.
                while pubsub.get_message(timeout=5.0) is None:
                    if self._stopping.is_set():
                        return
                self._ready.set()
                self._loop(pubsub)
            except redis.RedisError:
                log.exception("due waker: Redis failed; reconnecting in 0.5s")
                self._stopping.wait(0.5)
            finally:
                pubsub.close()

    def _loop(self, pubsub: redis.client.PubSub) -> None:
        while not self._stopping.is_set():
            self.deliver_due()
            timeout = self._seconds_to_next()
            if timeout > 0:
                message = pubsub.get_message(timeout=timeout)
                while message is not None:  # drain a burst of nudges in one wake
                    message = pubsub.get_message(timeout=0)
            self.wakes += 1
