"""A positive signal that an in-process engine has nothing more under way, for tests asserting that
something did not happen: every job message taken and acknowledged and no worker still finishing one (a
park goes on the due set after its ack), every event applied and passed to the batch listeners, the
event-trigger and callback queues handled, no late callback thread alive, and no message added to either
stream while that was checked."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis

from engine.host import EngineServices


def _last_id(client: redis.Redis, stream: str) -> str:
    info: Any = client.xinfo_stream(stream)
    last = info["last-generated-id"]
    return last.decode() if isinstance(last, bytes) else str(last)


def _drained(client: redis.Redis, stream: str, group: str) -> bool:
    """Every message of `stream` delivered to `group` and acknowledged."""
    groups: Any = client.xinfo_groups(stream)
    [found] = [g for g in groups if g["name"] in (group, group.encode())]
    delivered = found["last-delivered-id"]
    delivered = delivered.decode() if isinstance(delivered, bytes) else str(delivered)
    return bool(found["pending"] == 0 and delivered == _last_id(client, stream))


class Idle:
    """Install it on started services before they are given work: an event this process's projector applied
    before then may still be passing through its listeners unseen."""

    def __init__(self, services: EngineServices) -> None:
        assert services.projector is not None, "the idle signal needs the projector in this process"
        self.services = services
        self.projector = services.projector
        self.client = services.require_handles().client
        keys = services.keys
        drained = _drained(self.client, keys.events, keys.events_group)
        self.initial_event = _last_id(self.client, keys.events) if drained else None
        """The events stream's end when nothing was left to apply at install: idle while no event came since."""

    def _quiet(self) -> bool:
        keys, triggers = self.services.keys, self.services.triggers
        last_event = _last_id(self.client, keys.events)
        return (_drained(self.client, keys.jobs, keys.jobs_group)
                and not any(worker.active or worker.holding for worker in self.services.workers)
                and _drained(self.client, keys.events, keys.events_group)
                and last_event in (self.projector.done_through, self.initial_event)
                and (triggers is None or (triggers.events.changes.unfinished == 0
                                          and triggers.callbacks.pending.unfinished_tasks == 0))
                and not any(t.name == "lockgate-callback-late" and t.is_alive() for t in threading.enumerate()))

    def wait(self, timeout: float = 10.0) -> None:
        """Return once the engine is idle; fails after `timeout` seconds (a hang guard)."""
        keys = self.services.keys
        deadline = time.monotonic() + timeout
        while True:
            before = (_last_id(self.client, keys.jobs), _last_id(self.client, keys.events))
            if self._quiet() and before == (_last_id(self.client, keys.jobs), _last_id(self.client, keys.events)):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the engine was still busy after {timeout:g}s")
            time.sleep(0.01)
