"""Redis clients with timeouts fit for blocking stream reads, and the engine's Redis handle.

Replies are bytes (``decode_responses=False``): stream payloads go straight to orjson, which reads
bytes, and hiredis parses bytes fastest. Decode names where you need text (`.decode()`).

``socket_timeout=None``: redis-py 8 defaults to 5 s with retries, which breaks a blocking
``XREADGROUP BLOCK`` longer than 5 s; a blocking read must bound its own wait with BLOCK/timeout.
A dead server is still noticed: the connect timeout bounds connecting, TCP keepalive and the
health check catch a half-open connection.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio

from engine.config import EngineConfig

CONNECT_TIMEOUT_SECONDS = 5.0
HEALTH_CHECK_INTERVAL_SECONDS = 30


def _client_options() -> dict[str, Any]:
    return {
        "socket_timeout": None,
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_keepalive": True,
        "health_check_interval": HEALTH_CHECK_INTERVAL_SECONDS,
        "decode_responses": False,
    }


def redis_client(url: str, **overrides: Any) -> redis.Redis:
    """A client for `url` (redis://, rediss:// or unix://) with the engine's timeouts; bytes replies."""
    options = _client_options()
    if url.startswith("unix://"):
        options.pop("socket_keepalive")  # unix sockets have no TCP keepalive
    options.update(overrides)
    return redis.Redis.from_url(url, **options)


def async_redis_client(url: str, **overrides: Any) -> redis.asyncio.Redis:
    """The asyncio twin of `redis_client`."""
    options = _client_options()
    if url.startswith("unix://"):
        options.pop("socket_keepalive")
    options.update(overrides)
    return redis.asyncio.Redis.from_url(url, **options)


@dataclass
class RedisHandle:
    """The Redis the engine uses: a configured URL, or the embedded server of the data folder.

    `close()` releases clients and stops the embedded server if this handle started it. An embedded
    server reused from another process is restarted here if that process exits (`keep_running`).
    """

    url: str
    _server: Any = None  # EmbeddedRedis when this handle started or reused one
    _clients: list[redis.Redis] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def client(self, **overrides: Any) -> redis.Redis:
        """A new client (own connection pool) for this Redis."""
        client = redis_client(self.url, **overrides)
        with self._lock:
            self._clients.append(client)
        return client

    def async_client(self, **overrides: Any) -> redis.asyncio.Redis:
        """A new asyncio client; the caller closes it (`await client.aclose()`) on its own loop."""
        return async_redis_client(self.url, **overrides)

    @property
    def embedded(self) -> bool:
        """True when this handle runs on the data folder's embedded server."""
        return self._server is not None

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()
        if self._server is not None:
            self._server.stop()
            self._server = None


def open_redis(config: EngineConfig) -> RedisHandle:
    """`config.redis_url` if set, else the embedded server of `config.data_dir` (started or reused)."""
    if config.redis_url:
        return RedisHandle(url=config.redis_url)
    from engine.transport.embedded import EmbeddedRedis

    server = EmbeddedRedis(config.data_dir)
    server.start()
    server.keep_running()
    return RedisHandle(url=server.url, _server=server)
