"""What resumed a `wait.callback` node: claimed once in Redis (SET NX), by the first POST or by the timeout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson
import redis

from engine.transport.keys import Keyspace

CLAIM_TTL_SECONDS = 8 * 24 * 3600
"""Longer than any run may wait (max_wait), so the winner stays known to late POSTs."""

CallbackOutcomeKind = Literal["received", "timed_out"]


@dataclass(frozen=True)
class CallbackClaim:
    """The one thing that resumed a callback node: a body received at `at`, or the timeout at `at`."""

    outcome: CallbackOutcomeKind
    at: float
    body: Any = None

    @property
    def port(self) -> str:
        return self.outcome


def encode_claim(claim: CallbackClaim) -> bytes:
    return orjson.dumps({"outcome": claim.outcome, "at": claim.at, "body": claim.body})


def decode_claim(raw: bytes) -> CallbackClaim:
    data = orjson.loads(raw)
    return CallbackClaim(data["outcome"], float(data["at"]), data.get("body"))


def claim_callback(client: redis.Redis, keys: Keyspace, run_id: str, node: str, claim: CallbackClaim) -> bool:
    """True when `claim` won; False when something claimed the node first."""
    return bool(client.set(keys.callback_claim(run_id, node), encode_claim(claim), nx=True, ex=CLAIM_TTL_SECONDS))


def read_callback_claim(client: redis.Redis, keys: Keyspace, run_id: str, node: str) -> CallbackClaim | None:
    raw: bytes | None = client.get(keys.callback_claim(run_id, node))  # type: ignore[assignment]
    return decode_claim(raw) if raw is not None else None


def settle_on_resume(client: redis.Redis, keys: Keyspace, run_id: str, node: str, now: float) -> CallbackClaim:
    """The node's outcome when its run resumes: the POST that claimed it, or (none yet) its timeout."""
    timeout = CallbackClaim("timed_out", now)
    if claim_callback(client, keys, run_id, node, timeout):
        return timeout
    return read_callback_claim(client, keys, run_id, node) or timeout
