"""Benchmark: what a model call costs when its telemetry Redis is down (connection refused) or silent (accepts,
never answers), against no telemetry at all, through the adapter and the provider simulator.

Prints one JSON object: per case the median and max call time in ms over N calls, and the sink's failure count.
Target: a refused Redis adds under 10 ms a call; a silent one at most the fail-soft timeout per write.

    .venv/bin/python tests/bench/telemetry_fail_soft.py [--calls 20]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.concurrency.telemetry import FAIL_SOFT_TIMEOUT_SECONDS, RedisTelemetrySink, fail_soft_client
from engine.providers.base import ChatRequest
from engine.providers.config import simulator_provider
from engine.providers.openai_compat import OpenAICompatAdapter
from engine.providers.simulator import ProviderSimulator, SimulatorSettings
from engine.transport.keys import Keyspace

REQUEST = ChatRequest.from_prompt("sim-small", "Label this ticket as refund, bug or question: refund please")


def _calls(adapter: OpenAICompatAdapter, calls: int) -> list[float]:
    timings = []
    for _ in range(calls):
        started = time.perf_counter()
        adapter.complete(REQUEST)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def bench(calls: int) -> dict[str, Any]:
    sim = ProviderSimulator(settings=SimulatorSettings(requests_per_window=100_000)).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # accepts connections and never answers
    keys = Keyspace(f"lgtelemetry-{uuid.uuid4().hex[:8]}")
    provider = simulator_provider(sim.url)
    report: dict[str, Any] = {"calls": calls, "fail_soft_timeout_s": FAIL_SOFT_TIMEOUT_SECONDS}
    try:
        cases: dict[str, RedisTelemetrySink | None] = {
            "no_telemetry": None,
            "redis_refused": RedisTelemetrySink(fail_soft_client("redis://127.0.0.1:1/0"), keys),
            "redis_silent": RedisTelemetrySink(fail_soft_client(f"redis://127.0.0.1:{silent.getsockname()[1]}/0"),
                                               keys),
        }
        for name, sink in cases.items():
            timings = _calls(OpenAICompatAdapter(provider, telemetry=sink), calls)
            report[name] = {"median_ms": round(statistics.median(timings), 2), "max_ms": round(max(timings), 2),
                            "sink_failures": sink.failures if sink is not None else 0}
    finally:
        silent.close()
        sim.stop()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps(bench(args.calls), indent=2))


if __name__ == "__main__":
    main()
