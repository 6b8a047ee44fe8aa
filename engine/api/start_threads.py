"""A few threads of their own that sync starts hand their blocking calls to (key check and start, each read of
the run) from the event loop.

anyio's `to_thread.run_sync` costs the event loop's thread about 70 µs of CPU a call here (its cancel scope, its
limiter and its worker's queue, each asking anyio which task and loop it is on); the standard library's
`run_in_executor` about 25-35. A call handed over here costs about 6-11: it goes on a C queue (`SimpleQueue`) that
the threads wait on, and its answer comes back to the caller's loop with `call_soon_threadsafe`. A sync start
makes two such calls or more, so this is about a tenth of an http process's CPU a start.

A call runs to its end once handed over, whatever its caller does meanwhile: a caller cancelled while waiting
for it gets the `CancelledError`, and the call's result goes to nobody (give `abandoned` to tidy it).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class _Call(NamedTuple):
    call: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    answer: asyncio.Future[Any]


class StartThreads:
    """`count` threads, started on the first call; `close()` lets them end once the calls handed over are done."""

    def __init__(self, count: int, name: str = "lockgate-start") -> None:
        if count < 1:
            raise ValueError(f"StartThreads needs at least one thread (got {count})")
        self.count = count
        self.name = name
        self._calls: SimpleQueue[_Call | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, call: Callable[[], T], *, abandoned: Callable[[T], None] | None = None) -> T:
        """`call()` on one of the threads; the caller's task waits on its loop meanwhile. `abandoned`: given the
        result of a call whose caller was cancelled while it ran."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()
        self._hand_over(_Call(call, loop, answer))
        try:
            return await asyncio.shield(answer)
        except asyncio.CancelledError:
            if abandoned is not None:
                answer.add_done_callback(lambda done: _tidy(done, abandoned))
            raise

    def close(self) -> None:
        """No more calls; each thread ends after the calls already handed over."""
        with self._lock:
            self._closed = True
            for _ in self._threads:
                self._calls.put(None)
            self._threads = []

    def _hand_over(self, call: _Call) -> None:
        if not self._threads or self._closed:
            with self._lock:
                if self._closed:
                    raise RuntimeError("StartThreads is closed")
                while len(self._threads) < self.count:
                    thread = threading.Thread(target=self._serve, name=f"{self.name}-{len(self._threads)}",
                                              daemon=True)
                    thread.start()
                    self._threads.append(thread)
        self._calls.put(call)

    def _serve(self) -> None:
        while (handed := self._calls.get()) is not None:
            try:
                result = handed.call()
            except BaseException as exc:  # the caller gets it, whatever it is
                _answer(handed, _fail, exc)
            else:
                _answer(handed, _succeed, result)


def _answer(handed: _Call, settle: Callable[[asyncio.Future[Any], Any], None], value: Any) -> None:
    try:
        handed.loop.call_soon_threadsafe(settle, handed.answer, value)
    except RuntimeError:  # the loop has closed: nobody is waiting any more
        pass


def _succeed(answer: asyncio.Future[Any], result: Any) -> None:
    if not answer.done():
        answer.set_result(result)


def _fail(answer: asyncio.Future[Any], exc: BaseException) -> None:
    if not answer.done():
        answer.set_exception(exc)


def _tidy(done: asyncio.Future[T], abandoned: Callable[[T], None]) -> None:
    if not done.cancelled() and done.exception() is None:
        abandoned(done.result())
