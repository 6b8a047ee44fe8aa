"""A background thread with its own asyncio loop, where the embedded engine lives.

The GUI thread never waits on it: work is submitted as coroutines and the
results come back as Qt queued calls on the GUI thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

T = TypeVar("T")
STOP_TIMEOUT_S = 10.0


class _Delivery(QObject):
    """Carries a result from the engine thread to a callback on the GUI thread."""

    delivered = Signal(object, object, object)  # callback, result, error

    def __init__(self) -> None:
        super().__init__()
        self.delivered.connect(self._call)

    @staticmethod
    def _call(callback: Callable[[Any, BaseException | None], None], result: Any, error: Any) -> None:
        callback(result, error)


class EngineThread:
    """Owns one daemon thread running an asyncio loop until `stop()`."""

    def __init__(self, name: str = "lockgate-engine") -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._delivery = _Delivery()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._ready.clear()
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(STOP_TIMEOUT_S):
            raise RuntimeError(f"engine thread {self.name!r} did not start its event loop within {STOP_TIMEOUT_S}s")

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self.loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coroutine` on the engine loop; the Future may be waited on only off the GUI thread."""
        if self.loop is None or not self.running:
            coroutine.close()
            raise RuntimeError(f"engine thread {self.name!r} is not running; start it before submitting work")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(
        self, coroutine: Coroutine[Any, Any, T], on_done: Callable[[T | None, BaseException | None], None]
    ) -> concurrent.futures.Future[T]:
        """Run `coroutine` on the engine loop and call `on_done(result, error)` on the GUI thread."""
        future = self.submit(coroutine)

        def finished(done: concurrent.futures.Future[T]) -> None:
            if done.cancelled():
                self._delivery.delivered.emit(on_done, None, asyncio.CancelledError())
                return
            error = done.exception()
            self._delivery.delivered.emit(on_done, None if error else done.result(), error)

        future.add_done_callback(finished)
        return future

    def stop(self, shutdown: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run `shutdown` (e.g. the engine's stop) on the loop, then end the loop and join the thread."""
        if not self.running or self.loop is None:
            if shutdown is not None:
                shutdown.close()
            return
        if shutdown is not None:
            try:
                asyncio.run_coroutine_threadsafe(shutdown, self.loop).result(STOP_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        assert self._thread is not None
        self._thread.join(STOP_TIMEOUT_S)
        self._thread = None
        self.loop = None
