"""An event any thread sets and a coroutine on one event loop waits for: how the run watch's thread wakes a request
waiting on the loop without holding a thread of its own."""

from __future__ import annotations

import asyncio


class LoopEvent:
    """Made on `loop`'s thread; `set()` from any thread, `clear()` and `wait()` on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._event = asyncio.Event()

    def set(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._event.set)
        except RuntimeError:  # the loop has closed: nobody is waiting any more
            pass

    def clear(self) -> None:
        self._event.clear()

    async def wait(self, timeout: float | None) -> bool:
        """Whether the event was set within `timeout` seconds (None: until it is)."""
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            return False
        return True
