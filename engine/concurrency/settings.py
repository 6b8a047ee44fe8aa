"""Tuning of the concurrency control loop and of the call slots it governs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AimdSettings:
    """How the global cap on concurrent model calls moves, and what workers use when the loop is gone."""

    static_cap: int = 8
    """Cap workers use when the cap key has expired (the control loop stopped)."""
    ceiling: int = 64
    """Configured ceiling: the cap never goes above it."""
    min_cap: int = 1
    increase: int = 1
    """Additive increase per tick while below the target."""
    decrease_factor: float = 0.5
    """Multiplicative decrease: above the target, and at once on a 429."""
    cap_ttl_seconds: float = 15.0
    """Life of the cap key; a loop that stops ticking lets it expire."""
    cut_cooldown_seconds: float = 1.0
    """At most one 429 cut per this many seconds: a burst of 429s from one overload is one signal."""
    telemetry_fresh_seconds: float = 30.0
    """Rate-limit telemetry older than this no longer bounds the provider limit."""
    tick_seconds: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_cap <= self.static_cap <= self.ceiling:
            raise ValueError(f"concurrency settings need 1 <= min_cap ({self.min_cap}) <= static_cap "
                             f"({self.static_cap}) <= ceiling ({self.ceiling}); adjust them")
        if not 0 < self.decrease_factor < 1:
            raise ValueError(f"decrease_factor {self.decrease_factor} must be between 0 and 1 (e.g. 0.5)")
        if self.increase < 1 or self.cap_ttl_seconds <= 0 or self.tick_seconds <= 0:
            raise ValueError("increase must be 1 or more, cap_ttl_seconds and tick_seconds above 0")
