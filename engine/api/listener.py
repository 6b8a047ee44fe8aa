"""The HTTP API's listening socket, bound apart from the server that serves on it.

`listen_socket(host, port)` binds and listens (an `OSError` when the port is taken); `adopt_socket(fd)` takes one
such socket inherited from the process that bound it. The supervisor of `lockgate worker --processes N --http
--http-processes K` binds K sockets on one port (`listen_sockets`), one per http child, and keeps them open while
children restart. The kernel spreads new connections over them (SO_REUSEPORT); on one shared socket a single
child would accept a whole burst of keep-alive connections and its siblings would idle. This module imports
nothing heavy: the supervisor, which only waits, imports it.
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


def listen_sockets(host: str, port: int, count: int, backlog: int = LISTEN_BACKLOG) -> list[socket.socket]:
    """`count` sockets listening on `host:port`, each with its own backlog, the kernel spreading new connections
    over them (SO_REUSEPORT); one socket `count` times where the platform lacks that. `OSError` when the port is
    taken, also by a process that would share it: it is bound without SO_REUSEPORT first, so a second Lockgate on
    the same port fails instead of quietly taking half its connections."""
    probe = listen_socket(host, port, backlog)
    if count == 1 or not hasattr(socket, "SO_REUSEPORT"):
        return [probe] * count
    bound = probe.getsockname()[:2]
    probe.close()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(bound)
            sock.listen(backlog)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def socket_url(sock: socket.socket) -> str:
    """The http:// URL a listening socket serves on (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
