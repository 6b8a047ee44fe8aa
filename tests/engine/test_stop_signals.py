"""SIGINT/SIGTERM are answered in a relay thread, never inside whatever the main thread was doing."""

from __future__ import annotations

import os
import signal
import threading
import time

from engine.stop_signals import StopSignals


def test_a_stop_signal_is_answered_while_the_main_thread_holds_a_lock_the_answer_needs() -> None:
    # A handler run in the main thread would wait here forever for the lock its own thread holds (as the
    # supervisor did when SIGTERM landed inside its `stop.wait()`, setting that same event).
    lock = threading.Lock()
    answered: list[tuple[signal.Signals, str]] = []
    done = threading.Event()

    def on_signal(received: signal.Signals) -> None:
        with lock:
            answered.append((received, threading.current_thread().name))
            done.set()

    signals = StopSignals(on_signal).install()
    try:
        with lock:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # Python's handler runs in this thread meanwhile, with the lock held
            assert answered == []
        assert done.wait(10)
    finally:
        signals.restore()
    assert answered == [(signal.SIGTERM, "lockgate-stop-signals")]


def test_each_signal_is_answered_and_restore_puts_back_what_was_there() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    wakeup_before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup_before)
    seen: list[signal.Signals] = []
    two = threading.Event()

    def on_signal(received: signal.Signals) -> None:
        seen.append(received)
        if len(seen) == 2:
            two.set()

    signals = StopSignals(on_signal).install()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)
        assert two.wait(10)
    finally:
        signals.restore()
    assert seen == [signal.SIGINT, signal.SIGTERM]
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert signal.set_wakeup_fd(wakeup_before) == wakeup_before  # the descriptor found is back
