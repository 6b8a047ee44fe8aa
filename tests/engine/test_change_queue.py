"""`ChangeQueue`: what a batch listener put is handled in order on the part's thread, past a handler that raises;
a handler that meets an outage is called again for the same change."""

from __future__ import annotations

import logging
import socket
import threading

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from engine.runtime.change_queue import ChangeQueue
from engine.runtime.live_change import LiveChange
from tests.engine.conftest import wait_until


def _change(seq: int) -> LiveChange:
    return LiveChange("run-1", "f", 1, "running", seq, "step_started")


def test_changes_are_handled_in_order_and_a_failing_one_does_not_stop_the_rest(
        caplog: pytest.LogCaptureFixture) -> None:
    handled: list[int] = []

    def handle(change: LiveChange, _stop: threading.Event) -> None:
        if change.seq == 2:
            raise ValueError("no such approval")
        handled.append(change.seq)

    changes = ChangeQueue(handle, "test notice", logging.getLogger("tests.change_queue"))
    for seq in (1, 2, 3):
        changes.put(_change(seq))
    assert changes.unfinished == 3
    with caplog.at_level(logging.ERROR, logger="tests.change_queue"):
        thread = _run_until_handled(changes)
    assert handled == [1, 3]
    assert not thread.is_alive()
    assert "test notice for step_started of run run-1 failed; continuing" in caplog.text


def _run_until_handled(changes: ChangeQueue) -> threading.Thread:
    """Run `changes` on a thread until every change put is handled, then stop it; returns the (ended) thread."""
    stop = threading.Event()
    thread = threading.Thread(target=changes.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: changes.unfinished == 0, timeout=10, what="every change handled")
    finally:
        stop.set()
        thread.join(10)
    return thread


def _outages(failures: int, retries: int) -> tuple[list[int], ChangeQueue]:
    """Changes 1 and 2 handled; change 1's first `failures` attempts meet a real refused connection
    (redis.ConnectionError), with `retries` retries 10 ms apart. Returns the changes each attempt was for."""
    calls: list[int] = []
    closed = _refusing_redis()

    def handle(change: LiveChange, _stop: threading.Event) -> None:
        calls.append(change.seq)
        if change.seq == 1 and calls.count(1) <= failures:
            closed.ping()

    changes = ChangeQueue(handle, "test notice", logging.getLogger("tests.change_queue"),
                          retry_seconds=(0.01,) * retries)
    for seq in (1, 2):
        changes.put(_change(seq))
    _run_until_handled(changes)
    return calls, changes


def test_a_change_whose_handler_meets_an_outage_is_handled_again_before_the_next(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tests.change_queue"):
        calls, changes = _outages(failures=2, retries=4)
    assert calls == [1, 1, 1, 2]
    assert changes.dropped == 0
    assert caplog.text.count("Redis did not answer") == 2


def test_a_change_is_dropped_with_an_error_once_its_outage_retries_run_out(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tests.change_queue"):
        calls, changes = _outages(failures=100, retries=2)
    assert calls == [1, 1, 1, 2]
    assert changes.dropped == 1
    assert "test notice for step_started of run run-1 dropped: Redis did not answer in 3 attempts" in caplog.text


def test_stopping_ends_the_wait_before_a_retry() -> None:
    closed = _refusing_redis()
    calls: list[int] = []

    def handle(change: LiveChange, _stop: threading.Event) -> None:
        calls.append(change.seq)
        closed.ping()

    changes = ChangeQueue(handle, "test notice", logging.getLogger("tests.change_queue"), retry_seconds=(60.0,))
    changes.put(_change(1))
    stop = threading.Event()
    thread = threading.Thread(target=changes.run, args=(stop,), daemon=True)
    thread.start()
    wait_until(lambda: calls == [1], timeout=10, what="the first attempt")
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert changes.dropped == 1 and changes.unfinished == 0


def _refusing_redis() -> redis.Redis:
    """A client of a port nothing listens on, which gives up at the first refusal."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return redis.Redis(port=port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
