"""Test side of the SSE routes: the engine's application with a live router on test settings, served by uvicorn
on 127.0.0.1 (a free port, its own thread), and a reader of `text/event-stream` answers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import uvicorn

from engine.api.app import build_app
from engine.api.live_feed import LiveFeed
from engine.api.live_routes import LiveSettings, live_feed_for, live_router
from engine.facade import EngineApi
from engine.host import EngineServices


@dataclass
class SseEvent:
    kind: str
    data: Any = None
    id: int | None = None


@dataclass
class SseServer:
    url: str
    feed: LiveFeed
    server: uvicorn.Server
    thread: threading.Thread


@contextlib.contextmanager
def serve_live(services: EngineServices, settings: LiveSettings | None = None,
               queue_size: int | None = None) -> Iterator[SseServer]:
    assert services.sql is not None
    feed = live_feed_for(services, queue_size=queue_size)

    # The engine's own application (error shapes, body limit), with live routes on the test's settings.
    app = build_app(EngineApi(services), [live_router(services.sql, feed, settings)], closers=[feed.aclose])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield SseServer(f"http://127.0.0.1:{port}", feed, server, thread)
    finally:
        server.should_exit = True
        thread.join(20)


def parse_block(block: str) -> SseEvent | None:
    """One event block (lines up to a blank line); None for a comment-only block."""
    kind, data, seq = "message", None, None
    comment = None
    for line in block.split("\n"):
        if line.startswith(":"):
            comment = line[1:].strip()
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            kind = value
        elif name == "data":
            data = orjson.loads(value)
        elif name == "id":
            seq = int(value)
    if data is None and seq is None and kind == "message":
        return SseEvent("comment", comment)
    return SseEvent(kind, data, seq)


async def read_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """The events of a streamed answer until the server closes it (comments come as kind `comment`)."""
    buffer = ""
    async for text in response.aiter_text():
        buffer += text
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            event = parse_block(block)
            if event is not None:
                yield event


async def collect(client: httpx.AsyncClient, path: str, headers: dict[str, str], *, until_close: bool = True,
                  opened: asyncio.Event | None = None, keep_comments: bool = False,
                  params: dict[str, str] | None = None) -> list[SseEvent]:
    """Every event of one stream, read until the server closes it; `opened` is set once the answer's headers came
    (the server has subscribed to the live channel by then)."""
    events: list[SseEvent] = []
    async with client.stream("GET", path, headers=headers, params=params) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        if opened is not None:
            opened.set()
        async for event in read_events(response):
            if event.kind != "comment" or keep_comments:
                events.append(event)
    return events
