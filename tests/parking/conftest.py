"""Parking fixtures: engine services on a ManualClock, the machine's Redis and a fresh SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.clock import ManualClock
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.runtime.handles import EngineHandles
from tests.engine.conftest import make_flow, site, start_engine, wait_until  # noqa: F401  (site: fixture)
from tests.idle import Idle

START = 1_800_000_000.0
HOUR = 3600.0
TRIGGER = {"id": "start", "type": "trigger.manual"}


def approval_flow(flow_id: str = "gate", delay: str = "24h", timeout: str = "2h", approvers: Any = "any",
                  message: str = "Ship {{ state.item }}?") -> dict[str, Any]:
    """trigger → set → queue → approval → terminal per port (the issue's done-when flow)."""
    return make_flow(flow_id, [
        TRIGGER,
        {"id": "prepare", "type": "set", "config": {"values": {"item": "{{ 'order-7' }}"}}},
        {"id": "hold", "type": "queue", "config": {"delay": delay}},
        {"id": "ask", "type": "approval", "config": {"timeout": timeout, "approvers": approvers,
                                                      "message": message}},
        {"id": "shipped", "type": "terminal", "config": {"output": "{{ 'shipped ' ~ state.item }}"}},
        {"id": "dropped", "type": "terminal", "config": {"output": "{{ 'dropped by ' ~ state.ask.decided_by }}"}},
    ], [("start", "prepare"), ("prepare", "hold"), ("hold", "ask"), ("ask", "approved", "shipped"),
        ("ask", "rejected", "dropped")])


@dataclass
class Parked:
    """Started services on a ManualClock, with helpers to move time and wait for the store."""

    services: EngineServices
    clock: ManualClock
    idle: Idle

    @property
    def handles(self) -> EngineHandles:
        assert self.services.handles is not None
        return self.services.handles

    def publish(self, document: dict[str, Any]) -> None:
        self.services.publish_flow(flow_from_data(document))

    def start(self, flow_id: str, inputs: dict[str, Any] | None = None) -> str:
        return self.services.create_run(flow_id, inputs or {}).run_id

    def advance(self, seconds: float) -> None:
        """Move the clock and wake the due waker (nothing sleeps for real)."""
        self.clock.advance(seconds)
        assert self.services.waker is not None
        self.services.waker.due.nudge()

    def wait_status(self, run_id: str, *statuses: str, timeout: float = 10.0) -> dict[str, Any]:
        return self.services.wait_for_run(run_id, timeout=timeout, statuses=frozenset(statuses))

    def still_waiting(self, run_id: str, node: str) -> None:
        """Asserts that the run still waits at `node` once the due waker looked at the current time and the
        engine is idle (a wrongly woken run has moved by then)."""
        assert self.services.waker is not None and self.services.due is not None
        self.services.waker.deliver_due()
        self.idle.wait()
        run = self.services.get_run(run_id, with_steps=False)
        assert run is not None and run["status"] == "waiting" and run["waiting_on"]["node"] == node, run
        wake_at = self.services.due.due_at(run_id)
        assert wake_at is not None and wake_at > self.clock.now(), (wake_at, self.clock.now())

    def waiting_on(self, run_id: str, node: str, timeout: float = 10.0) -> dict[str, Any]:
        def parked_there() -> dict[str, Any] | None:
            run = self.services.get_run(run_id, with_steps=False)
            return run if run and run["status"] == "waiting" and (run["waiting_on"] or {}).get("node") == node \
                else None
        return dict(wait_until(parked_there, timeout=timeout, what=f"run {run_id} to park at {node}"))


def _parked(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> Iterator[Parked]:
    clock = ManualClock(START)
    services, _ = start_engine(tmp_path, redis_url, db_url, key_prefix, clock=clock)
    try:
        yield Parked(services, clock, Idle(services))
    finally:
        services.stop()


@pytest.fixture
def parked(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> Iterator[Parked]:
    """Services on a ManualClock with a fresh SQLite file."""
    yield from _parked(tmp_path, redis_url, sqlite_url, key_prefix)


@pytest.fixture
def parked_any_db(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> Iterator[Parked]:
    """The same on SQLite, and again on PostgreSQL where one answers."""
    yield from _parked(tmp_path, redis_url, db_url, key_prefix)
