"""`LoopEvent`: set from another thread, it wakes a coroutine waiting on its loop; after the loop has closed, setting
it is harmless (the run watch's thread may wake a request that has gone)."""

from __future__ import annotations

import asyncio
import threading
import time

from engine.api.loop_event import LoopEvent


async def _woken_from_a_thread() -> tuple[bool, float, bool]:
    event = LoopEvent(asyncio.get_running_loop())
    threading.Timer(0.05, event.set).start()
    asked = time.monotonic()
    woken = await event.wait(5.0)
    took = time.monotonic() - asked
    event.clear()
    return woken, took, await event.wait(0.05)


def test_a_thread_wakes_a_waiting_coroutine_and_a_timeout_says_not_woken() -> None:
    woken, took, again = asyncio.run(_woken_from_a_thread())
    assert woken and took < 2.0
    assert again is False


def test_setting_after_the_loop_closed_is_harmless() -> None:
    loop = asyncio.new_event_loop()
    event = loop.run_until_complete(_made())
    loop.close()
    event.set()


async def _made() -> LoopEvent:
    return LoopEvent(asyncio.get_running_loop())
