"""Benchmark: 200 concurrent reservations from several processes on one budget that fits 50.

Prints JSON: how many reserved (must be exactly 50), how many were refused, and the highest
held+spent any observer saw (must never pass the limit), while reserved holds are charged or released.

    .venv/bin/python tests/bench/budget_race.py [--processes 4] [--attempts 200] [--fits 50]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("--fits", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(run(args.processes, args.attempts, args.fits), indent=2))


if __name__ == "__main__":
    main()
