"""Benchmark: 200 concurrent reservations from several processes on one budget that fits 50.

Default (`--mode runs`): 200 real runs (create_run) of a reserve → background model flow, executed by
worker processes (EngineServices without a projector); the main process projects. Exactly 50 runs
reserve and wait on their background call, the rest fail their reserve step (`budget_exhausted` /
`insufficient_budget`); then the waiting runs are cancelled and every hold must come back.
`--mode ledger`: the same race against the ledger alone, holds charged or released.

Prints JSON: how many reserved (must be exactly 50), how many were refused, and the highest
held+spent any observer saw (must never pass the limit).

    .venv/bin/python tests/bench/budget_race.py [--processes 4] [--attempts 200] [--fits 50] [--mode runs|ledger]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import threading
import time
import uuid
from typing import Any

import redis

from engine.money.ledger import BudgetLedger, Reserved
from engine.transport.keys import Keyspace

REDIS_URL = os.environ.get("LOCKGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
HOLD_USD = 1
THREADS_PER_PROCESS = 10
SUBMITTERS = 8


def reserve_many(prefix: str, process_index: int, attempts: int, barrier: Any, settle_barrier: Any,
                 results: Any) -> None:
    """One worker process: `attempts` reservations from a few threads at once, then settle what it got."""
    ledger = BudgetLedger(redis.Redis.from_url(REDIS_URL), Keyspace(prefix))
    outcomes: list[Reserved | Any] = []
    lock = threading.Lock()
    pending = list(range(attempts))

    def reserve_some() -> None:
        while True:
            with lock:
                if not pending:
                    return
                attempt = pending.pop()
            outcome = ledger.reserve("race", f"p{process_index}-{attempt}", HOLD_USD, time.time() + 600,
                                     run_id=f"run-{process_index}-{attempt}", node_id="classify")
            with lock:
                outcomes.append(outcome)

    barrier.wait()
    threads = [threading.Thread(target=reserve_some) for _ in range(THREADS_PER_PROCESS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reserved = [o for o in outcomes if isinstance(o, Reserved)]
    settle_barrier.wait()  # settle only after every process reserved, so no returned money is re-reserved
    applied = 0
    for index, hold in enumerate(reserved):  # half are charged 40 cents, half released; each exactly once
        settled = ledger.charge(hold.hold_id, "0.40") if index % 2 == 0 else ledger.release(hold.hold_id)
        again = ledger.release(hold.hold_id)
        applied += int(settled.applied) - int(again.applied)
    results.put({"reserved": len(reserved), "refused": len(outcomes) - len(reserved), "settled": applied})


def run(processes: int, attempts: int, fits: int) -> dict[str, object]:
    client = redis.Redis.from_url(REDIS_URL)
    prefix = f"lgbench-{uuid.uuid4().hex[:8]}"
    keys = Keyspace(prefix)
    ledger = BudgetLedger(client, keys)
    ledger.set_budget("race", fits * HOLD_USD, "month")
    limit = ledger.budget("race").limit_micros

    highest = 0
    samples = 0
    stop = threading.Event()

    def observe() -> None:
        nonlocal highest, samples
        while not stop.is_set():
            spent, held = client.hmget(keys.budget("race"), "spent", "held")
            highest = max(highest, int(spent or 0) + int(held or 0))
            samples += 1

    observer = threading.Thread(target=observe, daemon=True)
    observer.start()
    context = multiprocessing.get_context("spawn")
    barrier, settle_barrier, results = context.Barrier(processes), context.Barrier(processes), context.Queue()
    share, extra = divmod(attempts, processes)
    workers = [context.Process(target=reserve_many,
                               args=(prefix, i, share + (1 if i < extra else 0), barrier, settle_barrier, results))
               for i in range(processes)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=120) for _ in workers]
    elapsed = time.monotonic() - started
    for worker in workers:
        worker.join(timeout=10)
    stop.set()
    observer.join(timeout=2)
    final = ledger.budget("race")
    for key in client.scan_iter(match=keys.all_keys_pattern()):
        client.delete(key)
    reserved = sum(r["reserved"] for r in reports)
    return {
        "benchmark": "budget_race",
        "processes": processes,
        "threads_per_process": THREADS_PER_PROCESS,
        "attempts": attempts,
        "budget_fits": fits,
        "reserved": reserved,
        "refused": sum(r["refused"] for r in reports),
        "exactly_fits_reserved": reserved == fits,
        "limit_usd": limit / 1_000_000,
        "max_held_plus_spent_usd": highest / 1_000_000,
        "never_above_limit": highest <= limit,
        "observer_samples": samples,
        "settled_exactly_once": sum(r["settled"] for r in reports) == reserved,
        "final_spent_usd": final.spent_micros / 1_000_000,
        "final_held_usd": final.held_micros / 1_000_000,
        "seconds_including_process_start": round(elapsed, 2),
    }


# --- through real runs ------------------------------------------------------------------------------

RUN_FLOW = {
    "format": "lockgate.flow/1", "id": "race", "name": "race", "inputs": {},
    "nodes": [
        {"id": "start", "type": "trigger.manual", "config": {}},
        {"id": "reserve", "type": "budget.reserve", "config": {"for": "model", "amount": HOLD_USD, "budget": "race"}},
        {"id": "model", "type": "ai.model", "config": {"provider": "local", "model": "sim-small", "prompt": "hi",
                                                         "output_key": "answer", "background": True,
                                                         "pool_wait": True}},
        {"id": "end", "type": "terminal", "config": {}},
    ],
    "edges": [{"from": "start", "to": "reserve"}, {"from": "reserve", "to": "model"}, {"from": "model", "to": "end"}],
}
"""The model is a background call that outlasts the benchmark, so every hold placed stays placed; a call
that finds no free slot parks on pool_capacity (its hold returned) and tries again with a new one."""


def _config(data_dir: str, db_url: str, prefix: str) -> Any:
    from pathlib import Path

    from engine.config import EngineConfig

    return EngineConfig(data_dir=Path(data_dir), redis_url=REDIS_URL, db_url=db_url, key_prefix=prefix)


def worker_process(data_dir: str, db_url: str, prefix: str, workers: int, ready: Any, stop: Any) -> None:
    """One `lockgate worker`-like process: job consumers only (the main process projects)."""
    from engine.host import EngineServices

    services = EngineServices(_config(data_dir, db_url, prefix), workers=workers, projector=False,
                              due_waker=False).start()
    ready.release()
    stop.wait(300)
    services.stop()


def run_through_runs(processes: int, attempts: int, fits: int, workers_per_process: int = 4) -> dict[str, object]:
    import tempfile
    from pathlib import Path

    from engine.flow import flow_from_data
    from engine.host import EngineServices
    from engine.money.sql_sync import save_budget_definition
    from engine.providers.config import simulator_provider
    from engine.providers.simulator import ProviderSimulator, SimulatorSettings

    client = redis.Redis.from_url(REDIS_URL)
    prefix = f"lgbench-{uuid.uuid4().hex[:8]}"
    keys = Keyspace(prefix)
    work = Path(tempfile.mkdtemp(prefix="lockgate-race-"))
    data_dir = work / "data"
    data_dir.mkdir()
    db_url = f"sqlite:///{work / 'lockgate.db'}"
    sim = ProviderSimulator(port=0, settings=SimulatorSettings(background_seconds=3600)).start()
    provider = simulator_provider(sim.url).model_dump(mode="json")
    (data_dir / "providers.json").write_text(json.dumps({"providers": [provider]}))
    main = EngineServices(_config(str(data_dir), db_url, prefix), workers=0).start()  # projector and due waker
    assert main.sql is not None and main.money is not None
    ledger = main.money.services.ledger
    save_budget_definition(main.sql, ledger.set_budget("race", fits * HOLD_USD, "month"), time.time())
    limit = ledger.budget("race").limit_micros
    main.publish_flow(flow_from_data(RUN_FLOW))

    highest, samples = 0, 0
    stop_observing = threading.Event()

    def observe() -> None:
        nonlocal highest, samples
        while not stop_observing.is_set():
            spent, held = client.hmget(keys.budget("race"), "spent", "held")
            highest = max(highest, int(spent or 0) + int(held or 0))
            samples += 1

    context = multiprocessing.get_context("spawn")
    ready, stop = context.Semaphore(0), context.Event()
    children = [context.Process(target=worker_process,
                                args=(str(data_dir), db_url, prefix, workers_per_process, ready, stop))
                for _ in range(processes)]
    for child in children:
        child.start()
    for _ in children:
        ready.acquire(timeout=120)
    observer = threading.Thread(target=observe, daemon=True)
    observer.start()
    started = time.monotonic()
    try:
        return _race(main, ledger, client, keys, attempts, fits, limit, started, observer, stop_observing,
                     lambda: (highest, samples), processes, workers_per_process)
    finally:
        stop.set()
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.terminate()
        main.stop()
        sim.stop()
        for key in client.scan_iter(match=keys.all_keys_pattern()):
            client.delete(key)


def _race(main: Any, ledger: Any, client: Any, keys: Keyspace, attempts: int, fits: int, limit: int,
          started: float, observer: threading.Thread, stop_observing: threading.Event, observed: Any,
          processes: int, workers_per_process: int) -> dict[str, object]:
    from collections import Counter

    from engine.money.engine_loop import BudgetRefused
    from engine.money.sql_sync import hold_rows

    run_ids: list[str] = []
    refused: list[int] = []
    lock = threading.Lock()
    remaining = [attempts]

    def submit() -> None:  # several submitters at once, as concurrent webhook requests would be
        while True:
            with lock:
                if remaining[0] == 0:
                    return
                remaining[0] -= 1
            try:
                run_id = main.create_run("race").run_id
            except BudgetRefused:  # the preflight: once 50 hold the whole budget, new runs are refused up front
                with lock:
                    refused.append(1)
                continue
            with lock:
                run_ids.append(run_id)

    submitters = [threading.Thread(target=submit) for _ in range(SUBMITTERS)]
    for thread in submitters:
        thread.start()
    for thread in submitters:
        thread.join()
    refused_at_create = len(refused)
    deadline = time.monotonic() + 120
    while True:  # every run either waits on its background call (holding) or failed its reserve
        runs = main.list_runs(flow_id="race", limit=attempts * 2)
        settled = [r for r in runs if r["status"] == "failed" or (
            r["status"] == "waiting" and (r.get("waiting_on") or {}).get("reason") == "provider_response")]
        if len(settled) >= len(run_ids) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    settled_in = time.monotonic() - started
    # From the snapshot that saw every run settled (a waiting run wakes every few seconds to poll its call).
    waiting = [r["id"] for r in settled if r["status"] == "waiting"]
    refusals = Counter(r.get("error_type") for r in settled if r["status"] == "failed")
    placed_while_waiting = len(ledger.placed_hold_ids())
    for run_id in waiting:  # end the runs that hold: their holds must all come back
        main.cancel_run(run_id)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = [h for h in hold_rows(main.sql) if h["budget"] == "race"]
        if rows and all(h["state"] != "placed" for h in rows) and not ledger.placed_hold_ids():
            break
        time.sleep(0.05)
    stop_observing.set()
    observer.join(timeout=2)
    highest, samples = observed()
    final = ledger.budget("race")
    rows = [h for h in hold_rows(main.sql) if h["budget"] == "race"]
    return {
        "benchmark": "budget_race",
        "mode": "runs",
        "processes": processes,
        "workers_per_process": workers_per_process,
        "attempts": attempts,
        "budget_fits": fits,
        "reserved": placed_while_waiting,
        "runs_waiting_with_a_hold": len(waiting),
        "refused": refused_at_create + sum(refusals.values()),
        "refused_at_create_run": refused_at_create,
        "refused_at_reserve_step": dict(refusals),
        "exactly_fits_reserved": placed_while_waiting == fits == len(waiting),
        "limit_usd": limit / 1_000_000,
        "max_held_plus_spent_usd": highest / 1_000_000,
        "never_above_limit": highest <= limit,
        "observer_samples": samples,
        "holds_placed_in_all": len(rows),
        "settled_exactly_once": bool(rows) and all(h["state"] == "released" for h in rows)
        and not ledger.placed_hold_ids() and final.held_micros == 0,
        "final_spent_usd": final.spent_micros / 1_000_000,
        "final_held_usd": final.held_micros / 1_000_000,
        "seconds_to_all_reserved_or_refused": round(settled_in, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("--fits", type=int, default=50)
    parser.add_argument("--mode", choices=("runs", "ledger"), default="runs",
                        help="runs: real runs (create_run, worker processes, budget.reserve); ledger: the ledger alone")
    args = parser.parse_args()
    if args.mode == "runs":
        print(json.dumps(run_through_runs(args.processes, args.attempts, args.fits), indent=2))
    else:
        print(json.dumps(run(args.processes, args.attempts, args.fits), indent=2))


if __name__ == "__main__":
    main()
