"""What the engine's Python API needs in hand: Redis, its keyspace, the SQL engine and the clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import redis
import sqlalchemy as sa

from engine.clock import Clock, SystemClock
from engine.transport.keys import Keyspace


@dataclass(frozen=True)
class EngineHandles:
    client: redis.Redis
    keys: Keyspace
    sql: sa.Engine
    clock: Clock = field(default_factory=SystemClock)
