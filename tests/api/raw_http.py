"""Raw HTTP/1.1 over a socket, for requests no client library would send."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson

HANG_GUARD_SECONDS = 30.0


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def error_code(self) -> str:
        """The `error.code` of a JSON error answer (fails the test when the answer is not one)."""
        assert self.headers.get("content-type", "").startswith("application/json"), (self.status, self.headers,
                                                                                      self.body[:200])
        data = orjson.loads(self.body)
        assert set(data) == {"error"} and set(data["error"]) == {"code", "message"}, data
        return str(data["error"]["code"])

    def json(self) -> object:
        return orjson.loads(self.body)


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def connect(url: str) -> socket.socket:
    sock = socket.create_connection(address(url), timeout=HANG_GUARD_SECONDS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_answer(sock: socket.socket, *, head: bool = False) -> Answer:
    """One answer from `sock`: up to its Content-Length (none for HEAD), or to the end of the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"the server closed the connection before an answer ({data[:200]!r})")
        data += chunk
    raw_head, _, body = data.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if head:
        return Answer(status, headers, b"")
    if "content-length" in headers:
        length = int(headers["content-length"])
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return Answer(status, headers, body[:length])
    while chunk := sock.recv(65536):
        body += chunk
    return Answer(status, headers, body)


def exchange(url: str, raw: bytes, *, head: bool = False) -> Answer:
    """Send `raw` on a new connection and read one answer.

    A server may answer and close before it has read all of `raw` (a refused oversize body): the rest of the
    send then fails, and the answer it already sent is still read from the connection."""
    with connect(url) as sock:
        try:
            sock.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return read_answer(sock, head=head)


def closed_by_server(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (the hang guard fails a server that never
    does)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def request(method: str, path: str, *, headers: dict[str, str] | None = None, body: bytes = b"",
            length: bool = True) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if length and body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(body: bytes, size: int = 65536) -> bytes:
    parts = [f"{len(body[i:i + size]):x}\r\n".encode() + body[i:i + size] + b"\r\n" for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"
