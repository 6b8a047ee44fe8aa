"""Rerun start latency: how long `rerun_run` takes to answer (plan from the original run's record + create
the queued run + enqueue its job), and until the rerun has ended, beside a plain `create_run` of the same
flow; for chains of N `set` steps, rerun from the last one (every step before it reused).

Machine Redis (127.0.0.1:6379, or LOCKGATE_REDIS_URL) under a fresh key prefix, a fresh SQLite file (or
--db-url). Prints JSON. Usage: nice -n 19 python tests/bench/rerun_latency.py [--steps 10 100] [--reruns 30]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices


def _chain(steps: int) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [{"id": "start", "type": "trigger.manual", "config": {}}]
    nodes += [{"id": f"s{i}", "type": "set", "config": {"values": {f"v{i}": f"value {i} " * 8}}}
              for i in range(steps)]
    nodes.append({"id": "done", "type": "terminal", "config": {}})
    ids = [node["id"] for node in nodes]
    return {"format": "lockgate.flow/1", "id": f"chain{steps}", "name": f"chain{steps}",
            "nodes": nodes, "edges": [{"from": a, "to": b} for a, b in itertools.pairwise(ids)]}


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2)}


def measure(services: EngineServices, steps: int, reruns: int) -> dict[str, Any]:
    document = _chain(steps)
    services.publish_flow(flow_from_data(document))
    original = services.wait_for_run(services.create_run(document["id"]).run_id, timeout=120)
    assert original["status"] == "succeeded", original
    last = f"s{steps - 1}"
    answered, ended, created_answered, created_ended = [], [], [], []
    for _ in range(reruns):
        began = time.perf_counter()
        created, plan = services.rerun_run(original["id"], last)
        answered.append(time.perf_counter() - began)
        run = services.wait_for_run(created.run_id, timeout=60)
        ended.append(time.perf_counter() - began)
        assert run["status"] == "succeeded" and len(plan.reused) == steps, run
        began = time.perf_counter()
        plain = services.create_run(document["id"])
        created_answered.append(time.perf_counter() - began)
        services.wait_for_run(plain.run_id, timeout=120)
        created_ended.append(time.perf_counter() - began)
    return {"steps_reused": steps, "reruns": reruns, "rerun_answer": _ms(answered), "rerun_to_end": _ms(ended),
            "plain_create_answer": _ms(created_answered), "plain_run_to_end": _ms(created_ended)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--reruns", type=int, default=30)
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    redis_url = os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"lgbench-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as scratch:
        db_url = args.db_url or f"sqlite:///{Path(scratch) / 'lockgate.db'}"
        config = EngineConfig(data_dir=Path(scratch) / "data", redis_url=redis_url, db_url=db_url, key_prefix=prefix)
        services = EngineServices(config, workers=2, block_ms=100).start()
        try:
            results = [measure(services, steps, args.reruns) for steps in args.steps]
        finally:
            services.stop()
            client = redis.Redis.from_url(redis_url)
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            if keys:
                client.delete(*keys)
    print(json.dumps({"db": "postgresql" if db_url.startswith("postgresql") else "sqlite", "results": results},
                     indent=2))


if __name__ == "__main__":
    main()
