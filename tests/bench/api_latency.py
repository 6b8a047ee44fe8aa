"""HTTP API latency: POST /api/v1/runs with `wait` for the hello flow (answer 201 with the result), and signed
webhook deliveries (answer 202), sequential and from several client threads.

Machine Redis (127.0.0.1:6379, or LOCKGATE_REDIS_URL) under a fresh key prefix, a fresh SQLite file, the server
on 127.0.0.1. Prints JSON. Usage: python tests/bench/api_latency.py [--requests 300] [--clients 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis

from engine.api.server import ApiServer
from engine.approvals.keys import create_key
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.publish import get_version
from engine.triggers.settings import set_enabled
from engine.triggers.webhooks import signature_of

HELLO = {"format": "lockgate.flow/1", "id": "hello", "name": "hello",
         "inputs": {"name": {"type": "string", "required": True}},
         "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                   {"id": "hook", "type": "trigger.webhook", "config": {}},
                   {"id": "greet", "type": "set", "config": {"values": {"greeting": "Hello, {{ inputs.name }}!"}}},
                   {"id": "done", "type": "terminal", "config": {"output": "{{ state.greeting }}"}}],
         "edges": [{"from": "start", "to": "greet"}, {"from": "hook", "to": "greet"}, {"from": "greet", "to": "done"}]}


def _summary(latencies: list[float], seconds: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {"requests": len(ordered), "per_s": round(len(ordered) / seconds, 1),
            "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 1)}


def _load(clients: int, count: int, one: Any) -> dict[str, Any]:
    latencies: list[float] = []
    lock = threading.Lock()

    def client(share: int) -> None:
        with httpx.Client(timeout=30) as http:
            for index in range(share):
                began = time.perf_counter()
                one(http, f"{threading.get_ident()}-{index}")
                with lock:
                    latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(count // clients,)) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _summary(latencies, time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    redis_url = os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"lgbench-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as folder:
        config = EngineConfig(data_dir=Path(folder), redis_url=redis_url, key_prefix=prefix)
        services = EngineServices(config, workers=2).start()
        server = ApiServer(services).start()
        try:
            services.publish_flow(flow_from_data(HELLO))
            assert services.sql is not None and services.handles is not None
            key = create_key(services.sql, "bench")
            _, flow = get_version(services.sql, "hello")
            token = set_enabled(services.handles.client, services.keys, flow, "trigger.webhook", True,
                                time.time())[0].token
            assert token is not None
            auth = {"Authorization": f"Bearer {key}"}

            def run_once(http: httpx.Client, tag: str) -> None:
                answer = http.post(f"{server.url}/api/v1/runs", headers=auth,
                                   json={"flow_id": "hello", "inputs": {"name": tag}, "wait": 10})
                assert answer.status_code == 201 and answer.json()["status"] == "succeeded", answer.text

            def deliver_once(http: httpx.Client, tag: str) -> None:
                body = json.dumps({"name": tag}).encode()
                answer = http.post(f"{server.url}/webhooks/{token}", content=body, headers={
                    "X-Hub-Signature-256": signature_of(body, token), "X-Delivery-Id": tag})
                assert answer.status_code == 202, answer.text

            results = {
                "sync_run_sequential": _load(1, args.requests // 3, run_once),
                "sync_run_concurrent": _load(args.clients, args.requests, run_once),
                "webhook_concurrent": _load(args.clients, args.requests, deliver_once),
                "clients": args.clients, "load_average": os.getloadavg()[0],
            }
        finally:
            server.stop()
            services.stop()
            client = redis.Redis.from_url(redis_url)
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            if keys:
                client.delete(*keys)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
