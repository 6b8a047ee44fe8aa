"""The threads sync starts hand their blocking calls to: answers, errors, cancelled callers, closing."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engine.api.start_threads import StartThreads


def test_a_call_runs_on_one_of_the_threads_and_answers_its_caller() -> None:
    threads = StartThreads(2, name="probe")

    async def main() -> list[tuple[int, str]]:
        def call(n: int) -> tuple[int, str]:
            return n * n, threading.current_thread().name

        return await asyncio.gather(*(threads.run(lambda n=n: call(n)) for n in range(20)))

    try:
        answers = asyncio.run(main())
    finally:
        threads.close()
    assert [square for square, _ in answers] == [n * n for n in range(20)]
    assert {name for _, name in answers} <= {"probe-0", "probe-1"}


def test_a_call_that_raises_raises_in_its_caller() -> None:
    threads = StartThreads(1)

    def refuse() -> None:
        raise LookupError("no such run")

    async def main() -> None:
        await threads.run(refuse)

    try:
        with pytest.raises(LookupError, match="no such run"):
            asyncio.run(main())
    finally:
        threads.close()


def test_calls_beyond_the_thread_count_wait_for_a_thread() -> None:
    threads = StartThreads(2)
    running = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()

    def hold() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(5)
        with lock:
            running -= 1

    async def main() -> None:
        calls = [asyncio.ensure_future(threads.run(hold)) for _ in range(6)]
        await asyncio.sleep(0.2)
        release.set()
        await asyncio.gather(*calls)

    try:
        asyncio.run(main())
    finally:
        threads.close()
    assert most == 2


def test_a_cancelled_caller_leaves_its_call_to_end_and_its_result_to_abandoned() -> None:
    threads = StartThreads(1)
    started = threading.Event()
    release = threading.Event()
    abandoned: list[str] = []

    def slow() -> str:
        started.set()
        release.wait(5)
        return "the started run's watch"

    async def main() -> None:
        call = asyncio.ensure_future(threads.run(slow, abandoned=abandoned.append))
        await asyncio.to_thread(started.wait, 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        for _ in range(100):
            if abandoned:
                return
            await asyncio.sleep(0.01)

    try:
        asyncio.run(main())
    finally:
        threads.close()
    assert abandoned == ["the started run's watch"]


def test_a_call_ending_after_its_loop_closed_is_dropped_and_the_thread_goes_on() -> None:
    threads = StartThreads(1)
    release = threading.Event()

    async def leave_a_call_behind() -> None:
        left = asyncio.ensure_future(threads.run(lambda: release.wait(5)))
        await asyncio.sleep(0.05)
        assert not left.done()

    async def next_call() -> str:
        return await threads.run(lambda: "still serving")

    try:
        asyncio.run(leave_a_call_behind())
        release.set()
        assert asyncio.run(next_call()) == "still serving"
    finally:
        threads.close()


def test_a_closed_set_of_threads_refuses_calls_and_its_threads_end() -> None:
    threads = StartThreads(2, name="closing")

    async def call() -> int:
        return await threads.run(lambda: 1)

    assert asyncio.run(call()) == 1
    threads.close()
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(call())
    for thread in [t for t in threading.enumerate() if t.name.startswith("closing-")]:
        thread.join(5)
        assert not thread.is_alive()
