"""The `overspend` policy of an `ai.model` node: what to do when a call's cost estimate exceeds its hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.money.amounts import format_usd

OverspendPolicy = Literal["fail", "allow", "approve"]
OverspendAction = Literal["call", "fail", "ask_approval"]


@dataclass(frozen=True)
class OverspendCheck:
    """`call` the provider, `fail` the step, or `ask_approval` (park with `overspend_approval`, hold returned)."""

    action: OverspendAction
    estimate_micros: int
    covered_micros: int | None
    message: str = ""

    @property
    def excess_micros(self) -> int:
        return 0 if self.covered_micros is None else max(0, self.estimate_micros - self.covered_micros)


def check_overspend(estimate_micros: int, covered_micros: int | None, policy: OverspendPolicy, *,
                    node_id: str = "", approved: bool = False) -> OverspendCheck:
    """Decide before a call; `covered_micros` is the hold's amount (None: no budget governs this call)."""
    if covered_micros is None or estimate_micros <= covered_micros:
        return OverspendCheck("call", estimate_micros, covered_micros)
    what = f'node "{node_id}" (ai.model)' if node_id else "the model call"
    over = (f"{what}: the call may cost up to {format_usd(estimate_micros)}, above its hold of "
            f"{format_usd(covered_micros)}")
    if policy == "allow" or approved:
        return OverspendCheck("call", estimate_micros, covered_micros,
                              over + ("; approved" if approved else "; overspend: allow"))
    if policy == "approve":
        return OverspendCheck("ask_approval", estimate_micros, covered_micros, over + "; waiting for approval")
    return OverspendCheck("fail", estimate_micros, covered_micros,
                          over + "; reserve more, lower max_tokens, or set overspend to approve or allow")
