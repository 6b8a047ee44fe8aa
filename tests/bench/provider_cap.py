"""Benchmark: 500 model calls against the simulator limited to 20 requests/s, through the adapter and
call slots under the AIMD cap. Prints JSON: achieved calls/s, 429s received, how fast the cap converged.

    .venv/bin/python tests/bench/provider_cap.py [--calls 500] [--rps 20] [--workers 32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import uuid

import redis

from engine.concurrency.control import ControlLoop
from engine.concurrency.pool import Lease, ProviderPool
from engine.concurrency.settings import AimdSettings
from engine.concurrency.telemetry import RedisTelemetrySink
from engine.providers.base import ChatRequest, RateLimited
from engine.providers.config import simulator_provider
from engine.providers.openai_compat import OpenAICompatAdapter
from engine.providers.simulator import ProviderSimulator, SimulatorSettings
from engine.transport.keys import Keyspace

REDIS_URL = os.environ.get("LOCKGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def run(calls: int, rps: int, workers: int, latency_ms: float) -> dict[str, object]:
    client = redis.Redis.from_url(REDIS_URL)
    keys = Keyspace(f"lgbench-{uuid.uuid4().hex[:8]}")
    settings = AimdSettings(static_cap=4, ceiling=64, tick_seconds=0.25, cap_ttl_seconds=5, cut_cooldown_seconds=0.5)
    sim = ProviderSimulator(settings=SimulatorSettings(requests_per_window=rps, window_seconds=1.0,
                                                       latency_ms=latency_ms)).start()
    provider = simulator_provider(sim.url, capacity=32)
    loop = ControlLoop(client, keys, [provider], settings=settings, db_pool_limit=20)
    stop = threading.Event()
    loop_thread = loop.start_thread(stop)
    pool = ProviderPool(client, keys, provider, settings=settings)
    sink = RedisTelemetrySink(client, keys, settings)
    remaining = list(range(calls))
    lock = threading.Lock()
    finished: list[float] = []
    rate_limited: list[float] = []
    cap_samples: list[tuple[float, int]] = []
    started = time.monotonic()

    def worker() -> None:
        adapter = OpenAICompatAdapter(provider, telemetry=sink)
        while True:
            with lock:
                if not remaining:
                    return
                index = remaining.pop()
            prompt = f"Label this ticket as refund, bug or question: ticket {index}"
            while True:
                outcome = pool.acquire()
                if not isinstance(outcome, Lease):
                    time.sleep(min(outcome.retry_after_seconds, 0.05))
                    continue
                try:
                    adapter.complete(ChatRequest.from_prompt("sim-small", prompt, max_tokens=16))
                    with lock:
                        finished.append(time.monotonic() - started)
                    break
                except RateLimited:
                    with lock:
                        rate_limited.append(time.monotonic() - started)
                finally:
                    outcome.release()
        adapter.close()

    def sample() -> None:
        while not stop.is_set():
            cap_samples.append((time.monotonic() - started, pool.current_cap()[0]))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    stop.set()
    loop_thread.join(timeout=2)
    sampler.join(timeout=2)
    sim.stop()
    for key in client.scan_iter(match=keys.all_keys_pattern()):
        client.delete(key)

    caps = [cap for _, cap in cap_samples]
    steady = sorted(caps[len(caps) // 2:]) or [0]
    band = (steady[len(steady) // 10], steady[(len(steady) * 9) // 10])
    # Converged: the first sample inside the steady band (p10..p90 of the run's second half).
    entered = next((i for i, c in enumerate(caps) if band[0] <= c <= band[1]), None)
    converged_at = cap_samples[entered][0] if entered is not None else None
    in_band_after = (sum(band[0] <= c <= band[1] for c in caps[entered:]) / len(caps[entered:])
                     if entered is not None else 0.0)
    per_second = [sum(1 for t in finished if s <= t < s + 1) for s in range(int(elapsed))]
    reached_90 = next((s + 1 for s, n in enumerate(per_second) if n >= 0.9 * rps), None)
    return {
        "benchmark": "provider_cap",
        "calls": len(finished),
        "provider_limit_rps": rps,
        "simulator_latency_ms": latency_ms,
        "workers": workers,
        "seconds": round(elapsed, 2),
        "calls_per_second": round(len(finished) / elapsed, 2),
        "rate_limited_429s": len(rate_limited),
        "rate_limited_after_first_5s": sum(1 for t in rate_limited if t >= 5),
        "simulator_requests": sim.counters.requests,
        "simulator_max_in_flight": sim.counters.max_in_flight,
        "cap_start": caps[0] if caps else None,
        "cap_min": min(caps, default=None),
        "cap_max": max(caps, default=None),
        "cap_steady_band_p10_p90": list(band),
        "cap_steady_mean": round(statistics.fmean(caps[len(caps) // 2:]), 2) if caps else None,
        "cap_converged_after_s": round(converged_at, 2) if converged_at is not None else None,
        "cap_share_in_band_after_converging": round(in_band_after, 3),
        "throughput_90pct_after_s": reached_90,
        "telemetry_failures": sink.failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rps", type=int, default=20)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--latency", type=float, default=50.0, help="simulator latency in ms")
    args = parser.parse_args()
    print(json.dumps(run(args.calls, args.rps, args.workers, args.latency), indent=2))


if __name__ == "__main__":
    main()
