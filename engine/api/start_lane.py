"""`POST /api/v1/runs` answered straight from the server, ahead of the framework's middleware and routing.

Every sync start is this one request, and the framework's layers around it (its middleware, routing and request
objects) cost the busy http process about 7% of its CPU. The lane takes only a request the application would
answer with the start itself: no query, one `Authorization: Bearer` key, at most one content type, and a body
within the limit (declared and counted) that the route reads as a `StartRun` (`start_run_body`). Anything else
goes on to the application unchanged, with the bytes the lane had read given back first, so every refusal keeps
the application's answer. The start is the route's own (`start_answer`); its failures are answered as the
application's handlers answer them (`failure_answer`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi.exceptions import RequestValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.api.app import failure_answer, start_answer, start_run_body
from engine.facade import EngineApi
from engine.read_models import StartRun

PATH = "/api/v1/runs"
_LENGTH_DIGITS = 9
"""Digits of the longest declared length the lane reads itself (more: the application's, e.g. leading zeros)."""


def _presented(scope: Scope, max_body_bytes: int) -> tuple[str, str | None] | None:
    """The key and content type a start's head presents, or None when the application should read the head itself
    (a declared length over the limit included: the application refuses it unread)."""
    key: str | None = None
    content_type: str | None = None
    typed = False
    for name, value in scope["headers"]:
        if name == b"authorization":
            if key is not None:
                return None
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            key = credentials.strip()
            if scheme.lower() != "bearer" or not key:
                return None
        elif name == b"content-length":
            if not value.isdigit() or len(value) > _LENGTH_DIGITS or int(value) > max_body_bytes:
                return None
        elif name == b"content-type":
            if typed:
                return None
            typed, content_type = True, value.decode("latin-1")
    return None if key is None else (key, content_type)


class StartLane:
    """ASGI middleware in front of the whole application (`app`), serving `engine`."""

    def __init__(self, app: ASGIApp, engine: EngineApi, max_body_bytes: int) -> None:
        self.app = app
        self.engine = engine
        self.max_body_bytes = max_body_bytes
        self.taken = 0
        """Starts the lane answered."""
        self.passed_on = 0
        """Requests to its path it passed on to the application."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH:
            await self.app(scope, receive, send)
            return
        if scope["query_string"]:
            self.passed_on += 1
            await self.app(scope, receive, send)
            return
        presented = _presented(scope, self.max_body_bytes)
        if presented is None:
            self.passed_on += 1
            await self.app(scope, receive, send)
            return
        key, content_type = presented
        read = await self._read_body(receive)
        body = _start_run(read, content_type, self.max_body_bytes)
        if body is None:
            self.passed_on += 1
            await self.app(scope, _giving_back(read, receive), send)
            return
        self.taken += 1
        try:
            status, payload, headers = await start_answer(self.engine, key, body)
        except Exception as exc:
            status, payload, headers = failure_answer(exc, "POST", PATH)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode()), *headers]})
        await send({"type": "http.response.body", "body": payload})

    async def _read_body(self, receive: Receive) -> list[Message]:
        """The messages of the body, up to its end, the limit passed, or a message that is not body."""
        read: list[Message] = []
        size = 0
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                return read
            size += len(message.get("body", b""))
            if size > self.max_body_bytes or not message.get("more_body", False):
                return read


def _start_run(read: list[Message], content_type: str | None, max_body_bytes: int) -> StartRun | None:
    """The start a whole body within the limit asks for, read as the route reads it (`start_run_body`); None for
    anything the application should answer."""
    last = read[-1]
    if last["type"] != "http.request" or last.get("more_body", False):
        return None
    raw = b"".join(message.get("body", b"") for message in read)
    if len(raw) > max_body_bytes:
        return None
    try:
        return start_run_body(raw, content_type)
    except RequestValidationError:
        return None


def _giving_back(read: list[Message], receive: Receive) -> Callable[[], Awaitable[Message]]:
    """`receive` for the application: the messages the lane read, then the rest."""
    pending = list(read)

    async def give_back() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return give_back

