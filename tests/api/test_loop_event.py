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


async def _set_before_waiting() -> tuple[bool, bool, bool]:
    event = LoopEvent(asyncio.get_running_loop())
    event.set()
    await asyncio.sleep(0.01)  # the set arrives through the loop
    first = await event.wait(0.0)
    still = await event.wait(None)
    event.clear()
    return first, still, await event.wait(0.0)


def test_a_set_before_the_wait_is_kept_until_cleared() -> None:
    assert asyncio.run(_set_before_waiting()) == (True, True, False)


async def _cancelled_while_waiting() -> bool:
    event = LoopEvent(asyncio.get_running_loop())
    waiting = asyncio.ensure_future(event.wait(None))
    await asyncio.sleep(0.01)
    waiting.cancel()
    try:
        await waiting
    except asyncio.CancelledError:
        pass
    event.set()
    await asyncio.sleep(0.01)
    return await event.wait(1.0)


def test_a_wait_cancelled_leaves_the_event_usable() -> None:
    assert asyncio.run(_cancelled_while_waiting()) is True
