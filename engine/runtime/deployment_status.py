"""What `lockgate admin status` reports about a shared deployment: the processes and hosts seen, the projector
lease, stream lag, pending and dead jobs, parked runs by reason and the schema, as one typed read model."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import redis
import sqlalchemy as sa

from engine.runtime.process_registry import ProcessSeen, processes_seen
from engine.runtime.projector import LEASE_SECONDS
from engine.store.db import reading
from engine.store.models import DeadLetter, Run
from engine.store.schema_check import SchemaState, schema_state
from engine.transport.keys import Keyspace


@dataclass(frozen=True)
class LeaseSeen:
    holder: str | None
    """`host:pid:nonce` of the active projector (None: no projector holds the lease)."""
    renewed_seconds_ago: float | None
    """Since its holder last renewed it (the lease lapses `LEASE_SECONDS` after that)."""


@dataclass(frozen=True)
class StreamSeen:
    stream: str
    length: int
    lag: int | None
    """Entries not yet delivered to the group (None when the server does not say)."""
    pending: int
    """Delivered to the group and not yet acknowledged."""


@dataclass(frozen=True)
class DeploymentStatus:
    processes: list[ProcessSeen]
    hosts: list[str]
    """Hosts with a live engine process or a worker consumer name in use."""
    worker_names: list[str]
    """Worker consumer names (`<host>:w<n>`) whose slot is held."""
    lease: LeaseSeen
    jobs: StreamSeen
    events: StreamSeen
    dead_jobs: int
    dead_events: int
    runs_by_status: dict[str, int]
    parked_by_reason: dict[str, int]
    schema: SchemaState

    def to_data(self) -> dict[str, Any]:
        return asdict(self)


def _stream(client: redis.Redis, stream: str, group: str) -> StreamSeen:
    length = int(client.xlen(stream))
    try:
        groups: Any = client.xinfo_groups(stream)
    except redis.ResponseError:  # no such stream yet
        return StreamSeen(stream, length, None, 0)
    found = next((g for g in groups if g["name"] in (group, group.encode())), None)
    if found is None:
        return StreamSeen(stream, length, None, 0)
    lag = found.get("lag")
    return StreamSeen(stream, length, int(lag) if lag is not None else None, int(found["pending"]))


def _lease(client: redis.Redis, keys: Keyspace) -> LeaseSeen:
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.projector_lease)
    pipe.pttl(keys.projector_lease)
    holder, ttl_ms = pipe.execute()
    if holder is None:
        return LeaseSeen(None, None)
    ago = max(0.0, LEASE_SECONDS - int(ttl_ms) / 1000) if int(ttl_ms) >= 0 else None
    return LeaseSeen(holder.decode(), round(ago, 3) if ago is not None else None)


def _worker_names(client: redis.Redis, keys: Keyspace) -> list[str]:
    names = []
    prefix = keys.consumer_slots[:-1]
    for key in client.scan_iter(match=keys.consumer_slots, count=500):
        host, _, index = key.decode()[len(prefix):].rpartition(":")
        names.append(f"{host}:w{index}")
    return sorted(names)


def deployment_status(client: redis.Redis, keys: Keyspace, sql: sa.Engine) -> DeploymentStatus:
    processes = processes_seen(client, keys)
    workers = _worker_names(client, keys)
    hosts = sorted({p.host for p in processes} | {name.rpartition(":w")[0] for name in workers})
    with reading(sql) as conn:
        by_status = {str(status): int(count) for status, count in
                     conn.execute(sa.select(Run.status, sa.func.count()).group_by(Run.status))}
        parked = Counter(str((waiting or {}).get("reason") or "unknown") for (waiting,) in
                         conn.execute(sa.select(Run.waiting_on).where(Run.status == "waiting")))
        dead_events = int(conn.execute(sa.select(sa.func.count()).select_from(DeadLetter)).scalar_one())
    return DeploymentStatus(
        processes=processes, hosts=hosts, worker_names=workers, lease=_lease(client, keys),
        jobs=_stream(client, keys.jobs, keys.jobs_group), events=_stream(client, keys.events, keys.events_group),
        dead_jobs=int(client.xlen(keys.jobs_dead)), dead_events=dead_events, runs_by_status=by_status,
        parked_by_reason=dict(sorted(parked.items())), schema=schema_state(sql))
