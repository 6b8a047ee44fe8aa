"""The waits of a step's retry policy: one per retry, grown linearly or exponentially, capped by `max_interval`.

The executor asks for the wait before the next attempt; validation adds them all up against the flow's
`max_wait` (a retry's wait is a park, so it counts toward it).
"""

from __future__ import annotations

from engine.durations import DurationError, parse_duration
from engine.flow import RetryPolicy

INLINE_RETRY_WAIT_LIMIT = 300.0
"""Seconds a step inside a foreach may spend waiting between its attempts: it cannot park there, so the
worker waits; validation refuses a longer plan (`retry_wait_in_foreach`)."""


def wait_seconds(value: str | int | float, what: str) -> float:
    """Seconds of the retry field `what`; raises DurationError, naming it, for what does not parse or is no wait."""
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise DurationError(f"{what}: {exc}") from None
    if seconds != seconds or seconds < 0 or seconds == float("inf"):
        raise DurationError(f"{what}: {value!r} is not a wait; write e.g. \"2s\" or \"5m\"")
    return seconds


def retry_delay(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1 = the first) before the next one."""
    base = wait_seconds(policy.base_delay, "retry.base_delay")
    cap = wait_seconds(policy.max_interval, "retry.max_interval")
    if policy.backoff == "linear":
        return min(base * attempt, cap)
    return min(base * 2.0 ** (attempt - 1), cap)


def retry_delays(policy: RetryPolicy) -> list[float]:
    """Every wait of the policy, in order: `max_attempts - 1` of them."""
    return [retry_delay(policy, attempt) for attempt in range(1, policy.max_attempts)]


def total_backoff(policy: RetryPolicy) -> float:
    """Seconds a step that fails every attempt spends waiting between them."""
    return sum(retry_delays(policy))
