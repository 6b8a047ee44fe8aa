"""The parked-run due set: atomic pops across threads and processes, and a waker that wakes on time."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import redis

from engine.clock import ManualClock
from engine.transport.due import CLAIM_SECONDS, DueClaim, DueItem, DueSet, DueWaker
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


def test_claim_due_hands_out_only_due_members_earliest_first(client: redis.Redis, keyspace: Keyspace) -> None:
    due = DueSet(client, keyspace)
    due.schedule_many({"late": 30.0, "first": 10.0, "second": 20.5, "future": 99.0})
    assert due.claim_due(now=5.0).items == []
    first = due.claim_due(now=30.0, limit=2)
    assert first == DueClaim([DueItem("first", 10.0), DueItem("second", 20.5)], 30.0 + CLAIM_SECONDS)
    second = due.claim_due(now=30.0)
    assert second.items == [DueItem("late", 30.0)]
    assert due.claim_due(now=30.0).items == []
    assert (due.next_due(), due.claimed()) == (99.0, 3)
    assert due.next_wake() == 30.0 + CLAIM_SECONDS  # the claims lapse before "future" is due
    assert due.settle(first) == 2 and due.settle(second) == 1
    assert (due.claimed(), due.next_wake()) == (0, 99.0)


def test_a_claim_never_settled_lapses_and_is_handed_out_again(client: redis.Redis, keyspace: Keyspace) -> None:
    due = DueSet(client, keyspace)
    due.schedule_many({"a": 10.0, "b": 11.0})
    lost = due.claim_due(now=12.0, hold=5.0)  # its claimer died before it delivered them
    assert [item.member for item in lost.items] == ["a", "b"]
    assert due.claim_due(now=16.9).items == []  # still held
    again = due.claim_due(now=17.0, limit=1, hold=5.0)
    assert again.items == [DueItem("a", 17.0)]  # due again from when the claim lapsed
    retaken = due.claim_due(now=17.0, hold=5.0)
    assert retaken.items == [DueItem("b", 17.0)]
    # The first claimer, only slow, settles late: the members now held by the others stay theirs.
    assert due.settle(lost) == 0 and due.claimed() == 2
    assert due.settle(again) == 1 and due.settle(retaken) == 1 and due.claimed() == 0


def test_a_member_scheduled_again_while_claimed_is_handed_out_once_per_claim(client: redis.Redis,
                                                                             keyspace: Keyspace) -> None:
    due = DueSet(client, keyspace)
    due.schedule("run", 10.0)
    held = due.claim_due(now=10.0, hold=5.0)
    due.schedule("run", 12.0)  # parked again before the first claim was settled
    renewed = due.claim_due(now=20.0, hold=5.0)  # the lapsed claim and the new due time, in one member
    assert renewed.items == [DueItem("run", 15.0)] and due.count() == 0
    assert due.settle(held) == 0 and due.settle(renewed) == 1 and due.claimed() == 0


def test_concurrent_claims_hand_each_member_to_exactly_one_thread(
    client: redis.Redis, keyspace: Keyspace, redis_url: str
) -> None:
    members = {f"run-{i}": float(i % 97) for i in range(4_000)}
    DueSet(client, keyspace).schedule_many(members)
    claimed: list[list[str]] = [[] for _ in range(4)]
    # Every thread claims once before any claims again: on a loaded machine the first thread started
    # could otherwise drain all 4,000 before the others connect, and nothing would compete.
    first_claims_done = threading.Barrier(4, timeout=30)

    def drain(slot: int) -> None:
        connection = redis.Redis.from_url(redis_url)
        own = DueSet(connection, keyspace)
        try:
            items = own.claim_due(now=1_000.0, limit=25).items
            first_claims_done.wait()
            while items:
                claimed[slot].extend(item.member for item in items)
                items = own.claim_due(now=1_000.0, limit=25).items
        finally:
            connection.close()

    threads = [threading.Thread(target=drain, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    everything = [member for part in claimed for member in part]
    assert len(everything) == len(members) and set(everything) == set(members)
    assert all(claimed)  # all four really competed


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
    assert calls == [["r"], ["r"]] and due.count() == 0 and due.claimed() == 0


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


_DYING_WAKER = """
import os, sys
from engine.transport.connection import redis_client
from engine.transport.due import DueSet, DueWaker
from engine.transport.keys import Keyspace
url, prefix = sys.argv[1], sys.argv[2]
DueWaker(DueSet(redis_client(url), Keyspace(prefix)), lambda items: os._exit(9), hold=1.0).start()
print("ready", flush=True)
sys.stdin.readline()
"""


def test_members_claimed_by_a_waker_that_died_are_delivered_by_another(
    client: redis.Redis, keyspace: Keyspace, redis_url: str
) -> None:
    """A waker process dies between its claim and its delivery (as a host killed or cut off mid-claim); a waker
    that was running all along, and never restarts, delivers the members once the claim lapses."""
    dying = subprocess.Popen([sys.executable, "-c", _DYING_WAKER, redis_url, keyspace.prefix],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert dying.stdout is not None and dying.stdout.readline().strip() == "ready"
        due = DueSet(client, keyspace)
        due.schedule_many({"parked-1": time.time(), "parked-2": time.time()})
        assert dying.wait(timeout=10) == 9  # it claimed both, then died before it delivered them
    finally:
        dying.kill()
        dying.wait()
    assert due.count() == 0 and due.claimed() == 2
    delivered: list[str] = []
    waker = DueWaker(due, lambda items: delivered.extend(item.member for item in items)).start()
    try:
        assert _wait_for(lambda: sorted(delivered) == ["parked-1", "parked-2"], within=10.0), delivered
        assert due.claimed() == 0
    finally:
        waker.stop()
