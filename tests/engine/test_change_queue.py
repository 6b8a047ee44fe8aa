"""`ChangeQueue`: what a batch listener put is handled in order on the part's thread, past a handler that raises."""

from __future__ import annotations

import logging
import threading

import pytest

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
    stop = threading.Event()
    thread = threading.Thread(target=changes.run, args=(stop,), daemon=True)
    with caplog.at_level(logging.ERROR, logger="tests.change_queue"):
        thread.start()
        try:
            wait_until(lambda: changes.unfinished == 0, timeout=10, what="every change handled")
        finally:
            stop.set()
            thread.join(10)
    assert handled == [1, 3]
    assert not thread.is_alive()
    assert "test notice for step_started of run run-1 failed; continuing" in caplog.text
