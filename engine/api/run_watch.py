"""Wakes requests waiting on a run the moment a change to it is applied.

Given a Redis client and the projector's batch channel (`Keyspace.live_batches`: one message a batch, naming each
changed run's latest sequence and status), a watch subscribes once (a thread of its own) and wakes the waiters of
each change's run, whichever process holds the projector lease;
`watching()` returns only once the channel is subscribed, so a change applied after the waiter's first read of
the store always wakes it. This process's projector also wakes them directly (`on_batch`). A watch without a
channel, or whose subscription is lost, falls back to polling the store every `POLL_SECONDS`. A waiter may name
the run statuses it waits for (`watching(run_id, statuses)`): a change leaving the run in another status does not
wake it, so a sync start reads the store once when its run ends instead of once per step.

The watch also remembers the latest status it heard of the last `RECENT_RUNS` runs: a waiter whose run already
reached one of its statuses before `watching()` is woken at once, so a caller that held the channel unbroken
since it created the run (`live_since()`, `unbroken_since()`) need not read the store before waiting.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol

import orjson
import redis

from engine.outages import OutageReport
from engine.runtime.projection import BatchResult

log = logging.getLogger("lockgate.api.watch")

POLL_SECONDS = 0.05
SUBSCRIBE_SECONDS = 2.0
"""How long `watching()` waits for the live channel's subscription before falling back to polling."""
RECONNECT_SECONDS = 0.5
RECENT_RUNS = 10_000
"""Runs whose latest heard status a watch remembers."""
Heard = tuple[str, int, str | None]
"""(run id, the change's sequence, the status it left the run in; None: unknown)."""


def _heard(data: bytes) -> list[Heard]:
    """The changes a `live_batches` message names (those it cannot read are skipped)."""
    try:
        summary = orjson.loads(data)
    except orjson.JSONDecodeError:
        return []
    heard: list[Heard] = []
    for change in summary if isinstance(summary, list) else ():
        if not isinstance(change, list) or len(change) != 3 or not isinstance(change[0], str):
            continue
        run_id, seq, status = change
        known = isinstance(seq, int) and isinstance(status, str)
        heard.append((run_id, seq if known else 0, status if known else None))
    return heard


class Wakeable(Protocol):
    """What a waiter is woken through: a `threading.Event`, or anything else that can be set from the watch's
    thread (e.g. `engine.api.loop_event.LoopEvent` for a waiter on an event loop)."""

    def set(self) -> None: ...


class _Waiter(NamedTuple):
    event: Wakeable
    statuses: frozenset[str] | None
    """Wake only for a change leaving the run in one of these (None: every change)."""


class RunWatch:
    def __init__(self, client: redis.Redis | None = None, channel: str | None = None) -> None:
        self._waiters: dict[str, list[_Waiter]] = {}
        self._lock = threading.Lock()
        self._client = client
        self._channel = channel
        self._live = threading.Event()
        """Set while the live channel is subscribed."""
        self._generation = 0
        """Subscriptions made so far: a caller sees whether the channel was lost since it looked."""
        self._recent: OrderedDict[str, tuple[int, str]] = OrderedDict()
        """Run id -> (sequence, status) of the latest change heard, for the last RECENT_RUNS runs."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.released = False
        """Set by `release()`: the server is stopping, and waiters answer with what they have."""

    @property
    def poll_seconds(self) -> float | None:
        """How long a waiter may sleep between reads of the store: None (until woken) while the live channel is
        subscribed, else `POLL_SECONDS`."""
        return None if self._live.is_set() else POLL_SECONDS

    def live_since(self) -> int | None:
        """A mark of the live channel's current subscription (None while it is not subscribed): while
        `unbroken_since(mark)`, every change published after this call has reached the watch."""
        if not self._live.is_set():
            return None
        return self._generation

    def unbroken_since(self, mark: int) -> bool:
        return self._live.is_set() and self._generation == mark

    @property
    def waiting(self) -> int:
        """Requests waiting now."""
        with self._lock:
            return sum(len(waiters) for waiters in self._waiters.values())

    @contextmanager
    def watching(self, run_id: str, statuses: frozenset[str] | None = None) -> Iterator[threading.Event]:
        """An event set on each applied change to the run (with `statuses`: each one leaving the run in one of
        them), and whenever the channel was lost and changes may have been missed."""
        event = threading.Event()
        unwatch = self.watch(run_id, event, statuses)
        try:
            yield event
        finally:
            unwatch()

    def watch(self, run_id: str, event: Wakeable, statuses: frozenset[str] | None = None) -> Callable[[], None]:
        """`watching()` for a waiter that spans more than one block of code: `event` is set as `watching()`'s is,
        until the call it returns is made (idempotent, quick: safe on an event loop). Returns only once the live
        channel is subscribed (or `SUBSCRIBE_SECONDS` passed): call it off any event loop."""
        waiter = _Waiter(event, statuses)
        with self._lock:
            self._waiters.setdefault(run_id, []).append(waiter)
            heard = self._recent.get(run_id)
        if heard is not None and (statuses is None or heard[1] in statuses):
            event.set()
        self._subscribed()
        return functools.partial(self._forget, run_id, waiter)

    def _forget(self, run_id: str, waiter: _Waiter) -> None:
        with self._lock:
            waiters = self._waiters.get(run_id, [])
            if waiter in waiters:
                waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(run_id, None)

    def on_batch(self, result: BatchResult) -> None:
        if not self._waiters:
            return
        self._wake([(change.run_id, change.seq, change.status) for change in result.changes])

    def release(self) -> None:
        """The server is stopping: wake every waiter now, so that each answers at once with what it has (a sync
        start: its run's status) instead of having its connection closed unanswered; a start that looks at
        `released` later answers without waiting (`StartWait`)."""
        self.released = True
        self._wake(None)

    def close(self) -> None:
        """Stop listening to the live channel (waiters fall back to polling)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._live.clear()

    def _wake(self, changes: Iterable[Heard] | None) -> None:
        """Remember and wake the waiters of each change heard (None: wake every waiter)."""
        with self._lock:
            if changes is None:
                woken = [waiter.event for waiters in self._waiters.values() for waiter in waiters]
            else:
                woken = []
                for run_id, seq, status in changes:
                    if status is not None:
                        self._remember(run_id, seq, status)
                    woken += [waiter.event for waiter in self._waiters.get(run_id, ())
                              if waiter.statuses is None or status is None or status in waiter.statuses]
        for event in woken:
            event.set()

    def _remember(self, run_id: str, seq: int, status: str) -> None:
        """Under the lock. The channel and this process's projector may tell one change twice and out of order:
        the later sequence wins."""
        known = self._recent.get(run_id)
        if known is not None:
            if known[0] > seq:
                return
            self._recent.move_to_end(run_id)
        self._recent[run_id] = (seq, status)
        if len(self._recent) > RECENT_RUNS:
            self._recent.popitem(last=False)

    def _subscribed(self) -> None:
        if self._client is None or self._channel is None or self._stop.is_set():
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen, name="lockgate-run-watch", daemon=True)
                self._thread.start()
        self._live.wait(SUBSCRIBE_SECONDS)

    def _listen(self) -> None:
        assert self._client is not None and self._channel is not None
        report = OutageReport(log, "run watch: live channel")
        while not self._stop.is_set():
            pubsub = self._client.pubsub()
            try:
                pubsub.subscribe(self._channel)
                while pubsub.get_message(timeout=1.0) is None:  # the subscription's confirmation
                    if self._stop.is_set():
                        return
                with self._lock:
                    self._generation += 1
                    self._recent.clear()  # what was missed while not subscribed is not known
                self._live.set()
                report.worked()
                self._wake(None)  # changes published while not subscribed are gone: everyone reads again
                while not self._stop.is_set():
                    message: Any = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
                    if message is None or message.get("type") != "message":
                        continue
                    heard = _heard(message["data"])
                    if heard:
                        self._wake(heard)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                if self._stop.is_set():
                    return
                report.failed("run watch: live channel lost (%s); polling the store until it is back", exc)
                self._live.clear()
                self._wake(None)
                self._stop.wait(RECONNECT_SECONDS)
            finally:
                self._live.clear()
                try:
                    pubsub.close()
                except redis.RedisError:
                    pass
