"""Which engine processes are up, on which hosts: one Redis entry per process with a TTL, refreshed with every
heartbeat, so `lockgate admin status` can list them and a dead process drops off on its own."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis

from engine.transport.keys import Keyspace

ENTRY_TTL_SECONDS = 10
"""A process not seen for this long drops off the list (heartbeats come every 2 s)."""


@dataclass(frozen=True)
class ProcessSeen:
    host: str
    pid: int
    role: str
    workers: int
    started_at: float
    seen_at: float


@dataclass
class ProcessEntry:
    """This process's entry."""

    role: str
    workers: int
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    started_at: float = field(default_factory=time.time)

    def refresh(self, client: Any, keys: Keyspace) -> None:
        """Write the entry (`client` may be a pipeline; the caller executes it)."""
        seen = ProcessSeen(self.host, self.pid, self.role, self.workers, self.started_at, time.time())
        client.set(keys.process_entry(self.host, self.pid), orjson.dumps(seen.__dict__), ex=ENTRY_TTL_SECONDS)

    def forget(self, client: redis.Redis, keys: Keyspace) -> None:
        client.delete(keys.process_entry(self.host, self.pid))


def processes_seen(client: redis.Redis, keys: Keyspace) -> list[ProcessSeen]:
    """Every process whose entry has not lapsed, by host then pid."""
    names = sorted(client.scan_iter(match=keys.process_entries, count=500))
    found: list[ProcessSeen] = []
    for raw in client.mget(names) if names else []:
        if raw:
            data = orjson.loads(raw)
            found.append(ProcessSeen(str(data["host"]), int(data["pid"]), str(data["role"]), int(data["workers"]),
                                     float(data["started_at"]), float(data["seen_at"])))
    return sorted(found, key=lambda p: (p.host, p.pid))
