"""`HeadHolding` over a real connection: an answer's head leaves with its body in one write, a head alone leaves
at the end of the event loop's turn, and closing sends what was held."""

from __future__ import annotations

import asyncio
import socket

from engine.api.head_holding import HeadHolding

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Counted(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport


async def _pair() -> tuple[HeadHolding, list[bytes], socket.socket]:
    """A transport over one end of a socket pair, each write it is given recorded, and the other end."""
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(Counted, ours)
    assert isinstance(transport, asyncio.Transport)
    written: list[bytes] = []
    write = transport.write

    def record(data: bytes | bytearray | memoryview) -> None:  # what leaves the wrapper, one entry per send
        written.append(bytes(data))
        write(data)

    transport.write = record  # type: ignore[method-assign]
    theirs.setblocking(False)
    return HeadHolding(transport, loop), written, theirs


async def _received(sock: socket.socket) -> bytes:
    await asyncio.sleep(0.05)
    try:
        return sock.recv(65536)
    except BlockingIOError:
        return b""


def test_a_head_and_its_body_leave_in_one_write() -> None:
    async def scenario() -> None:
        held, written, theirs = await _pair()
        held.write(HEAD)
        assert written == []
        held.write(b"{}")
        assert written == [HEAD + b"{}"]
        assert await _received(theirs) == HEAD + b"{}"
        held.write(b"more")  # not a head: out at once
        assert written[-1] == b"more"
        held.close()
        theirs.close()

    asyncio.run(scenario())


def test_a_head_alone_leaves_at_the_end_of_the_turn_and_closing_sends_what_is_held() -> None:
    async def scenario() -> None:
        held, written, theirs = await _pair()
        held.write(HEAD)
        await asyncio.sleep(0)
        assert written == [HEAD]
        assert await _received(theirs) == HEAD
        held.write(HEAD)
        held.close()
        assert written == [HEAD, HEAD]
        assert held.is_closing()
        theirs.close()

    asyncio.run(scenario())


def test_a_head_held_when_the_connection_goes_is_dropped_quietly() -> None:
    failures: list[dict[str, object]] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: failures.append(context))
        held, written, theirs = await _pair()
        held.write(HEAD)
        held.abort()  # the transport's own: the connection is gone before the turn ends
        await asyncio.sleep(0.01)
        assert written == []
        theirs.close()

    asyncio.run(scenario())
    assert failures == []
