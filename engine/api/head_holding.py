"""A connection's transport that sends a response's head together with the first part of its body.

uvicorn writes an answer's head and its body with two `write` calls, and each is a `send()` of its own (and, with
Nagle off, a packet of its own): on a busy http process, about 9% of its time went to the two. `HeadHolding` keeps
a head back until the next write and sends both at once; a head nothing follows within the same turn of the
event loop (a stream's, a `HEAD` answer's) goes out alone at the end of that turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

STATUS_LINE_START = b"HTTP/1.1 "
HEAD_END = b"\r\n\r\n"


class HeadHolding:
    """Wraps `transport`: `write` and `close` as described above; everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif data.startswith(STATUS_LINE_START) and data.endswith(HEAD_END):
            self._held = data
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():  # the client went away within the turn: nothing to send to
                self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
