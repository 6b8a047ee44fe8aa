"""What the engine's Python API needs in hand: Redis, its keyspace, the SQL engine, the clock, the secret box."""

from __future__ import annotations

from dataclasses import dataclass, field

import redis
import sqlalchemy as sa

from engine.clock import Clock, SystemClock
from engine.config import InputLimits
from engine.runtime.run_records import RunRecords
from engine.secret_box import SecretBox
from engine.transport.held import HeldConnection
from engine.transport.keys import Keyspace


@dataclass(frozen=True)
class EngineHandles:
    client: redis.Redis
    keys: Keyspace
    sql: sa.Engine
    clock: Clock = field(default_factory=SystemClock)
    box: SecretBox | None = None
    """Seals secret inputs for Redis; None where no run is created (a run with secrets is then refused)."""
    limits: InputLimits = field(default_factory=InputLimits)
    """How large a run's inputs (and callback bodies) may be: the engine's `LOCKGATE_MAX_INPUT_*` settings."""
    held: HeldConnection = field(init=False, repr=False, compare=False)
    """Each calling thread's own connection to `client`'s server, for the round trip of every run start."""
    run_records: RunRecords = field(init=False, repr=False, compare=False)
    """New run records, committed together for the run starts that arrive while one commits."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "held", HeldConnection(self.client))
        object.__setattr__(self, "run_records", RunRecords(self.sql))
