"""What a run's money steps must remember across parks: its holds, pool waits, background call, approval.

One Redis hash per run (`<prefix>:run:<id>:money`), written by the worker that runs the step and
read by the one that resumes it; the janitor reads `placed:*` to return whatever a finished run
still holds, then deletes the hash.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import redis

from engine.providers.base import BackgroundCall
from engine.transport.keys import Keyspace

STATE_TTL_SECONDS = 8 * 24 * 3600
"""Longer than any run may wait (72h), so a forgotten hash still goes away."""


@dataclass
class HoldPlan:
    """The hold a `budget.reserve` placed for its model node, and how to place it again after a return."""

    hold_id: str
    budget: str
    amount_usd: str
    ttl_seconds: float
    reserve_node: str


@dataclass
class ModelProgress:
    """An `ai.model` step in progress: pool waits so far, a running background call, an overspend approval."""

    pool_waits: int = 0
    first_park_at: float | None = None
    background: dict[str, Any] | None = None
    approval_id: str | None = None
    approved: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def background_call(self) -> BackgroundCall | None:
        return BackgroundCall(**self.background) if self.background else None

    def set_background(self, call: BackgroundCall | None) -> None:
        self.background = None if call is None else {k: v for k, v in asdict(call).items() if k != "immediate"}


class RunMoneyState:
    """The per-run money hash."""

    def __init__(self, client: redis.Redis, keys: Keyspace) -> None:
        self._redis = client
        self._keys = keys

    def key(self, run_id: str) -> str:
        return f"{self._keys.prefix}:run:{run_id}:money"

    def next_hold_id(self, run_id: str) -> str:
        """A new hold id of this run (1-64 characters, as the ledger and `holds.id` need)."""
        number = self._redis.hincrby(self.key(run_id), "hold_seq", 1)
        self._redis.expire(self.key(run_id), STATE_TTL_SECONDS)
        return f"h{run_id[:48]}.{number}"

    def hold_plan(self, run_id: str, model_node: str) -> HoldPlan | None:
        raw = self._redis.hget(self.key(run_id), f"hold:{model_node}")
        return HoldPlan(**orjson.loads(raw)) if raw else None

    def save_hold_plan(self, run_id: str, model_node: str, plan: HoldPlan) -> None:
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(self.key(run_id), mapping={f"hold:{model_node}": orjson.dumps(asdict(plan)),
                                             f"placed:{plan.hold_id}": model_node})
        pipe.expire(self.key(run_id), STATE_TTL_SECONDS)
        pipe.execute()

    def progress(self, run_id: str, model_node: str) -> ModelProgress:
        raw = self._redis.hget(self.key(run_id), f"model:{model_node}")
        return ModelProgress(**orjson.loads(raw)) if raw else ModelProgress()

    def save_progress(self, run_id: str, model_node: str, progress: ModelProgress) -> None:
        self._redis.hset(self.key(run_id), f"model:{model_node}", orjson.dumps(asdict(progress)))
        self._redis.expire(self.key(run_id), STATE_TTL_SECONDS)

    def clear_progress(self, run_id: str, model_node: str) -> None:
        self._redis.hdel(self.key(run_id), f"model:{model_node}")

    def placed_hold_ids(self, run_id: str) -> dict[str, str]:
        """hold id -> node of every hold this run ever placed (the ledger says which are still placed)."""
        return _placed(self._redis.hgetall(self.key(run_id)))

    def placed_hold_ids_of(self, run_ids: list[str]) -> dict[str, dict[str, str]]:
        """`placed_hold_ids` of several runs in one round trip; a run with no money state at all is absent."""
        pipe = self._redis.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.hgetall(self.key(run_id))
        return {run_id: _placed(raw) for run_id, raw in zip(run_ids, pipe.execute(), strict=True) if raw}

    def forget_all(self, run_ids: list[str]) -> None:
        if run_ids:
            self._redis.delete(*(self.key(run_id) for run_id in run_ids))

    def forget(self, run_id: str) -> None:
        self._redis.delete(self.key(run_id))


def _placed(raw: dict[Any, Any]) -> dict[str, str]:
    holds: dict[str, str] = {}
    for name, value in raw.items():
        text = name.decode() if isinstance(name, bytes) else str(name)
        if text.startswith("placed:"):
            holds[text[len("placed:"):]] = value.decode() if isinstance(value, bytes) else str(value)
    return holds
