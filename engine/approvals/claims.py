"""The one decision of an approval: claimed once in Redis (SET NX), by a person, a key, or the timeout."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import orjson

from engine.transport.keys import Keyspace

CLAIM_TTL_SECONDS = 8 * 24 * 3600
"""Longer than any approval may wait (max_wait), so the winner stays known to late attempts."""
TIMEOUT_ACTOR = "timeout"

Verdict = Literal["approved", "rejected"]


@dataclass(frozen=True)
class Claim:
    decision: Verdict
    decided_by: str
    comment: str
    decided_at: float

    @property
    def port(self) -> str:
        return self.decision


def claim_decision(client: Any, keys: Keyspace, approval_id: str, claim: Claim) -> bool:
    """True when `claim` won; False when another decision was claimed first."""
    return bool(client.set(keys.approval_decision(approval_id), orjson.dumps(asdict(claim)), nx=True,
                           ex=CLAIM_TTL_SECONDS))


def read_claim(client: Any, keys: Keyspace, approval_id: str) -> Claim | None:
    raw = client.get(keys.approval_decision(approval_id))
    return Claim(**orjson.loads(raw)) if raw is not None else None


def settle_on_resume(client: Any, keys: Keyspace, approval_id: str, now: float) -> tuple[Claim, bool]:
    """The approval's decision when its run resumes: the claimed one, or (none yet) rejection by timeout.

    Returns (claim, True when this call claimed the timeout)."""
    timeout = Claim("rejected", TIMEOUT_ACTOR, "no decision before the approval's timeout", now)
    if claim_decision(client, keys, approval_id, timeout):
        return timeout, True
    found = read_claim(client, keys, approval_id)
    return (found, False) if found is not None else (timeout, False)
