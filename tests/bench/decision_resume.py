"""Benchmark: how soon a decided approval's run resumes, on the system clock.

Parks N runs of the parking tests' approval flow at their approval (1 h timeout), then decides them one at a
time and reads, per run, the time from the decision to the approval step's completion as the worker stamped
it (so how soon the projector shows it is not counted). Engine services in this process, the machine's
Redis, SQLite in a temp folder. Prints one JSON object: p50/p99/max resume latency. Target: p99 < 250 ms.

    .venv/bin/python tests/bench/decision_resume.py [--runs 50] [--redis-url redis://127.0.0.1:6379/0]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.approvals.decide import decide
from engine.approvals.pending import list_pending
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.store.models import Step
from tests.parking.conftest import approval_flow


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _finished_at(sql: sa.Engine, run_id: str) -> float | None:
    with sql.connect() as conn:
        value = conn.execute(sa.select(Step.finished_at).where(Step.run_id == run_id, Step.step == "ask")).scalar()
    if value is None:
        return None
    return float((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp())


def bench(runs: int, redis_url: str) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lockgate-decision-bench-"))
    config = EngineConfig(data_dir=folder, redis_url=redis_url, db_url=f"sqlite:///{folder / 'bench.db'}",
                          key_prefix=f"lgdecide-{uuid.uuid4().hex[:10]}")
    with EngineServices(config, workers=2, block_ms=100) as services:
        handles = services.handles
        assert handles is not None
        services.publish_flow(flow_from_data(approval_flow(delay="0s", timeout="1h")))
        run_ids = [services.create_run("gate").run_id for _ in range(runs)]
        deadline = time.monotonic() + 60
        while len(list_pending(handles)) < runs:
            if time.monotonic() > deadline:
                raise SystemExit("decision bench: the runs did not all park at their approval within 60 s")
            time.sleep(0.05)
        approvals = {item.run_id: item.id for item in list_pending(handles)}
        latencies = []
        for run_id in run_ids:
            decided_at = time.time()
            assert decide(handles, approvals[run_id], "approve", "user:bench").accepted
            services.wait_for_run(run_id, timeout=30)
            finished = _finished_at(handles.sql, run_id)
            assert finished is not None
            latencies.append((finished - decided_at) * 1000)
        keys = list(handles.client.scan_iter(match=f"{config.key_prefix}:*", count=1000))
        if keys:
            handles.client.delete(*keys)
    return {"runs": runs, "resume_ms": {"p50": round(statistics.median(latencies), 1),
                                        "p99": round(_percentile(latencies, 0.99), 1),
                                        "max": round(max(latencies), 1)}, "target_p99_ms": 250}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--redis-url", default=os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    print(json.dumps(bench(args.runs, args.redis_url), indent=2))


if __name__ == "__main__":
    main()
