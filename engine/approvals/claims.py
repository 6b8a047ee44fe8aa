"""The one decision of an approval: claimed once in Redis, by a person, a key, or the timeout.

A v1 approval (`required: 1`) is decided by its first vote. A quorum counts votes of distinct approvers in
one Lua script (`cast_vote`): a vote by an approver who already voted is refused, the first rejection
decides `rejected`, and the approval that brings the count to `required` decides `approved`. The script
sets the decision key itself, so exactly one vote (or the timeout's SET NX) decides, however many race.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

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


# KEYS[1] decision, KEYS[2] votes hash; ARGV: actor, verdict, vote JSON, required, ttl, decision JSON.
# Returns {outcome, detail, approved count}: decided (detail: the decision already made), duplicate (the
# actor's earlier vote), counted (quorum not yet reached), completed (this vote decided). `#order:<actor>` keeps
# the order votes were cast in: votes cast in one clock tick share `decided_at`, and hosts' clocks differ.
_CAST_VOTE = """
local decided = redis.call('GET', KEYS[1])
if decided then return {'decided', decided, tonumber(redis.call('HGET', KEYS[2], '#approved') or '0')} end
local earlier = redis.call('HGET', KEYS[2], ARGV[1])
if earlier then return {'duplicate', earlier, tonumber(redis.call('HGET', KEYS[2], '#approved') or '0')} end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], '#order:' .. ARGV[1], redis.call('HINCRBY', KEYS[2], '#cast', 1))
local approved = 0
if ARGV[2] == 'approved' then
  approved = redis.call('HINCRBY', KEYS[2], '#approved', 1)
else
  approved = tonumber(redis.call('HGET', KEYS[2], '#approved') or '0')
end
redis.call('EXPIRE', KEYS[2], ARGV[5])
if ARGV[2] == 'rejected' or approved >= tonumber(ARGV[4]) then
  redis.call('SET', KEYS[1], ARGV[6], 'EX', ARGV[5])
  return {'completed', ARGV[6], approved}
end
return {'counted', '', approved}
"""

VoteOutcome = Literal["decided", "duplicate", "counted", "completed"]


class Vote(NamedTuple):
    outcome: VoteOutcome
    claim: Claim | None
    """`decided`/`completed`: the approval's decision; `duplicate`: the actor's earlier vote."""
    approved: int
    """Approvals counted so far."""


def cast_vote(client: Any, keys: Keyspace, approval_id: str, claim: Claim, required: int) -> Vote:
    """Count `claim` as one approver's vote towards a quorum of `required`; see the module's docstring."""
    text = orjson.dumps(asdict(claim))
    outcome, detail, approved = client.eval(_CAST_VOTE, 2, keys.approval_decision(approval_id),
                                            keys.approval_votes(approval_id), claim.decided_by, claim.decision,
                                            text, max(1, required), CLAIM_TTL_SECONDS, text)
    name = outcome.decode() if isinstance(outcome, bytes) else str(outcome)
    found = Claim(**orjson.loads(detail)) if detail else None
    return Vote(name, found, int(approved))  # type: ignore[arg-type]


def read_votes(client: Any, keys: Keyspace, approval_id: str) -> list[Claim]:
    """Every vote cast so far, earliest first."""
    raw = {(field.decode() if isinstance(field, bytes) else field): value
           for field, value in client.hgetall(keys.approval_votes(approval_id)).items()}
    votes = [(Claim(**orjson.loads(value)), int(raw.get(f"#order:{field}", 0)))
             for field, value in raw.items() if not field.startswith("#")]
    return [vote for vote, _ in sorted(votes, key=lambda pair: (pair[1], pair[0].decided_at))]


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
