"""`flow.call` overhead: what a parent calling a trivial child costs beyond the child's own run.

Runs made one after another on real workers (machine Redis under a fresh key prefix, a fresh SQLite file, or
`--db-url`), durations from the store's own timestamps (`created_at` to `finished_at`), so the polling of the
caller does not count:
- `child_alone`: the trivial child (trigger, set, terminal) started directly;
- `parent`: a parent (trigger, flow.call of that child, terminal), its child included;
- `overhead`: per parent run, its duration less its own child's: starting the child through `create_run()`,
  parking, the projector applying the child's end, the waker's resume, reading the result, the parent's own
  trigger and terminal. Target: under 20 ms p50.

Prints JSON. Usage: python tests/bench/catalog_flow_call.py [--runs 200] [--postgres ADMIN_URL]
(`--postgres`: a fresh database made on that server for the run and dropped afterwards).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices

_INPUTS = {"n": {"type": "number", "required": True}}
CHILD = {"format": "lockgate.flow/1", "id": "bench-child", "name": "bench child", "inputs": _INPUTS,
         "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                   {"id": "double", "type": "set", "config": {"values": {"doubled": "{{ inputs.n * 2 }}"}}},
                   {"id": "done", "type": "terminal", "config": {"output": "{{ state.doubled }}"}}],
         "edges": [{"from": "start", "to": "double"}, {"from": "double", "to": "done"}]}
PARENT = {"format": "lockgate.flow/1", "id": "bench-parent", "name": "bench parent", "inputs": _INPUTS,
          "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                    {"id": "call", "type": "flow.call",
                     "config": {"flow": "bench-child", "inputs": {"n": "{{ inputs.n }}"}, "output_key": "sub"}},
                    {"id": "done", "type": "terminal", "config": {"output": "{{ state.sub }}"}}],
          "edges": [{"from": "start", "to": "call"}, {"from": "call", "to": "done"}]}
TARGET_P50_MS = 20.0


def _summary(samples_ms: list[float]) -> dict[str, Any]:
    ordered = sorted(samples_ms)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "max_ms": round(ordered[-1], 2)}


def _took_ms(run: dict[str, Any]) -> float:
    began = datetime.fromisoformat(run["created_at"])
    ended = datetime.fromisoformat(run["finished_at"])
    return (ended - began).total_seconds() * 1000


def measure(runs: int, db_url: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        config = EngineConfig(data_dir=Path(folder) / "data", key_prefix=f"bench-{uuid.uuid4().hex[:8]}",
                              redis_url=os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0"),
                              db_url=db_url or f"sqlite:///{Path(folder) / 'bench.db'}")
        services = EngineServices(config, workers=2, block_ms=50).start()
        try:
            services.publish_flow(flow_from_data(CHILD))
            services.publish_flow(flow_from_data(PARENT))
            alone: list[float] = []
            parents: list[float] = []
            overhead: list[float] = []
            for index in range(runs):
                child = services.wait_for_run(services.create_run("bench-child", {"n": index}).run_id, timeout=60)
                assert child["status"] == "succeeded" and child["result"] == index * 2, child
                alone.append(_took_ms(child))
                parent = services.wait_for_run(services.create_run("bench-parent", {"n": index}).run_id, timeout=60)
                assert parent["status"] == "succeeded" and parent["result"] == index * 2, parent
                [child_id] = parent["child_run_ids"]
                called = services.get_run(child_id, with_steps=False)
                assert called is not None
                parents.append(_took_ms(parent))
                overhead.append(_took_ms(parent) - _took_ms(called))
        finally:
            services.stop()
    result = {"runs": runs, "db": "postgresql" if db_url and db_url.startswith("postgresql") else "sqlite",
              "child_alone": _summary(alone), "parent": _summary(parents), "overhead": _summary(overhead),
              "parent_less_child_alone_p50_ms": round(statistics.median(parents) - statistics.median(alone), 2),
              "target_p50_ms": TARGET_P50_MS}
    result["meets_target"] = result["overhead"]["p50_ms"] < TARGET_P50_MS
    return result


@contextmanager
def fresh_postgres(admin_url: str) -> Iterator[str]:
    import sqlalchemy as sa

    name = f"lgbench_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--postgres", default=None, metavar="ADMIN_URL",
                        help="measure on a fresh database of this PostgreSQL server (default: a fresh SQLite file)")
    args = parser.parse_args()
    machine = {"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)}
    if args.postgres:
        with fresh_postgres(args.postgres) as url:
            report = measure(args.runs, url)
    else:
        report = measure(args.runs, None)
    print(json.dumps({"machine": machine, "flow_call": report}, indent=2))


if __name__ == "__main__":
    main()
