"""The token arithmetic the simulator charges and the adapter estimates with (about four characters a token)."""

from __future__ import annotations

import re
from collections.abc import Iterable

MESSAGE_OVERHEAD_TOKENS = 3


def count_tokens(text: str) -> int:
    """Tokens in `text`: a quarter of its characters, rounded up, at least one for non-empty text."""
    return (len(text) + 3) // 4


def prompt_tokens(contents: Iterable[str]) -> int:
    """Tokens of a chat prompt: each message's text plus a fixed per-message overhead."""
    return sum(count_tokens(text) + MESSAGE_OVERHEAD_TOKENS for text in contents)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_reset(value: str | None) -> float | None:
    """Seconds from a rate-limit reset header: `1s`, `250ms`, `6m0s`, `1h2m3.5s` or bare seconds; None if unreadable."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    total = 0.0
    position = 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        number, unit = float(match.group(1)), match.group(2)
        total += number * {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}[unit]
        position = match.end()
    return total if position == len(text) else None


def format_reset(seconds: float) -> str:
    """A reset duration the way OpenAI writes it: `250ms`, `1.5s`, `6m0s`."""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.3f}".rstrip("0").rstrip(".") + "s"
