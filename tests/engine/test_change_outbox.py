"""`ChangeOutbox` on a real Redis: changes are handled in order past a handler that raises; a handler that meets an
outage is called again for the same change, however long the outage lasts; a change a stopped or dead reader left
is handled by the next; a change written `once` is on the stream once."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from engine.runtime.change_outbox import ChangeOutbox, Handler
from engine.runtime.live_change import LiveChange
from tests.engine.conftest import wait_until

LOG = logging.getLogger("tests.change_outbox")


def _change(seq: int) -> LiveChange:
    return LiveChange("run-1", "f", 1, "running", seq, "step_started")


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def outbox_of(client: redis.Redis, key_prefix: str) -> Callable[..., ChangeOutbox]:
    def make(handle: Handler, **options: float | tuple[float, ...]) -> ChangeOutbox:
        return ChangeOutbox(client, f"{key_prefix}:outbox", "readers", handle, "test notice", LOG,
                            **options)  # type: ignore[arg-type]
    return make


def _write(outbox: ChangeOutbox, *seqs: int) -> None:
    pipe = outbox.client.pipeline(transaction=False)
    for seq in seqs:
        outbox.write(pipe, _change(seq))
    pipe.execute()


def _run_until_handled(outbox: ChangeOutbox) -> threading.Thread:
    """Run `outbox` on a thread until every change written is handled, then stop it; returns the (ended) thread."""
    stop = threading.Event()
    thread = threading.Thread(target=outbox.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: outbox.unfinished == 0, timeout=10, what="every change handled")
    finally:
        stop.set()
        thread.join(10)
    return thread


def test_changes_are_handled_in_order_and_a_failing_one_does_not_stop_the_rest(
        outbox_of: Callable[..., ChangeOutbox], caplog: pytest.LogCaptureFixture) -> None:
    handled: list[int] = []

    def handle(change: LiveChange, _stop: threading.Event) -> bool:
        if change.seq == 2:
            raise ValueError("no such approval")
        handled.append(change.seq)
        return True

    outbox = outbox_of(handle)
    _write(outbox, 1, 2, 3)
    assert outbox.unfinished == 3
    with caplog.at_level(logging.ERROR, logger=LOG.name):
        thread = _run_until_handled(outbox)
    assert handled == [1, 3]
    assert not thread.is_alive()
    assert outbox.dropped == 1
    assert "test notice for step_started of run run-1 failed; continuing" in caplog.text


def test_a_change_whose_handler_meets_an_outage_is_handled_again_before_the_next_however_long_it_lasts(
        outbox_of: Callable[..., ChangeOutbox], caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    closed = _refusing_redis()

    def handle(change: LiveChange, _stop: threading.Event) -> bool:
        calls.append(change.seq)
        if change.seq == 1 and calls.count(1) <= 6:
            closed.ping()
        return True

    outbox = outbox_of(handle, outage_waits=(0.01, 0.02))
    _write(outbox, 1, 2)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        _run_until_handled(outbox)
    assert calls == [1] * 7 + [2]
    assert outbox.dropped == 0
    assert caplog.text.count("Redis did not answer") == 6


def test_a_change_left_by_a_stopped_reader_is_handled_by_the_next(outbox_of: Callable[..., ChangeOutbox]) -> None:
    closed = _refusing_redis()
    calls: list[str] = []

    def failing(change: LiveChange, _stop: threading.Event) -> bool:
        calls.append("first")
        closed.ping()
        return True

    first = outbox_of(failing, outage_waits=(60.0,), claim_seconds=0.3)
    _write(first, 1)
    stop = threading.Event()
    thread = threading.Thread(target=first.run, args=(stop,), daemon=True)
    thread.start()
    wait_until(lambda: calls == ["first"], timeout=10, what="the first attempt")
    stop.set()
    thread.join(5)
    assert not thread.is_alive(), "stopping did not end the wait after an outage"
    assert first.unfinished == 1 and first.dropped == 0

    def handle(change: LiveChange, _stop: threading.Event) -> bool:
        calls.append(f"next {change.seq}")
        return True

    _run_until_handled(outbox_of(handle, claim_seconds=0.3))
    assert calls == ["first", "next 1"]


def test_a_change_a_dead_reader_took_is_taken_over_once_left_the_claims_time(
        client: redis.Redis, outbox_of: Callable[..., ChangeOutbox]) -> None:
    handled: list[int] = []

    def handle(change: LiveChange, _stop: threading.Event) -> bool:
        handled.append(change.seq)
        return True

    outbox = outbox_of(handle, claim_seconds=0.5)
    client.xgroup_create(outbox.stream, outbox.group, id="0", mkstream=True)
    _write(outbox, 1, 2)
    taken: Any = client.xreadgroup(outbox.group, "a reader that died", {outbox.stream: ">"}, count=1)
    assert len(taken[0][1]) == 1
    _run_until_handled(outbox)
    assert sorted(handled) == [1, 2]
    assert client.xpending(outbox.stream, outbox.group)["pending"] == 0


def test_a_change_written_once_is_on_the_stream_once(client: redis.Redis, outbox_of: Callable[..., ChangeOutbox],
                                                    key_prefix: str) -> None:
    outbox = outbox_of(lambda change, stop: True)
    for _ in range(3):
        pipe = client.pipeline(transaction=False)
        outbox.write(pipe, _change(1), once=f"{key_prefix}:once:ask")
        pipe.execute()
    assert outbox.unfinished == 1
    assert 0 < int(client.ttl(f"{key_prefix}:once:ask")) <= 7 * 24 * 3600


def _refusing_redis() -> redis.Redis:
    """A client of a port nothing listens on, which gives up at the first refusal."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return redis.Redis(port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))


def test_a_starting_reader_forgets_the_readers_that_hold_nothing_and_are_gone(
        client: redis.Redis, outbox_of: Callable[..., ChangeOutbox]) -> None:
    outbox = outbox_of(lambda change, stop: True, forget_idle_seconds=0.3)
    client.xgroup_create(outbox.stream, outbox.group, id="0", mkstream=True)
    _write(outbox, 1, 2, 3)
    for name in ("gone", "holding"):
        client.xreadgroup(outbox.group, name, {outbox.stream: ">"}, count=1)
    _ack_all(client, outbox, "gone")
    time.sleep(0.4)
    client.xreadgroup(outbox.group, "live", {outbox.stream: ">"}, count=1)
    _ack_all(client, outbox, "live")
    outbox.run(_stopped_after_one_pass())
    readers = {reader["name"].decode() for reader in client.xinfo_consumers(outbox.stream, outbox.group)}
    assert readers == {"holding", "live", outbox.consumer}


def _ack_all(client: redis.Redis, outbox: ChangeOutbox, reader: str) -> None:
    held: Any = client.xpending_range(outbox.stream, outbox.group, "-", "+", 10, consumername=reader)
    client.xack(outbox.stream, outbox.group, *[entry["message_id"] for entry in held])


def _stopped_after_one_pass() -> threading.Event:
    """A stop event that reads as set from its second look on: `run` makes one pass."""
    class OnePass(threading.Event):
        looks = 0

        def is_set(self) -> bool:
            self.looks += 1
            return self.looks > 1

    return OnePass()
