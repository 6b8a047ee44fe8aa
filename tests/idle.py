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

from engine.runtime.projection import BatchResult
from engine.runtime.services import EngineServices


class ProjectorTally:
    """A batch listener counting the event messages the projector handled; registered last, it runs after
    the trigger and callback listeners have queued what a batch gave them."""

    def __init__(self) -> None:
        self.messages = 0
        self._lock = threading.Lock()

    def __call__(self, result: BatchResult) -> None:
        with self._lock:
            self.messages += result.applied + result.duplicates + result.dead


def _added(client: redis.Redis, stream: str) -> int:
    info: Any = client.xinfo_stream(stream)
    return int(info["entries-added"])


def _drained(client: redis.Redis, stream: str, group: str) -> bool:
    """Every message of `stream` delivered to `group` and acknowledged."""
    info: Any = client.xinfo_stream(stream)
    groups: Any = client.xinfo_groups(stream)
    [found] = [g for g in groups if g["name"] in (group, group.encode())]
    return bool(found["pending"] == 0 and found["last-delivered-id"] == info["last-generated-id"])


class Idle:
    """Installed on started services before anything runs (the tally must see every event)."""

    def __init__(self, services: EngineServices) -> None:
        assert services.projector is not None, "the idle signal needs the projector in this process"
        self.services = services
        self.client = services._api().client
        assert _added(self.client, services.keys.events) == 0, "install Idle before the first event"
        self.tally = ProjectorTally()
        services.batch_listeners.append(self.tally)

    def _quiet(self) -> bool:
        keys, triggers = self.services.keys, self.services.triggers
        return (_drained(self.client, keys.jobs, keys.jobs_group)
                and not any(worker.active or worker.holding for worker in self.services.workers)
                and self.tally.messages >= _added(self.client, keys.events)
                and (triggers is None or (triggers.events.pending.unfinished_tasks == 0
                                          and triggers.callbacks.pending.unfinished_tasks == 0))
                and not any(t.name == "lockgate-callback-late" and t.is_alive() for t in threading.enumerate()))

    def wait(self, timeout: float = 10.0) -> None:
        """Return once the engine is idle; fails after `timeout` seconds (a hang guard)."""
        keys = self.services.keys
        deadline = time.monotonic() + timeout
        while True:
            before = (_added(self.client, keys.jobs), _added(self.client, keys.events))
            if self._quiet() and before == (_added(self.client, keys.jobs), _added(self.client, keys.events)):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the engine was still busy after {timeout:g}s")
            time.sleep(0.01)
