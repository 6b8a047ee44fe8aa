"""Rate-limit telemetry into Redis, fail-soft: a Redis problem is logged and counted, never raised to the call."""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis

from engine.clock import Clock, SystemClock
from engine.concurrency.cap import CapKey
from engine.concurrency.settings import AimdSettings
from engine.providers.base import RateLimitTelemetry
from engine.transport.keys import Keyspace

log = logging.getLogger(__name__)

TELEMETRY_TTL_SECONDS = 3600
FAIL_SOFT_TIMEOUT_SECONDS = 0.5


def fail_soft_client(url: str) -> redis.Redis:
    """A client that gives up fast, so telemetry never holds a model call up for long."""
    return redis.Redis.from_url(url, socket_timeout=FAIL_SOFT_TIMEOUT_SECONDS,
                                socket_connect_timeout=FAIL_SOFT_TIMEOUT_SECONDS, retry_on_timeout=False)


class RedisTelemetrySink:
    """Implements `engine.providers.base.TelemetrySink`: per-provider hash, 429 count, block and cap cut."""

    def __init__(self, client: redis.Redis, keys: Keyspace, settings: AimdSettings | None = None,
                 clock: Clock | None = None) -> None:
        self._redis = client
        self._keys = keys
        self._clock: Clock = clock or SystemClock()
        self._cap = CapKey(client, keys, settings or AimdSettings())
        self._lock = threading.Lock()
        self.failures = 0
        self.recorded = 0

    def record_response(self, provider: str, connection: str, telemetry: RateLimitTelemetry) -> None:
        self._safely(self._write_response, provider, connection, telemetry)

    def record_rate_limited(self, provider: str, connection: str, retry_after: float,
                            telemetry: RateLimitTelemetry) -> None:
        self._safely(self._write_rate_limited, provider, connection, retry_after, telemetry)

    def _safely(self, write: Any, *args: Any) -> None:
        try:
            write(*args)
        except Exception as exc:  # fail-soft by contract: telemetry must never fail a model call
            with self._lock:
                self.failures += 1
                first = self.failures == 1
            if first:
                log.warning("provider telemetry not recorded (%s); model calls go on without it", exc)
            return
        with self._lock:
            self.recorded += 1

    def _write_response(self, provider: str, connection: str, telemetry: RateLimitTelemetry) -> None:
        now = self._clock.now()
        fields: dict[Any, Any] = {"observed_at": repr(now), "connection": connection}
        for name, value in vars(telemetry).items():
            if value is not None:
                fields[name] = value
        key = self._keys.provider_telemetry(provider)
        pipe = self._redis.pipeline(transaction=False)
        pipe.hset(key, mapping=fields)
        pipe.expire(key, TELEMETRY_TTL_SECONDS)
        if telemetry.remaining_requests == 0 and telemetry.reset_requests_s:
            # The window is used up: hold calls back until it resets instead of collecting 429s.
            self._block(pipe, provider, now, telemetry.reset_requests_s)
        pipe.execute()

    def _write_rate_limited(self, provider: str, connection: str, retry_after: float,
                            telemetry: RateLimitTelemetry) -> None:
        now = self._clock.now()
        key = self._keys.provider_telemetry(provider)
        pipe = self._redis.pipeline(transaction=False)
        pipe.hincrby(key, "rate_limited_total", 1)
        pipe.hset(key, mapping={"last_429_at": repr(now), "connection": connection})
        pipe.expire(key, TELEMETRY_TTL_SECONDS)
        self._block(pipe, provider, now, retry_after)
        pipe.execute()
        self._cap.cut_for_429(now)

    def _block(self, pipe: Any, provider: str, now: float, seconds: float) -> None:
        millis = max(1, int(seconds * 1000))
        pipe.set(self._keys.provider_blocked_until(provider), repr(now + seconds), px=millis)


def read_telemetry(client: redis.Redis, keys: Keyspace, provider: str) -> dict[str, float]:
    """The provider's latest telemetry hash as numbers (missing fields absent)."""
    raw = client.hgetall(keys.provider_telemetry(provider))
    values: dict[str, float] = {}
    for name, value in raw.items():
        text = name.decode() if isinstance(name, bytes) else str(name)
        try:
            values[text] = float(value)
        except ValueError:
            continue
    return values
