"""The engine thread runs coroutines off the GUI thread and hands results back on it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from app.bridge import EngineBridge
from app.engine_thread import EngineThread
from engine.config import EngineConfig


def test_results_come_back_on_the_gui_thread(qtbot) -> None:
    engine = EngineThread()
    engine.start()
    seen: dict[str, object] = {}

    async def work() -> str:
        seen["work_thread"] = threading.current_thread().name
        await asyncio.sleep(0.01)
        return "done"

    def done(result: object, error: BaseException | None) -> None:
        seen["result"], seen["error"] = result, error
        seen["callback_thread"] = threading.current_thread()

    engine.call(work(), done)
    qtbot.waitUntil(lambda: "result" in seen, timeout=20_000)
    assert seen["result"] == "done" and seen["error"] is None
    assert seen["work_thread"] == "lockgate-engine"
    assert seen["callback_thread"] is threading.main_thread()

    async def fail() -> None:
        raise ValueError("boom")

    engine.call(fail(), done)
    qtbot.waitUntil(lambda: isinstance(seen.get("error"), ValueError), timeout=20_000)

    stopped: list[bool] = []

    async def shutdown() -> None:
        stopped.append(True)

    engine.stop(shutdown())
    assert stopped == [True]
    assert not engine.running
    with pytest.raises(RuntimeError, match="not running"):
        engine.submit(work())


def test_bridge_reports_an_engine_that_cannot_start(qtbot, tmp_path) -> None:
    bridge = EngineBridge(EngineConfig(data_dir=tmp_path, redis_url="redis://127.0.0.1:1/0"))
    messages: list[str] = []
    bridge.log_message.connect(messages.append)
    bridge.start()
    qtbot.waitUntil(lambda: bridge.state in ("running", "failed"), timeout=30000)
    assert bridge.state == "failed"
    assert not bridge.available
    assert "did not start" in bridge.unavailable_reason
    assert any("Settings" in message for message in messages)
    failures: list[BaseException | None] = []
    bridge.list_runs(lambda _result, error: failures.append(error))
    assert isinstance(failures[0], RuntimeError)
    bridge.stop()
    assert not bridge.engine_thread.running
