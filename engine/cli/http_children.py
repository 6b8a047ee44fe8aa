"""`lockgate worker --http HOST:PORT --http-processes K` without `--processes`: the engine in this process, its HTTP
API in K http processes of its own, children of this one.

Between one process (every part under one GIL) and the supervised layout (an executor, a projector and the http
processes, each a Python process of its own under a supervisor): the HTTP side, which costs a sync start about as
much CPU as the engine does, gets a core of its own for one more process's memory. The children are started,
restarted and stopped as the supervisor does it (`engine.runtime.supervisor`), serve on sockets bound here (a
restarted child gets the same one), and die with this process.
"""

from __future__ import annotations

import socket
import time

from engine.api.listener import listen_sockets, socket_url
from engine.cli.supervisor_process import CHILD_COMMAND
from engine.config import EngineConfig
from engine.host import EngineServices
from engine.runtime.supervisor import Supervisor, child_env, http_layout

CHILD_POLL_SECONDS = 0.1
"""How often the engine's main thread looks for a child that died."""


class HttpChildren:
    """The http processes of one engine process, on the sockets `bind` bound."""

    def __init__(self, listeners: list[socket.socket]) -> None:
        self.listeners = listeners
        self.url = socket_url(listeners[0])
        self._supervisor: Supervisor | None = None

    @classmethod
    def bind(cls, address: tuple[str, int], count: int) -> HttpChildren:
        """`count` sockets on `address` (`OSError` when it is taken): bound before the engine starts, so clients
        connecting meanwhile wait in the backlog."""
        return cls(listen_sockets(*address, count=count))

    def start(self, services: EngineServices, config: EngineConfig) -> list[int]:
        """Start the children on the engine's Redis and store; returns their pids. The engine's own callback links
        name where they serve."""
        if services.redis is None:
            raise RuntimeError("HttpChildren.start needs the engine started (its Redis open)")
        services.callback_links.serve_at(self.url)
        env = child_env(services.redis.url, str(config.data_dir), config.key_prefix, self.url)
        specs = http_layout(CHILD_COMMAND, [sock.fileno() for sock in self.listeners])
        self._supervisor = Supervisor(specs, env).start()
        return list(self._supervisor.pids().values())

    def tick(self) -> int:
        """Restart the children that died (after their backoff); the exit code of one that refused to start (usage,
        schema), else 0."""
        if self._supervisor is None:
            return 0
        self._supervisor.tick(time.monotonic())
        return self._supervisor.refused or 0

    def stop(self) -> None:
        """SIGTERM the children, let them drain (at most `engine.runtime.supervisor.DRAIN_SECONDS`), close the
        sockets."""
        if self._supervisor is not None:
            self._supervisor.stop()
        for sock in self.listeners:
            sock.close()
