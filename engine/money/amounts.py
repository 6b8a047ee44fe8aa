"""Money as integer micro-dollars (1 USD = 1,000,000), so sums never drift."""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

MICROS_PER_USD = 1_000_000


class AmountError(ValueError):
    """An amount of money that is not a finite number of the right sign."""


def to_decimal_usd(value: Any, what: str = "amount") -> Decimal:
    """A finite Decimal from a number or numeric string; raises `AmountError` naming `what`."""
    if isinstance(value, bool):
        raise AmountError(f"{what}: {value!r} is not a number of US dollars; give e.g. 10 or 2.50")
    if isinstance(value, float) and not math.isfinite(value):
        raise AmountError(f"{what}: {value!r} is not finite; give a number of US dollars like 10 or 2.50")
    try:
        amount = Decimal(str(value).strip()) if isinstance(value, (str, int, float, Decimal)) else None
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite():
        raise AmountError(f"{what}: {value!r} is not a number of US dollars; give e.g. 10 or 2.50")
    return amount


def usd_to_micros(value: Any, what: str = "amount", *, allow_negative: bool = False) -> int:
    """Micro-dollars from USD (half-up to the micro-dollar); refuses negatives unless allowed."""
    amount = to_decimal_usd(value, what)
    if amount < 0 and not allow_negative:
        raise AmountError(f"{what}: {value!r} is negative; amounts of money are zero or more")
    return int((amount * MICROS_PER_USD).to_integral_value(rounding=ROUND_HALF_UP))


def micros_to_usd(micros: int) -> Decimal:
    """USD as an exact Decimal."""
    return Decimal(micros) / MICROS_PER_USD


def cost_micros(tokens: int, usd_per_million_tokens: Decimal) -> int:
    """Cost of `tokens` at a per-1M-token price, rounded up: a USD price per 1M tokens is micro-dollars per token."""
    return int((Decimal(tokens) * usd_per_million_tokens).to_integral_value(rounding=ROUND_CEILING))


def format_usd(micros: int) -> str:
    """`$1.25`, or more decimals when the amount needs them (`$0.000125`)."""
    usd = micros_to_usd(micros)
    text = f"{usd:.6f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"${whole}.{frac.ljust(2, '0')}"
