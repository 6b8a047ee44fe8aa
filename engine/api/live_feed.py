"""The projector's live channel for async readers: one redis.asyncio subscription per process, fanned out to
bounded per-reader queues.

A reader that falls `queue_size` changes behind is dropped: its queue is emptied (nothing more is held for it)
and it receives `OVERFLOW` as its last item. After the subscription was lost and made again, every reader
receives `RESYNC` (changes published meanwhile are gone from the channel; a run's reader catches up from the
store). When the server stops (`end_readers`), every reader receives `CLOSING` as its last item.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import orjson
import redis.asyncio

from engine.runtime.live_change import LiveChange

log = logging.getLogger("lockgate.api.live")

DEFAULT_QUEUE_SIZE = 256
RECONNECT_SECONDS = 0.5
SUBSCRIBE_SECONDS = 10.0
"""How long `open_reader` waits for the channel's subscription before giving up (Redis unreachable)."""


class LiveUnavailable(Exception):
    """The live channel could not be subscribed to (Redis does not answer)."""


class Signal(Enum):
    OVERFLOW = "overflow"
    """The reader fell too far behind and was dropped: its last item."""
    RESYNC = "resync"
    """The channel was lost for a while: changes may be missing since the reader's last one."""
    CLOSING = "closing"
    """The server is stopping: the reader's last item (its client reconnects, with `Last-Event-ID`, elsewhere or
    later)."""


OVERFLOW = Signal.OVERFLOW
RESYNC = Signal.RESYNC
CLOSING = Signal.CLOSING
FeedItem = LiveChange | Signal


@dataclass(eq=False)
class LiveReader:
    """One reader's bounded queue of the changes it asked for."""

    run_id: str | None
    """Only this run's changes; None: every run's (filtered by `flow_id`)."""
    flow_id: str | None
    queue: asyncio.Queue[FeedItem]
    dropped: bool = False
    received: int = 0

    def wants(self, change: LiveChange) -> bool:
        return self.flow_id is None or change.flow_id == self.flow_id

    async def next(self, timeout: float) -> FeedItem | None:
        """The next item, or None when nothing came within `timeout` seconds."""
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None


@dataclass
class _Readers:
    by_run: dict[str, set[LiveReader]] = field(default_factory=dict)
    every_run: set[LiveReader] = field(default_factory=set)

    def add(self, reader: LiveReader) -> None:
        if reader.run_id is None:
            self.every_run.add(reader)
        else:
            self.by_run.setdefault(reader.run_id, set()).add(reader)

    def discard(self, reader: LiveReader) -> None:
        if reader.run_id is None:
            self.every_run.discard(reader)
            return
        readers = self.by_run.get(reader.run_id)
        if readers is not None:
            readers.discard(reader)
            if not readers:
                del self.by_run[reader.run_id]

    def all(self) -> list[LiveReader]:
        return [*self.every_run, *(reader for readers in self.by_run.values() for reader in readers)]

    def __len__(self) -> int:
        return len(self.every_run) + sum(len(readers) for readers in self.by_run.values())


class LiveFeed:
    """Subscribe with `open_reader()`, always `close_reader()` after. Lives in one event loop (its first)."""

    def __init__(self, make_client: Callable[[], redis.asyncio.Redis], channel: str, *,
                 queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        self.make_client = make_client
        self.channel = channel
        self.queue_size = queue_size
        self._readers = _Readers()
        self._task: asyncio.Task[None] | None = None
        self._subscribed: asyncio.Event | None = None
        self._client: redis.asyncio.Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ending = False
        self.overflows = 0
        """Readers dropped for reading too slowly, since start."""

    @property
    def reader_count(self) -> int:
        return len(self._readers)

    async def open_reader(self, *, run_id: str | None = None, flow_id: str | None = None) -> LiveReader:
        """A reader that receives every change published from the moment this returns (the channel is
        subscribed before it does)."""
        if self._ending:
            raise LiveUnavailable("the server is stopping; connect again once it is back (or to another one)")
        reader = LiveReader(run_id, flow_id, asyncio.Queue(self.queue_size))
        self._loop = asyncio.get_running_loop()
        self._readers.add(reader)
        if self._task is None or self._task.done():
            self._subscribed = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._listen(self._subscribed), name="lockgate-live")
        assert self._subscribed is not None
        try:
            await asyncio.wait_for(self._subscribed.wait(), SUBSCRIBE_SECONDS)
        except TimeoutError:
            self._readers.discard(reader)
            raise LiveUnavailable(f"the live channel {self.channel} could not be subscribed to within "
                                  f"{SUBSCRIBE_SECONDS:.0f}s; is Redis up?") from None
        return reader

    def close_reader(self, reader: LiveReader) -> None:
        self._readers.discard(reader)

    def end_readers(self) -> None:
        """Give every open reader `CLOSING` as its last item and refuse new ones (the server is stopping). Safe from
        any thread."""
        self._ending = True
        if self._loop is None:
            return
        try:
            self._loop.call_soon_threadsafe(self._end_readers)
        except RuntimeError:  # the loop has closed: no reader is left
            pass

    def _end_readers(self) -> None:
        for reader in self._readers.all():
            self._drop(reader, CLOSING)

    async def aclose(self) -> None:
        """Stop listening (the app's shutdown); readers still open receive nothing more."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _deliver(self, reader: LiveReader, item: FeedItem) -> None:
        if reader.dropped:
            return
        try:
            reader.queue.put_nowait(item)
        except asyncio.QueueFull:
            self.overflows += 1
            self._drop(reader, OVERFLOW)
            return
        reader.received += 1

    def _drop(self, reader: LiveReader, last: Signal) -> None:
        """Hold nothing more for `reader`: its queue emptied, `last` its last item."""
        reader.dropped = True
        self._readers.discard(reader)
        while not reader.queue.empty():
            reader.queue.get_nowait()
        reader.queue.put_nowait(last)

    def _fan_out(self, change: LiveChange) -> None:
        for reader in self._readers.by_run.get(change.run_id, ()):
            self._deliver(reader, change)
        for reader in list(self._readers.every_run):
            if reader.wants(change):
                self._deliver(reader, change)

    async def _listen(self, subscribed: asyncio.Event) -> None:
        first = True
        while True:
            client = self.make_client()
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                # The confirmation: from here on every publish on the channel reaches this connection.
                while (await pubsub.get_message(timeout=5.0)) is None:
                    pass
                if not first:
                    for reader in self._readers.all():
                        self._deliver(reader, RESYNC)
                first = False
                subscribed.set()
                while True:
                    message: Any = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                    if message is None or message.get("type") != "message":
                        continue
                    try:
                        change = LiveChange.from_json(message["data"])
                    except (orjson.JSONDecodeError, TypeError) as exc:
                        log.warning("live channel: a message that is no change was ignored: %s", exc)
                        continue
                    self._fan_out(change)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                log.warning("live channel %s lost (%s); subscribing again in %.1fs", self.channel, exc,
                            RECONNECT_SECONDS)
                await asyncio.sleep(RECONNECT_SECONDS)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                with contextlib.suppress(Exception):
                    await client.aclose()
