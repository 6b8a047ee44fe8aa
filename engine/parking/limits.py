"""How long a run may wait: `max_wait` from its first park, `suspended_step_timeout` per suspended step.

A `queue` delay, an approval timeout and a `wait.callback` timeout are bounded by `max_delay` at publish, an overspend
approval by its own timeout, and a retry's backoff by `max_interval` and validation, so they are
exempt from the suspended-step limit; every park is bounded by `max_wait` (72h from the first
park, or for a run created in async mode from its acceptance: its time queued counts as waiting
too). A suspended step's limit counts from the step's first park: a step that parks again on the
same node (a background call's polls, pool waits) keeps its clock; another node, or a wait of its
own timer in between, starts a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.catalog import RETRY_PARK_REASON
from engine.durations import parse_duration
from engine.flow import FlowSettings

DEFAULT_MAX_WAIT = "72h"
DEFAULT_SUSPENDED_STEP_TIMEOUT = "24h"
OWN_TIMER_REASONS = frozenset({"queue_delay", "approval", "overspend_approval", "callback", RETRY_PARK_REASON})
"""Park reasons whose due time is their own bounded timer, not a suspended step."""

WakeKind = str
"""`due` (resume normally), `parked_expired` or `suspended_step_timeout` (fail the run)."""


@dataclass(frozen=True)
class WaitLimits:
    max_wait: float
    suspended_step_timeout: float

    @classmethod
    def of(cls, settings: FlowSettings) -> WaitLimits:
        return cls(parse_duration(settings.max_wait or DEFAULT_MAX_WAIT),
                   parse_duration(settings.suspended_step_timeout or DEFAULT_SUSPENDED_STEP_TIMEOUT))


def max_wait_start(first_parked_at: float, accepted_at: float | None) -> float:
    """Where `max_wait` counts from: acceptance for an async run, else the first park."""
    return accepted_at if accepted_at is not None else first_parked_at


def queued_expired(accepted_at: float | None, now: float, limits: WaitLimits) -> bool:
    """True when an async run still queued at `now` has used up its `max_wait` before starting."""
    return accepted_at is not None and now >= accepted_at + limits.max_wait


def step_suspended_since(previous: dict[str, Any] | None, node: str | None, reason: str, now: float) -> float:
    """When the step parking now first parked: kept while the same node parks again on a wait that is
    not its own timer (each poll of a background call re-parks), else `now`."""
    if previous is None or node is None or previous.get("parked_node") != node:
        return now
    if reason in OWN_TIMER_REASONS or previous.get("reason") in OWN_TIMER_REASONS:
        return now
    since = previous.get("step_parked_at", previous.get("parked_at"))
    return float(since) if since is not None else now


def park_record(previous: dict[str, Any] | None, reason: str, due_at: float | None, now: float,
                limits: WaitLimits, accepted_at: float | None = None, node: str | None = None) -> dict[str, Any]:
    """Fields sealed into a parked run's checkpoint: when it parked, when it wakes and why.

    `first_parked_at` carries over from the previous checkpoint, so `max_wait` counts all parks;
    `accepted_at` (async runs only) moves the start of `max_wait` back to the run's acceptance.
    `step_parked_at` is when the step parked on `node` first (`step_suspended_since`), where
    `suspended_step_timeout` counts from. The wake is the earliest of the park's own due time and
    the limits; on a tie the park's own due time wins (a queue due exactly at the deadline still
    resumes).
    """
    first = previous.get("first_parked_at") if previous else None
    first_parked_at = float(first) if first is not None else now
    step_parked_at = step_suspended_since(previous, node, reason, now)
    deadline = max_wait_start(first_parked_at, accepted_at) + limits.max_wait
    candidates: list[tuple[float, int, WakeKind]] = [(deadline, 1, "parked_expired")]
    if due_at is not None:
        candidates.append((due_at, 0, "due"))
    if reason not in OWN_TIMER_REASONS:
        candidates.append((step_parked_at + limits.suspended_step_timeout, 2, "suspended_step_timeout"))
    wake_at, _rank, wake_kind = min(candidates)
    return {"parked_at": now, "first_parked_at": first_parked_at, "step_parked_at": step_parked_at,
            "reason": reason, "due_at": due_at, "wake_at": wake_at, "wake_kind": wake_kind}


def park_token(checkpoint: dict[str, Any]) -> str:
    """Names one park of a run: its node and the sequence of its last event before parking."""
    return f"{checkpoint.get('parked_node')}#{checkpoint.get('seq')}"


def expiry_message(checkpoint: dict[str, Any], limits_text: str) -> str:
    node = checkpoint.get("parked_node")
    if checkpoint.get("wake_kind") == "suspended_step_timeout":
        return (f'node "{node}" stayed suspended past suspended_step_timeout ({limits_text}) counted from its '
                "first park; the run failed. Raise settings.suspended_step_timeout or make the step finish sooner")
    job = checkpoint.get("job") or {}
    start = "its acceptance (async run)" if job.get("accepted_at") is not None else "its first park"
    return (f'the run waited past max_wait ({limits_text}) counted from {start}, at node "{node}"; '
            "it failed with parked_expired. Shorten the flow's waits or raise settings.max_wait")


def queued_expiry_message(limits_text: str, trigger: str) -> str:
    return (f"the async run stayed queued past max_wait ({limits_text}) counted from its acceptance, before "
            f'its trigger node "{trigger}" started; it failed with parked_expired. Run more workers, start '
            "the engine sooner, or raise settings.max_wait")
