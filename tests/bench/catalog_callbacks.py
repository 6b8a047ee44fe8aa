"""Benchmark: runs parked on `wait.callback`, resumed by concurrent POSTs to their callback URLs.

Parks N runs (trigger → announce, which renders `callback_url('wait')` → wait.callback 1h → terminal) on
real workers and the real HTTP server (machine Redis under a fresh key prefix, a fresh SQLite file or
--db-url), then sends all N POSTs at once (asyncio, one connection each, all opened before the burst) and
checks that every POST answered 200, every run succeeded with its own body, and each resumed exactly once
(one `run_resumed` applied per run). Figures, in ms:
- `answer`: each POST from send to answer, as the client sees it (the burst queues on the server);
- `resume`: from the moment the server claimed the callback (`CallbackClaim.at`) to the wait step's
  completion as the worker stamped it (what the projector takes to show it is not counted);
- `one_at_a_time`: the same `resume` figure for --sequential runs POSTed one after another (no burst).
Target: p99 resume under 100 ms. Prints one JSON object.

    .venv/bin/python tests/bench/catalog_callbacks.py [--runs 1000] [--sequential 100] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
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

import httpx
import orjson
import redis
import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.api.server import ApiServer
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.parking.callback_claims import read_callback_claim
from engine.parking.callback_links import callback_token
from engine.store.models import AppliedEvent, Run, Step

FLOW = {"format": "lockgate.flow/1", "id": "callback-bench", "name": "callback bench", "inputs": {},
        "nodes": [{"id": "start", "type": "trigger.manual", "config": {}},
                  {"id": "announce", "type": "set", "config": {"values": {"url": "{{ callback_url('wait') }}"}}},
                  {"id": "wait", "type": "wait.callback", "config": {"timeout": "1h", "output_key": "reply"}},
                  {"id": "done", "type": "terminal", "config": {"output": "{{ state.reply.n }}"}},
                  {"id": "late", "type": "terminal", "config": {"output": "late"}}],
        "edges": [{"from": "start", "to": "announce"}, {"from": "announce", "to": "wait"},
                  {"from": "wait", "port": "received", "to": "done"},
                  {"from": "wait", "port": "timed_out", "to": "late"}]}


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(statistics.median(ordered), 1),
            "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
            "max": round(ordered[-1], 1)}


def _count(sql: sa.Engine, query: Any) -> int:
    with sql.connect() as conn:
        return int(conn.execute(query).scalar() or 0)


def _park(services: EngineServices, count: int) -> list[str]:
    handles = services.handles
    assert handles is not None
    run_ids = [services.create_run("callback-bench").run_id for _ in range(count)]
    waiting = sa.select(sa.func.count()).select_from(Run).where(Run.id.in_(run_ids), Run.status == "waiting")
    deadline = time.monotonic() + 300
    while _count(handles.sql, waiting) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"callback bench: the {count} runs did not all park within 300 s")
        time.sleep(0.1)
    return run_ids


def _finished_at(sql: sa.Engine, run_ids: list[str]) -> dict[str, float]:
    with sql.connect() as conn:
        rows = conn.execute(sa.select(Step.run_id, Step.finished_at)
                            .where(Step.run_id.in_(run_ids), Step.step == "wait")).all()
    return {row.run_id: (row.finished_at if row.finished_at.tzinfo else row.finished_at.replace(tzinfo=UTC))
            .timestamp() for row in rows if row.finished_at is not None}


def _wait_done(services: EngineServices, run_ids: list[str]) -> None:
    handles = services.handles
    assert handles is not None
    ended = sa.select(sa.func.count()).select_from(Run).where(Run.id.in_(run_ids),
                                                              Run.status.in_(("succeeded", "failed")))
    deadline = time.monotonic() + 300
    while _count(handles.sql, ended) < len(run_ids):
        if time.monotonic() > deadline:
            raise SystemExit("callback bench: resumed runs did not all end within 300 s")
        time.sleep(0.05)


def _check(services: EngineServices, run_ids: list[str], bodies: dict[str, int]) -> None:
    handles = services.handles
    assert handles is not None
    with handles.sql.connect() as conn:
        results: dict[str, Any] = dict(conn.execute(sa.select(Run.id, Run.result).where(Run.id.in_(run_ids))).all())
        resumes = dict(conn.execute(sa.select(AppliedEvent.run_id, sa.func.count())
                                    .where(AppliedEvent.run_id.in_(run_ids),
                                           AppliedEvent.event_type == "run_resumed")
                                    .group_by(AppliedEvent.run_id)).all())
    wrong = [r for r in run_ids if results.get(r) != bodies[r]]
    not_once = [r for r in run_ids if resumes.get(r) != 1]
    if wrong or not_once:
        raise SystemExit(f"callback bench: {len(wrong)} runs ended with another body, {len(not_once)} did not "
                         "resume exactly once")


def _resume_ms(services: EngineServices, run_ids: list[str]) -> list[float]:
    handles = services.handles
    assert handles is not None
    finished = _finished_at(handles.sql, run_ids)
    samples = []
    for run_id in run_ids:
        claim = read_callback_claim(handles.client, handles.keys, run_id, "wait")
        assert claim is not None and claim.outcome == "received"
        samples.append((finished[run_id] - claim.at) * 1000)
    return samples


async def _post(host: str, port: int, path: str, body: bytes, start: asyncio.Event) -> tuple[int, float]:
    """One POST on its own connection, written by hand so the client adds no pool of its own (httpx's async
    pool is quadratic in its connections, which dominated a burst of 1,000)."""
    reader, writer = await asyncio.open_connection(host, port)
    request = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
    await start.wait()
    began = time.perf_counter()
    writer.write(request)
    await writer.drain()
    status_line = await reader.readline()
    await reader.read()
    elapsed = (time.perf_counter() - began) * 1000
    writer.close()
    return int(status_line.split()[1]), elapsed


async def _burst(base_url: str, paths: dict[str, str]) -> tuple[list[int], list[float]]:
    """Every POST at once: all connections opened first, then every request written together."""
    address = httpx.URL(base_url)
    host, port = str(address.host), int(address.port or 80)
    start = asyncio.Event()
    posts = [asyncio.create_task(_post(host, port, path, orjson.dumps({"n": index}), start))
             for index, path in enumerate(paths.values())]
    await asyncio.sleep(0.5)  # let the connections open before the burst
    start.set()
    answers = await asyncio.gather(*posts)
    return [status for status, _ in answers], [ms for _, ms in answers]


def bench(runs: int, sequential: int, workers: int, redis_url: str, db_url: str | None) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="lockgate-callback-bench-"))
    config = EngineConfig(data_dir=folder, redis_url=redis_url, db_url=db_url or f"sqlite:///{folder / 'bench.db'}",
                          key_prefix=f"lgcallback-{uuid.uuid4().hex[:10]}")
    with EngineServices(config, workers=workers, block_ms=50) as services, \
            ApiServer(services, "127.0.0.1", 0) as server:
        handles = services.handles
        assert handles is not None
        services.publish_flow(flow_from_data(FLOW))
        began = time.perf_counter()
        run_ids = _park(services, runs)
        park_seconds = time.perf_counter() - began
        paths = {r: f"/callbacks/{callback_token(services.box, r, 'wait')}" for r in run_ids}
        shown = services.get_run(run_ids[0], with_steps=False)
        assert shown is not None and shown["state"]["url"] == server.url + paths[run_ids[0]]

        began = time.perf_counter()
        statuses, answer_ms = asyncio.run(_burst(server.url, paths))
        burst_seconds = time.perf_counter() - began
        if statuses.count(200) != runs:
            raise SystemExit(f"callback bench: {statuses.count(200)} of {runs} POSTs answered 200")
        _wait_done(services, run_ids)
        all_done_seconds = time.perf_counter() - began
        _check(services, run_ids, {r: i for i, r in enumerate(run_ids)})
        burst_resume = _resume_ms(services, run_ids)

        one_by_one = _park(services, sequential) if sequential else []
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for index, run_id in enumerate(one_by_one):
                path = f"/callbacks/{callback_token(services.box, run_id, 'wait')}"
                assert client.post(path, json={"n": index}).status_code == 200
                services.wait_for_run(run_id, timeout=30)
        sequential_resume = _resume_ms(services, one_by_one) if one_by_one else []
        if one_by_one:
            _check(services, one_by_one, {r: i for i, r in enumerate(one_by_one)})
    cleanup = redis.Redis.from_url(redis_url)
    keys = list(cleanup.scan_iter(match=f"{config.key_prefix}:*", count=1000))
    if keys:
        cleanup.delete(*keys)
    cleanup.close()
    result: dict[str, Any] = {
        "runs": runs, "workers": workers, "db": "postgresql" if db_url else "sqlite",
        "all_resumed_once": True, "park_seconds": round(park_seconds, 1),
        "burst": {"posts_seconds": round(burst_seconds, 2), "all_ended_seconds": round(all_done_seconds, 2),
                  "answer_ms": _summary(answer_ms), "resume_ms": _summary(burst_resume)},
        "target_p99_resume_ms": 100,
    }
    if one_by_one:
        result["one_at_a_time"] = {"runs": len(one_by_one), "resume_ms": _summary(sequential_resume)}
    result["target_met"] = {"burst": result["burst"]["resume_ms"]["p99"] < 100,
                            "one_at_a_time": bool(one_by_one) and result["one_at_a_time"]["resume_ms"]["p99"] < 100}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--sequential", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-url", default=os.environ.get("LOCKGATE_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--db-url", default=None, help="a PostgreSQL URL (default: a fresh SQLite file)")
    args = parser.parse_args()
    print(json.dumps(bench(args.runs, args.sequential, args.workers, args.redis_url, args.db_url), indent=2))


if __name__ == "__main__":
    main()
