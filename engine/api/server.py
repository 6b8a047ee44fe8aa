"""The engine's HTTP server: the ASGI application of `engine.api.app` on uvicorn, in a thread of its own.

`ApiServer(services, host, port).start()` binds (an `OSError` when the port is taken), serves, and returns once
the server accepts connections; `.url` says where, `.stop()` ends it. `ApiServer(services, listening=sock)` serves
on a socket bound and listening already (`engine.api.listener`), e.g. one several processes share. uvicorn runs
its fast parser (httptools, with this engine's limits: `engine.api.protocol`) and event loop (uvloop) where they
are installed.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import uvicorn
from fastapi import APIRouter

from engine.api.app import MAX_BODY_BYTES, build_app
from engine.api.listener import LISTEN_BACKLOG, listen_socket, socket_url
from engine.api.live_feed import LiveFeed
from engine.api.live_routes import live_feed_for, live_router
from engine.api.run_watch import RunWatch
from engine.api.start_lane import StartLane
from engine.facade import EngineApi

if TYPE_CHECKING:
    from engine.parts import RunningEngine

__all__ = ["MAX_BODY_BYTES", "ApiServer", "ServerLimits"]

log = logging.getLogger("lockgate.api")
START_TIMEOUT_SECONDS = 30.0
GRACE_SECONDS = 5
"""How long a stopping server lets requests in flight finish before it closes their connections."""


@dataclass(frozen=True)
class ServerLimits:
    backlog: int = LISTEN_BACKLOG
    """Connections the kernel queues before `accept`; a burst of hundreds must not be reset."""
    read_timeout: float = 30.0
    """Seconds a request may take to arrive whole (line, headers, body)."""
    keep_alive_timeout: int = 5
    """Seconds an idle keep-alive connection stays open."""
    max_url_bytes: int = 8192
    max_headers: int = 100
    max_header_bytes: int = 64 * 1024


def _protocol(limits: ServerLimits) -> type | str:
    try:
        from engine.api.protocol import LimitedHttpToolsProtocol, ProtocolLimits
    except ImportError:  # no httptools: h11, which bounds the request head but answers its refusals in plain text
        return "h11"
    return LimitedHttpToolsProtocol.with_limits(ProtocolLimits(
        max_url_bytes=limits.max_url_bytes, max_headers=limits.max_headers,
        max_header_bytes=limits.max_header_bytes, read_timeout=limits.read_timeout))


class ApiServer:
    """The HTTP API of started `EngineServices`; `start()` serves in a thread, `stop()` closes."""

    def __init__(self, services: RunningEngine, host: str = "127.0.0.1", port: int = 0, *,
                 limits: ServerLimits | None = None, routers: Sequence[APIRouter] = (),
                 listening: socket.socket | None = None) -> None:
        """Binds at once (the services may still be starting: clients wait in the backlog until `start()`); given
        `listening`, a socket bound and listening already, serves on that instead (`host` and `port` unused)."""
        self.services = services
        self.limits = limits or ServerLimits()
        self.routers = list(routers)
        self.socket = listening if listening is not None else listen_socket(host, port, self.limits.backlog)
        self.watch: RunWatch | None = None
        self.engine: EngineApi | None = None
        self.lane: StartLane | None = None
        self.feed: LiveFeed | None = None
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def _serve_app(self) -> uvicorn.Server:
        """The application on the started services: the API, webhooks, callbacks and the live routes."""
        handles = self.services.require_handles()
        self.watch = RunWatch(handles.client, self.services.keys.live_batches)
        self.engine = EngineApi(self.services, self.watch)
        feed = self.feed = live_feed_for(self.services)
        app = build_app(self.engine, [live_router(handles.sql, feed, cancel_requested=self.engine.cancel_requested),
                                      *self.routers], closers=[feed.aclose])
        self.lane = StartLane(app, self.engine, MAX_BODY_BYTES)
        config = uvicorn.Config(self.lane, http=_protocol(self.limits), ws="none", lifespan="on",
                                backlog=self.limits.backlog, timeout_keep_alive=self.limits.keep_alive_timeout,
                                h11_max_incomplete_event_size=self.limits.max_url_bytes + self.limits.max_header_bytes,
                                log_config=None, access_log=False, server_header=False,
                                timeout_graceful_shutdown=GRACE_SECONDS,
                                # Nothing reads a client's address, so no middleware rewrites it from X-Forwarded-*.
                                proxy_headers=False)
        return uvicorn.Server(config)

    @property
    def url(self) -> str:
        return socket_url(self.socket)

    def start(self) -> ApiServer:
        server = self.server = self._serve_app()
        assert self.watch is not None
        self.services.add_batch_listener(self.watch.on_batch)
        self.services.callback_links.serve_at(self.url)
        self.thread = threading.Thread(target=server.run, kwargs={"sockets": [self.socket]},
                                       name="lockgate-http", daemon=True)
        self.thread.start()
        ready = threading.Event()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not server.started and self.thread.is_alive() and time.monotonic() < deadline:
            ready.wait(0.01)
        if not server.started:
            self.stop()
            raise RuntimeError("the HTTP server did not start; see the log")
        return self

    def stop(self) -> None:
        """Answers every sync start still waiting with its run's status (`202`) and ends every live stream, then
        stops serving, giving other requests in flight `GRACE_SECONDS`."""
        if self.watch is not None:
            self.watch.release()
            self.services.remove_batch_listener(self.watch.on_batch)
        if self.feed is not None:
            self.feed.end_readers()
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(10)
        self.socket.close()
        if self.watch is not None:
            self.watch.close()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
