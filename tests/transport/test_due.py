"""The parked-run due set: atomic pops across threads and processes, and a waker that wakes on time."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import redis

from engine.clock import ManualClock
from engine.transport.due import DueItem, DueSet, DueWaker
from engine.transport.keys import Keyspace


def _wait_for(condition: object, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False


def test_schedule_cancel_and_next_due(client: redis.Redis, keyspace: Keyspace) -> None:
    due = DueSet(client, keyspace)
    assert due.next_due() is None
    assert due.schedule("a", 200.0) is True  # the earliest: nudges wakers
    assert due.schedule("b", 300.0) is False
    assert due.schedule("c", 100.0) is True
    assert (due.next_due(), due.count(), due.due_at("b")) == (100.0, 3, 300.0)
    assert due.schedule("b", 50.0) is True  # rescheduling replaces the due time
    assert due.cancel("b") is True and due.cancel("b") is False
    assert due.due_at("b") is None


def test_pop_due_returns_only_due_members_earliest_first(client: redis.Redis, keyspace: Keyspace) -> None:
    due = DueSet(client, keyspace)
    due.schedule_many({"late": 30.0, "first": 10.0, "second": 20.5, "future": 99.0})
    assert due.pop_due(now=5.0) == []
    assert due.pop_due(now=30.0, limit=2) == [DueItem("first", 10.0), DueItem("second", 20.5)]
    assert due.pop_due(now=30.0) == [DueItem("late", 30.0)]
    assert due.pop_due(now=30.0) == []
    assert due.next_due() == 99.0


def test_concurrent_pops_hand_each_member_to_exactly_one_thread(
    client: redis.Redis, keyspace: Keyspace, redis_url: str
) -> None:
    members = {f"run-{i}": float(i % 97) for i in range(4_000)}
    DueSet(client, keyspace).schedule_many(members)
    popped: list[list[str]] = [[] for _ in range(4)]
    # Every thread pops once before any pops again: on a loaded machine the first thread started
    # could otherwise drain all 4,000 before the others connect, and nothing would compete.
    first_pops_done = threading.Barrier(4, timeout=30)

    def drain(slot: int) -> None:
        connection = redis.Redis.from_url(redis_url)
        own = DueSet(connection, keyspace)
        try:
            items = own.pop_due(now=1_000.0, limit=25)
            first_pops_done.wait()
            while items:
                popped[slot].extend(item.member for item in items)
                items = own.pop_due(now=1_000.0, limit=25)
        finally:
            connection.close()

    threads = [threading.Thread(target=drain, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    everything = [member for part in popped for member in part]
    assert len(everything) == len(members) and set(everything) == set(members)
    assert all(popped)  # all four really competed


def test_waker_with_manual_clock_delivers_after_advance_and_nudge(client: redis.Redis, keyspace: Keyspace) -> None:
    clock = ManualClock()
    due = DueSet(client, keyspace)
    delivered: list[DueItem] = []
    waker = DueWaker(due, delivered.extend, clock).start()
    try:
        due.schedule("queue-24h", clock.now() + 24 * 3600)
        due.schedule("approval-2h", clock.now() + 2 * 3600)
        time.sleep(0.2)
        assert delivered == []
        clock.advance(2 * 3600)
        due.nudge()
        assert _wait_for(lambda: len(delivered) == 1)
        assert delivered[0].member == "approval-2h"
        clock.advance(22 * 3600 - 1)
        due.nudge()
        time.sleep(0.2)
        assert len(delivered) == 1  # one second early: still parked
        clock.advance(1)
        due.nudge()
        assert _wait_for(lambda: len(delivered) == 2)
        assert delivered[1] == DueItem("queue-24h", clock.now())
        assert due.count() == 0
    finally:
        waker.stop()
    assert not waker.running


def test_an_earlier_schedule_wakes_a_sleeping_waker(client: redis.Redis, keyspace: Keyspace) -> None:
    due = DueSet(client, keyspace)
    delivered: list[tuple[str, float]] = []
    due.schedule("far", time.time() + 600)
    waker = DueWaker(due, lambda items: delivered.extend((i.member, time.time()) for i in items)).start()
    try:
        time.sleep(0.1)  # the waker now sleeps toward "far"
        due_at = time.time() + 0.3
        due.schedule("soon", due_at)
        assert _wait_for(lambda: bool(delivered), within=3.0)
        member, at = delivered[0]
        assert member == "soon"
        # Woken by the schedule's nudge: asleep toward "far" it would only wake after max_sleep (30 s). The
        # bound leaves room for a loaded machine; the resume-lag figures come from tests/bench/due_lag.py.
        assert due_at <= at < due_at + 1.0
    finally:
        waker.stop()


def test_failing_callback_reschedules_its_members(client: redis.Redis, keyspace: Keyspace) -> None:
    clock = ManualClock()
    due = DueSet(client, keyspace)
    calls: list[list[str]] = []

    def flaky(items: list[DueItem]) -> None:
        calls.append([item.member for item in items])
        if len(calls) == 1:
            raise RuntimeError("resume queue unavailable")

    waker = DueWaker(due, flaky, clock, retry_delay=5.0)
    due.schedule("r", clock.now())
    waker.deliver_due()
    assert calls == [["r"]] and due.due_at("r") == clock.now() + 5.0
    clock.advance(5.0)
    waker.deliver_due()
    assert calls == [["r"], ["r"]] and due.count() == 0


_WAKER_PROCESS = """
import json, sys, time
from engine.transport.connection import redis_client
from engine.transport.due import DueSet, DueWaker
from engine.transport.keys import Keyspace
url, prefix = sys.argv[1], sys.argv[2]
got = []
waker = DueWaker(DueSet(redis_client(url), Keyspace(prefix)), lambda items: got.extend(i.member for i in items)).start()
print("ready", flush=True)
until = float(sys.stdin.readline())
time.sleep(max(0.0, until - time.time()))
waker.stop()
print(json.dumps(got), flush=True)
"""


def test_wakers_in_several_processes_never_deliver_a_member_twice(
    client: redis.Redis, keyspace: Keyspace, redis_url: str
) -> None:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WAKER_PROCESS, redis_url, keyspace.prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    # Due times are set once every waker listens (a loaded machine can take seconds to start them), so all
    # three sleep toward the same members and really compete.
    start = time.time() + 0.5
    finish = start + 2.5
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(f"{finish}\n")
        process.stdin.flush()
    members = {f"run-{i}": start + (i % 100) / 100 for i in range(1_500)}
    DueSet(client, keyspace).schedule_many(members)
    results = []
    for process in processes:
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    everything = [member for part in results for member in part]
    assert len(everything) == len(members) and set(everything) == set(members)
    assert sum(1 for part in results if part) >= 2
