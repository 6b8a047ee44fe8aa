"""Live runs over HTTP as Server-Sent Events (FastAPI router; the app includes it, see docs/api.md "Live runs"):

- `GET /api/v1/runs/{id}/events`: `event: snapshot` (the run as `GET /api/v1/runs/{id}` gives it, `id:` the last
  sequence it reflects), then one event per applied change (`id:` the run's stored sequence, `event:` the change's
  type, `data:` the change as the live channel publishes it), closed after the terminal change. With
  `Last-Event-ID: N` no snapshot: the changes after N from the store, then live, without gaps or repeats.
- `GET /api/v1/live[?flow_id=]`: every run's changes as `event: change`.

Both send a `: heartbeat` comment when nothing was sent for `heartbeat_seconds`, and end a reader that falls
`queue_size` changes behind with a last `event: overflow` (reconnect with `Last-Event-ID` to catch up). A
stopping server ends every stream at once, without a last event: its clients reconnect the same way.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import sqlalchemy as sa
from fastapi import APIRouter, Depends, Header, Path, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from engine.api.errors import ApiError, key_refused, missing_key, unknown
from engine.api.live_feed import CLOSING, OVERFLOW, RESYNC, LiveFeed, LiveReader, LiveUnavailable
from engine.approvals.keys import READ_SCOPE, check_key
from engine.publish import list_versions
from engine.read_models import Error
from engine.runtime.live_change import LiveChange
from engine.runtime.queries import RunAt, changes_after, get_run_at
from engine.runtime.transitions import TERMINAL

if TYPE_CHECKING:
    from engine.parts import RunningEngine

HEARTBEAT_SECONDS = 15.0
RUN_ID = re.compile(r"^[A-Za-z0-9_-]+$")
TERMINAL_CHANGES = frozenset({"run_succeeded", "run_failed", "run_cancelled", "run_interrupted"})
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
SSE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "a Server-Sent Events stream",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
    401: {"description": "no or bad API key", "model": Error},
    403: {"description": "a key without the read right", "model": Error},
    404: {"description": "unknown run, or a `flow_id` no published flow has", "model": Error},
    422: {"description": "a malformed run id, Last-Event-ID or filter", "model": Error},
}


@dataclass(frozen=True)
class LiveSettings:
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    """A `: heartbeat` comment after this long without sending anything."""
    backlog_page: int = 500
    """Changes read from the store per query while catching up."""


def live_feed_for(services: RunningEngine, *, queue_size: int | None = None) -> LiveFeed:
    """A feed of the started services' live channel (async Redis client made in the serving event loop)."""
    handle = services.redis
    assert handle is not None, "start the services before serving live runs"
    options = {} if queue_size is None else {"queue_size": queue_size}
    return LiveFeed(handle.async_client, services.keys.live, **options)


def api_error_response(_request: Request, exc: Exception) -> JSONResponse:
    """`{"error": {"code", "message"}}` for an `ApiError` (register with `app.add_exception_handler(ApiError, ...)`)."""
    assert isinstance(exc, ApiError)
    return JSONResponse(exc.body(), status_code=exc.status)


def _event(kind: str, data: Any, seq: int | None = None) -> bytes:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {kind}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"


HEARTBEAT = b": heartbeat\n\n"


def _overflow(seq: int | None) -> bytes:
    return _event("overflow", {"code": "overflow", "seq": seq, "message": (
        "this stream was read too slowly and is closed; reconnect (with Last-Event-ID for a run's events) to go on "
        "from the last change received")})


def key_checker(sql: sa.Engine) -> Callable[..., str]:
    """A FastAPI dependency: the request's `Authorization: Bearer` key, refused as the rest of the API refuses it."""

    def api_key(authorization: Annotated[str | None, Header()] = None) -> str:
        scheme, _, key = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise missing_key(authorization)
        check = check_key(sql, key.strip(), READ_SCOPE)
        if check.refusal is not None:
            raise key_refused(check.refusal, check.message)
        return key.strip()

    return api_key


class _RunStream:
    """One client's events of one run: store and channel joined by sequence, each change sent once, in order."""

    def __init__(self, sql: sa.Engine, reader: LiveReader, feed: LiveFeed, settings: LiveSettings, run_id: str,
                 start: RunAt, after: int | None) -> None:
        self.sql = sql
        self.reader = reader
        self.feed = feed
        self.settings = settings
        self.run_id = run_id
        self.start = start
        self.resume = after
        self.last = start.seq if after is None else after
        self.ended = False

    async def _catch_up(self) -> list[bytes]:
        """The stored changes after the last one sent (the channel may have lost them, or they predate it)."""
        chunks: list[bytes] = []
        while not self.ended:
            page = await run_in_threadpool(changes_after, self.sql, self.run_id, self.last,
                                           limit=self.settings.backlog_page)
            for change in page:
                chunks.append(self._send(change))
                if self.ended:
                    break
            if len(page) < self.settings.backlog_page:
                break
        return chunks

    def _send(self, change: LiveChange) -> bytes:
        self.last = change.seq
        self.ended = change.event in TERMINAL_CHANGES
        return _event(change.event, change.to_data(), change.seq)

    async def events(self) -> AsyncIterator[bytes]:
        try:
            if self.resume is None:
                yield _event("snapshot", self.start.run, self.start.seq)
                if self.start.run["status"] in TERMINAL:
                    return
            else:
                for chunk in await self._catch_up():
                    yield chunk
                if self.ended or self.start.run["status"] in TERMINAL:
                    return
            while not self.ended:
                item = await self.reader.next(self.settings.heartbeat_seconds)
                if item is None:
                    yield HEARTBEAT
                    for chunk in await self._catch_up():  # cheap insurance against a change the channel dropped
                        yield chunk
                elif item is OVERFLOW:
                    yield _overflow(self.last)
                    return
                elif item is CLOSING:
                    return
                elif item is RESYNC:
                    for chunk in await self._catch_up():
                        yield chunk
                elif isinstance(item, LiveChange) and item.seq > self.last:
                    if item.seq > self.last + 1:  # published after changes this stream has not seen: fetch them
                        for chunk in await self._catch_up():
                            yield chunk
                    if item.seq > self.last and not self.ended:
                        yield self._send(item)
        finally:
            self.feed.close_reader(self.reader)


async def _every_run(reader: LiveReader, feed: LiveFeed, settings: LiveSettings) -> AsyncIterator[bytes]:
    try:
        while True:
            item = await reader.next(settings.heartbeat_seconds)
            if item is None:
                yield HEARTBEAT
            elif item is OVERFLOW:
                yield _overflow(None)
                return
            elif item is CLOSING:
                return
            elif isinstance(item, LiveChange):
                yield _event("change", item.to_data())
    finally:
        feed.close_reader(reader)


def _last_event_id(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        seq = int(value.strip())
    except ValueError:
        raise ApiError(422, "bad_request", f"Last-Event-ID must be the id of an event of this stream, a sequence "
                       f"number (got {value!r})") from None
    if seq < 0:
        raise ApiError(422, "bad_request", "Last-Event-ID must be zero or more")
    return seq


async def _open(feed: LiveFeed, **which: str | None) -> LiveReader:
    try:
        return await feed.open_reader(**which)
    except LiveUnavailable as exc:
        raise ApiError(503, "live_unavailable", str(exc)) from None


def live_router(sql: sa.Engine, feed: LiveFeed, settings: LiveSettings | None = None,
                cancel_requested: Callable[[str, str], bool] = lambda _run_id, _status: False) -> APIRouter:
    """The SSE routes over `sql` (snapshots, catching up) and `feed` (the live channel); `cancel_requested(run_id,
    status)` fills a snapshot's `cancel_requested` (`EngineApi.cancel_requested`)."""
    settings = settings or LiveSettings()
    router = APIRouter(dependencies=[Depends(key_checker(sql))])

    @router.get("/api/v1/runs/{run_id}/events", response_class=StreamingResponse, responses=SSE_RESPONSES,
                summary="A run's changes as Server-Sent Events")
    async def run_events(run_id: Annotated[str, Path(pattern=RUN_ID.pattern, max_length=64)],
                         last_event_id: Annotated[str, Header(pattern=r"^[0-9]{1,18}$")] = "",
                         ) -> StreamingResponse:
        if RUN_ID.match(run_id) is None:
            raise unknown("unknown_run", "run", run_id)
        after = _last_event_id(last_event_id or None)
        reader = await _open(feed, run_id=run_id)  # subscribed before the store is read: nothing falls between
        try:
            start = await run_in_threadpool(get_run_at, sql, run_id)
        except BaseException:
            feed.close_reader(reader)
            raise
        if start is None:
            feed.close_reader(reader)
            raise unknown("unknown_run", "run", run_id)
        # The snapshot is the run as GET gives it, the flag a cancel waiting for the run's worker sets included.
        start.run["cancel_requested"] = await run_in_threadpool(cancel_requested, run_id, str(start.run["status"]))
        stream = _RunStream(sql, reader, feed, settings, run_id, start, after)
        return StreamingResponse(stream.events(), media_type="text/event-stream", headers=SSE_HEADERS,
                                 background=BackgroundTask(feed.close_reader, reader))

    @router.get("/api/v1/live", response_class=StreamingResponse, responses=SSE_RESPONSES,
                summary="Every run's live changes as Server-Sent Events")
    async def live(flow_id: str | None = None) -> StreamingResponse:
        if flow_id and not await run_in_threadpool(list_versions, sql, flow_id):  # as GET /api/v1/runs?flow_id=
            raise unknown("unknown_flow", "flow", flow_id)
        reader = await _open(feed, flow_id=flow_id or None)
        return StreamingResponse(_every_run(reader, feed, settings), media_type="text/event-stream",
                                 headers=SSE_HEADERS, background=BackgroundTask(feed.close_reader, reader))

    return router
