"""Telemetry (fail-soft), the AIMD control loop, the cap key's TTL fallback and call slots, on a real Redis."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import redis

from engine.clock import ManualClock
from engine.concurrency.control import ControlLoop
from engine.concurrency.pool import Lease, PoolRefusal, ProviderPool
from engine.concurrency.settings import AimdSettings
from engine.concurrency.telemetry import (
    FAIL_SOFT_TIMEOUT_SECONDS,
    RedisTelemetrySink,
    fail_soft_client,
    read_telemetry,
)
from engine.providers.base import ChatRequest, RateLimited, RateLimitTelemetry
from engine.providers.config import ConnectionConfig, ProviderConfig, simulator_provider
from engine.providers.openai_compat import OpenAICompatAdapter
from engine.providers.simulator import ProviderSimulator
from engine.transport.keys import Keyspace

REQUEST = ChatRequest.from_prompt("sim-small", "Label this ticket as refund, bug or question: refund please")
DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


@pytest.fixture
def keys(key_prefix: str) -> Keyspace:
    return Keyspace(key_prefix)


def two_connection_provider(first: int = 2, second: int = 3) -> ProviderConfig:
    return ProviderConfig(name="local", connections=(
        ConnectionConfig(name="a", base_url="http://127.0.0.1:9/v1", capacity=first),
        ConnectionConfig(name="b", base_url="http://127.0.0.1:9/v1", capacity=second)))


# -- telemetry ------------------------------------------------------------------------------------


def test_response_telemetry_lands_in_redis(start_simulator: Callable[..., ProviderSimulator],
                                           client: redis.Redis, keys: Keyspace, clock: ManualClock) -> None:
    sim = start_simulator(requests_per_window=10, tokens_per_window=5000)
    sink = RedisTelemetrySink(client, keys, clock=clock)
    OpenAICompatAdapter(simulator_provider(sim.url), telemetry=sink).complete(REQUEST)
    stored = read_telemetry(client, keys, "local")
    assert stored["limit_requests"] == 10 and stored["remaining_requests"] == 9
    assert stored["limit_tokens"] == 5000 and stored["observed_at"] == clock.now()
    assert sink.recorded == 1 and sink.failures == 0


def test_telemetry_failure_never_fails_the_call(start_simulator: Callable[..., ProviderSimulator],
                                                keys: Keyspace, clock: ManualClock) -> None:
    sim = start_simulator(requests_per_window=1)
    dead = fail_soft_client(DEAD_REDIS)
    # What bounds the stall a dead Redis can add to a call: one try, each wait cut short (how long a call takes
    # with a dead or silent Redis: tests/bench/telemetry_fail_soft.py).
    settings = dead.connection_pool.connection_kwargs
    assert settings["socket_timeout"] == settings["socket_connect_timeout"] == FAIL_SOFT_TIMEOUT_SECONDS <= 0.5
    assert settings["retry_on_timeout"] is False and dead.get_retry() is None
    sink = RedisTelemetrySink(dead, keys, clock=clock)
    adapter = OpenAICompatAdapter(simulator_provider(sim.url), telemetry=sink)
    assert adapter.complete(REQUEST).text == "refund"
    with pytest.raises(RateLimited):  # the provider's error still comes through, not Redis's
        adapter.complete(REQUEST)
    assert sink.failures == 2 and sink.recorded == 0


def test_429_cuts_the_cap_at_once_and_blocks_the_provider(client: redis.Redis, keys: Keyspace,
                                                          clock: ManualClock) -> None:
    settings = AimdSettings(static_cap=8, ceiling=64, cut_cooldown_seconds=1.0)
    loop = ControlLoop(client, keys, [], settings=settings, clock=clock, db_pool_limit=16, host_limit=64)
    for _ in range(8):
        loop.tick()
    pool = ProviderPool(client, keys, two_connection_provider(), settings=settings, clock=clock)
    assert pool.current_cap() == (16, True)
    sink = RedisTelemetrySink(client, keys, settings, clock=clock)
    sink.record_rate_limited("local", "a", 2.5, RateLimitTelemetry())
    assert pool.current_cap() == (8, True)
    sink.record_rate_limited("local", "a", 2.5, RateLimitTelemetry())  # same burst: no second cut
    assert pool.current_cap() == (8, True)
    refusal = pool.acquire()
    assert isinstance(refusal, PoolRefusal) and refusal.reason == "rate_limited"
    assert refusal.retry_after_seconds == pytest.approx(2.5)
    assert read_telemetry(client, keys, "local")["rate_limited_total"] == 2
    clock.advance(2.5)
    assert isinstance(pool.acquire(), Lease)
    sink.record_rate_limited("local", "a", 1, RateLimitTelemetry())  # a new overload after the cooldown
    assert pool.current_cap() == (4, True)


# -- the control loop ------------------------------------------------------------------------------


def test_aimd_raises_slowly_to_the_target_and_holds(client: redis.Redis, keys: Keyspace, clock: ManualClock) -> None:
    provider = simulator_provider("http://127.0.0.1:9/v1", capacity=11)
    loop = ControlLoop(client, keys, [provider], settings=AimdSettings(static_cap=8), clock=clock,
                       db_pool_limit=20, host_limit=32)
    caps = [loop.tick().cap for _ in range(5)]
    assert caps == [9, 10, 11, 11, 11]
    assert loop.ticks[-1].limits.target == 11 and loop.ticks[-1].action == "hold"


def test_aimd_cuts_sharply_toward_a_lower_target(client: redis.Redis, keys: Keyspace, clock: ManualClock) -> None:
    settings = AimdSettings(static_cap=64, ceiling=64)
    loop = ControlLoop(client, keys, [], settings=settings, clock=clock, db_pool_limit=5, host_limit=64)
    ticks = [loop.tick() for _ in range(5)]
    assert [t.cap for t in ticks] == [32, 16, 8, 5, 5]
    assert ticks[0].action == "decrease" and ticks[0].limits.db_pool == 5


def test_target_is_the_minimum_of_the_four_limits(client: redis.Redis, keys: Keyspace, clock: ManualClock) -> None:
    provider = simulator_provider("http://127.0.0.1:9/v1", capacity=40)
    loop = ControlLoop(client, keys, [provider], settings=AimdSettings(ceiling=30), clock=clock,
                       db_pool_limit=25, host_limit=12)
    limits = loop.limits()
    assert (limits.provider, limits.db_pool, limits.host, limits.ceiling, limits.target) == (40, 25, 12, 30, 12)


def test_a_tick_after_a_429_does_not_raise(client: redis.Redis, keys: Keyspace, clock: ManualClock) -> None:
    settings = AimdSettings(static_cap=8)
    loop = ControlLoop(client, keys, [], settings=settings, clock=clock, db_pool_limit=50, host_limit=50)
    assert loop.tick().cap == 9
    clock.advance(1)
    RedisTelemetrySink(client, keys, settings, clock=clock).record_rate_limited("p", "c", 1, RateLimitTelemetry())
    clock.advance(1)
    tick = loop.tick()
    assert (tick.previous, tick.cap, tick.action) == (4, 4, "hold_after_429")
    clock.advance(1)
    assert loop.tick().cap == 5


def test_fresh_telemetry_lowers_the_provider_limit(client: redis.Redis, keys: Keyspace, clock: ManualClock) -> None:
    provider = simulator_provider("http://127.0.0.1:9/v1", capacity=10)
    loop = ControlLoop(client, keys, [provider], clock=clock, db_pool_limit=50, host_limit=50)
    sink = RedisTelemetrySink(client, keys, clock=clock)
    sink.record_response("local", "main", RateLimitTelemetry(remaining_requests=3, reset_requests_s=20))
    assert loop.limits().provider == 3
    clock.advance(21)  # the window reset: the old count no longer binds
    assert loop.limits().provider == 10
    sink.record_response("local", "main", RateLimitTelemetry(remaining_requests=2))
    clock.advance(31)  # stale telemetry is ignored
    assert loop.limits().provider == 10


def test_cap_key_expires_and_workers_fall_back_to_static(client: redis.Redis, keys: Keyspace,
                                                         clock: ManualClock) -> None:
    settings = AimdSettings(static_cap=3, cap_ttl_seconds=0.2)
    ControlLoop(client, keys, [], settings=settings, clock=clock, db_pool_limit=1, host_limit=50).tick()
    pool = ProviderPool(client, keys, two_connection_provider(5, 5), settings=settings, clock=clock)
    assert pool.current_cap() == (1, True)
    first = pool.try_acquire()
    assert first is not None and pool.try_acquire() is None
    time.sleep(0.3)  # real time: the key's TTL is Redis's, not the test clock's
    assert pool.current_cap() == (3, False)
    assert [pool.try_acquire() is not None for _ in range(3)] == [True, True, False]


def test_control_loop_thread_ticks_until_stopped(client: redis.Redis, keys: Keyspace) -> None:
    settings = AimdSettings(static_cap=2, tick_seconds=0.02)
    loop = ControlLoop(client, keys, [], settings=settings, db_pool_limit=6, host_limit=50)
    stop = threading.Event()
    thread = loop.start_thread(stop)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not loop.ticks or loop.ticks[-1].cap < 6):
        time.sleep(0.02)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive() and loop.ticks[-1].cap == 6


# -- slots and the pool -----------------------------------------------------------------------------


def test_slots_under_the_cap_are_exact_under_concurrency(client: redis.Redis, keys: Keyspace,
                                                         clock: ManualClock) -> None:
    settings = AimdSettings(static_cap=5)
    provider = two_connection_provider(10, 10)
    barrier = threading.Barrier(20)
    leases: list[Lease | PoolRefusal] = []

    def grab() -> None:
        pool = ProviderPool(redis.Redis(connection_pool=client.connection_pool), keys, provider,
                            settings=settings, clock=clock)
        barrier.wait()
        leases.append(pool.acquire())

    threads = [threading.Thread(target=grab) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    granted = [x for x in leases if isinstance(x, Lease)]
    assert len(granted) == 5
    assert {x.reason for x in leases if isinstance(x, PoolRefusal)} == {"cap_reached"}
    pool = ProviderPool(client, keys, provider, settings=settings, clock=clock)
    assert pool.in_flight() == 5 and pool.try_acquire() is None
    granted[0].release()
    granted[0].release()  # releasing twice frees one slot, once
    assert pool.try_acquire() is not None and pool.try_acquire() is None


def test_pool_fills_connections_by_capacity_then_reports_none(client: redis.Redis, keys: Keyspace,
                                                              clock: ManualClock) -> None:
    pool = ProviderPool(client, keys, two_connection_provider(2, 3), settings=AimdSettings(static_cap=50, ceiling=64),
                        clock=clock)
    leases = [pool.try_acquire() for _ in range(5)]
    assert [lease.connection for lease in leases if lease] == ["a", "a", "b", "b", "b"]
    refusal = pool.acquire()
    assert isinstance(refusal, PoolRefusal) and refusal.reason == "connections_full"
    with leases[0] as lease:  # type: ignore[union-attr]
        assert lease.connection == "a"
    again = pool.try_acquire()
    assert again is not None and again.connection == "a"


def test_a_crashed_workers_slot_lapses_after_the_lease_ttl(client: redis.Redis, keys: Keyspace,
                                                          clock: ManualClock) -> None:
    pool = ProviderPool(client, keys, two_connection_provider(1, 1), settings=AimdSettings(static_cap=1),
                        clock=clock, lease_ttl_seconds=10)
    assert pool.try_acquire() is not None and pool.try_acquire() is None
    clock.advance(10)
    assert pool.try_acquire() is not None


def test_rate_limited_provider_parks_calls_until_its_window_resets(
        start_simulator: Callable[..., ProviderSimulator], client: redis.Redis, keys: Keyspace,
        clock: ManualClock) -> None:
    clock.set(1_800_000_030.0)
    sim = start_simulator(requests_per_window=3, window_seconds=60)
    provider = simulator_provider(sim.url, capacity=4)
    sink = RedisTelemetrySink(client, keys, clock=clock)
    pool = ProviderPool(client, keys, provider, clock=clock)
    adapter = OpenAICompatAdapter(provider, telemetry=sink)
    answers = []
    for _ in range(3):
        lease = pool.try_acquire()
        assert lease is not None
        with lease:
            answers.append(adapter.complete(REQUEST).text)
    assert answers == ["refund"] * 3
    refusal = pool.acquire()  # the third answer said 0 requests remain: wait instead of collecting a 429
    assert isinstance(refusal, PoolRefusal) and refusal.reason == "rate_limited"
    assert refusal.retry_after_seconds == pytest.approx(30, abs=0.01)
    assert sim.counters.rate_limited == 0
    clock.advance(30)
    lease = pool.try_acquire()
    assert lease is not None
    with lease:
        assert adapter.complete(REQUEST).text == "refund"
