"""The HTTP API's listening socket, bound apart from the server that serves on it.

`listen_socket(host, port)` binds and listens (an `OSError` when the port is taken); `adopt_socket(fd)` takes one
such socket inherited from the process that bound it. The supervisor of `lockgate worker --processes N --http`
binds once and hands the same socket to each of its http children, so they share one port and one backlog. This
module imports nothing heavy: the supervisor, which only waits, imports it.
"""

from __future__ import annotations

import socket

LISTEN_BACKLOG = 2048
"""Connections the kernel queues before `accept`; a burst of hundreds must not be reset."""


def listen_socket(host: str, port: int, backlog: int = LISTEN_BACKLOG) -> socket.socket:
    """A TCP socket bound to `host:port` and listening (`OSError` when it cannot be bound)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def adopt_socket(fd: int) -> socket.socket:
    """The listening TCP socket open as file descriptor `fd` (inherited); `OSError` when `fd` is no such socket."""
    sock = socket.socket(fileno=fd)
    try:
        if sock.type != socket.SOCK_STREAM or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise OSError(f"file descriptor {fd} is not a listening TCP socket")
        sock.getsockname()
    except OSError:
        sock.detach()
        raise
    return sock
