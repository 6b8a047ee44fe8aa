"""Stable worker consumer names, so a process restarting on a host picks up its predecessor's jobs at once.

Worker consumers are named `<host>:w<index>`. A process takes the lowest indexes whose slot
(`Keyspace.consumer_slot`) is free: never taken, lapsed (its TTL is refreshed with every heartbeat), or held
by a process of this host that no longer exists. Whatever that name still has pending was delivered to a dead
process, so it is reclaimed (`Reclaimer`: redelivered as the next attempt, which fences the old one) before
this process reads a single new job. A restart therefore recovers in the time it takes to start, not after
the reaper's idle threshold.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

import redis

from engine.runtime.reclaim import RECLAIMER_CONSUMER, Reclaimed, Reclaimer
from engine.transport.keys import Keyspace

log = logging.getLogger("lockgate.consumers")

SLOT_TTL_SECONDS = 30
MAX_SLOTS = 1024
DRAIN_BATCH = 100

# KEYS[1] slot; ARGV[1] the holder seen (empty: none), ARGV[2] new holder, ARGV[3] ttl seconds.
_TAKE = """
local seen = redis.call('GET', KEYS[1])
if (seen or '') ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
"""

# KEYS: slots; ARGV[1] holder, ARGV[2] ttl. Refreshes only the slots this holder still has.
_REFRESH = """
local kept = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('EXPIRE', KEYS[i], ARGV[2])
    kept = kept + 1
  end
end
return kept
"""

_RELEASE = """
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
  end
end
return 1
"""


def _process_gone(holder: str) -> bool:
    pid_text = holder.partition(":")[0]
    if not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class ConsumerSlots:
    """The consumer names this process holds on one host, and their upkeep."""

    def __init__(self, client: redis.Redis, keys: Keyspace, host: str | None = None) -> None:
        self.client = client
        self.keys = keys
        self.host = host or socket.gethostname()
        self.holder = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.indexes: list[int] = []
        self._take = client.register_script(_TAKE)
        self._refresh = client.register_script(_REFRESH)
        self._release = client.register_script(_RELEASE)

    def name(self, index: int) -> str:
        return f"{self.host}:w{index}"

    def acquire(self, count: int) -> list[str]:
        """Take `count` consumer names; returns them in order."""
        index = 0
        while len(self.indexes) < count:
            if index >= MAX_SLOTS:
                raise RuntimeError(f"no free worker consumer name on host {self.host!r} among {MAX_SLOTS}")
            key = self.keys.consumer_slot(self.host, index)
            seen_raw: Any = self.client.get(key)
            seen = seen_raw.decode() if seen_raw else ""
            if (not seen or _process_gone(seen)) and self._take(keys=[key], args=[seen, self.holder,
                                                                                 SLOT_TTL_SECONDS]):
                self.indexes.append(index)
            index += 1
        return [self.name(index) for index in self.indexes]

    def refresh(self, pipe: Any = None) -> Any:
        if self.indexes:
            return self._refresh(keys=self._slot_keys(), args=[self.holder, SLOT_TTL_SECONDS], client=pipe)
        return None

    def release(self) -> None:
        if self.indexes:
            self._release(keys=self._slot_keys(), args=[self.holder])
            self.indexes = []

    def _slot_keys(self) -> list[str]:
        return [self.keys.consumer_slot(self.host, index) for index in self.indexes]


def drain_predecessors(reclaimer: Reclaimer, names: list[str], why: str = "", counted: bool = True) -> list[Reclaimed]:
    """Reclaim every job still pending under `names` (delivered to a process that is gone, or to a worker whose
    batch Redis cut short)."""
    client, keys = reclaimer.client, reclaimer.keys
    handled: list[Reclaimed] = []
    for name in names:
        while True:
            pending: Any = client.xpending_range(keys.jobs, keys.jobs_group, min="-", max="+", count=DRAIN_BATCH,
                                                 consumername=name)
            if not pending:
                break
            ids = [entry["message_id"] for entry in pending]
            claimed: Any = client.xclaim(keys.jobs, keys.jobs_group, RECLAIMER_CONSUMER, 0, ids)
            for message_id, fields in claimed or []:
                if not fields:
                    client.xack(keys.jobs, keys.jobs_group, message_id)
                    continue
                handled.append(reclaimer.reclaim(message_id, fields, why or f"its worker {name} restarted",
                                                 counted))
            gone = set(ids) - {message_id for message_id, _fields in claimed or []}
            if gone:  # deleted from the stream while pending: nothing to redeliver
                client.xack(keys.jobs, keys.jobs_group, *gone)
    if handled:
        log.warning("reclaimed %d job(s) of %s: %s", len(handled), ", ".join(names),
                    why or "left by this host's previous worker process")
    return handled
