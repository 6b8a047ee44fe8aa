"""uvicorn's httptools protocol with the limits of an exposed server: a bounded request line and header block,
a read deadline per request, and a JSON error (`{"error": {"code", "message"}}`) for every refusal the parser
makes before the application sees a request (malformed request lines, conflicting or negative lengths).

A request must arrive whole (request line, headers and body) within `read_timeout` of its first byte (or of the
connection, for the first request); otherwise it gets `408` and the connection closes. Idle keep-alive
connections close after uvicorn's `timeout_keep_alive`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from engine.api.head_holding import HeadHolding


@dataclass(frozen=True)
class ProtocolLimits:
    max_url_bytes: int = 8192
    max_headers: int = 100
    max_header_bytes: int = 64 * 1024
    read_timeout: float = 30.0


class _Refused(Exception):
    """Raised inside a parser callback: the request breaks a limit (the parser stops there)."""


def error_answer(status: int, code: str, message: str, *, close: bool = True) -> bytes:
    body = orjson.dumps({"error": {"code": code, "message": message}})
    head = [STATUS_LINE[status], b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n"]
    if close:
        head.append(b"connection: close\r\n")
    return b"".join([*head, b"\r\n", body])


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    limits = ProtocolLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refusal: tuple[int, str, str] | None = None
        self._url_bytes = 0
        self._header_count = 0
        self._header_bytes = 0
        self._read_deadline: asyncio.TimerHandle | None = None
        self._reading = False
        self._head_done = False
        self._head_seen = 0
        self._after_answer: bytes | None = None
        """Bytes received while the current request's headers were incomplete (the parser buffers a header's
        value whole, so its size is bounded here)."""

    @classmethod
    def with_limits(cls, limits: ProtocolLimits) -> type[LimitedHttpToolsProtocol]:
        return type("LimitedHttpToolsProtocol", (cls,), {"limits": limits})

    # --- the read deadline ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = HeadHolding(transport, self.loop)  # type: ignore[assignment]
        self._start_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_reading()
        super().connection_lost(exc)

    def _start_reading(self) -> None:
        if not self._reading:
            self._reading = True
            self._read_deadline = self.loop.call_later(self.limits.read_timeout, self._read_timed_out)

    def _stop_reading(self) -> None:
        self._reading = False
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        answering = self.cycle is not None and not self.cycle.response_complete
        if answering and self.cycle.response_started:
            self.transport.close()
            return
        self._refuse_now(408, "read_timeout", f"the request did not arrive whole within "
                         f"{self.limits.read_timeout:g} s; send the request line, headers and body without pausing")

    # --- parsing ----------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        self._start_reading()
        if not self._head_done:
            self._head_seen += len(data)
        try:
            self.parser.feed_data(data)
            if not self._head_done and self._head_seen > self.limits.max_url_bytes + self.limits.max_header_bytes:
                self._refuse_now(*self._too_many_headers())
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError as exc:
            status, code, message = self._refusal or (
                400, "bad_request", f"not an HTTP/1.1 request this server can read ({exc}); send one request "
                "line, headers with one Content-Length or Transfer-Encoding: chunked, and the body")
            if self.cycle is not None and not self.cycle.response_complete and not self.cycle.more_body:
                # Bytes after a whole request that is still being answered: that answer goes first.
                self._after_answer = error_answer(status, code, message)
                self.flow.pause_reading()
                return
            self._refuse_now(status, code, message)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        refusal, self._after_answer = self._after_answer, None
        if refusal is not None and not self.transport.is_closing():
            self._unset_keepalive_if_required()
            self.transport.write(refusal)
            self.transport.close()

    def _refuse_now(self, status: int, code: str, message: str) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the application's answer, if any comes, has nowhere to go
        self.transport.write(error_answer(status, code, message))
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._refusal = None
        self._url_bytes = 0
        self._header_count = 0
        self._header_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._url_bytes += len(url)
        if self._url_bytes > self.limits.max_url_bytes:
            self._refusal = (414, "uri_too_long", f"the request target is longer than {self.limits.max_url_bytes} "
                             "bytes; send long values in the body")
            raise _Refused
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        self._header_bytes += len(name) + len(value) + 4
        if self._header_count > self.limits.max_headers or self._header_bytes > self.limits.max_header_bytes:
            self._refusal = self._too_many_headers()
            raise _Refused
        super().on_header(name, value)

    def _too_many_headers(self) -> tuple[int, str, str]:
        return (431, "headers_too_large", f"a request may have at most {self.limits.max_headers} headers and "
                f"{self.limits.max_header_bytes} bytes of them; send fewer")

    def on_headers_complete(self) -> None:
        self._head_done = True
        self._head_seen = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._stop_reading()
        self._head_done = False
        super().on_message_complete()
