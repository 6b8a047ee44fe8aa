"""Durations as flow files write them: `90s`, `1h30m`, `3d`, `PT2H`, or bare seconds."""

from __future__ import annotations

import math
import re

_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}
_COMPACT = re.compile(r"(\d+(?:\.\d+)?)(ms|w|d|h|m|s)")
_ISO = re.compile(
    r"P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


class DurationError(ValueError):
    """A duration that does not parse."""


def parse_duration(value: object) -> float:
    """Seconds in `value`; raises DurationError naming the accepted forms (NaN and infinities are refused)."""
    try:
        seconds = _seconds(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise DurationError(f"{_shown(value)} is not a finite duration; write e.g. \"90s\", \"1h30m\" or \"PT2H\"")
    return seconds


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _seconds(value: object) -> float:
    if isinstance(value, bool):
        raise DurationError(f"{_shown(value)} is not a duration")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise DurationError(f"{_shown(value)} is not a duration; write e.g. \"90s\", \"1h30m\" or \"PT2H\"")
    text = value.strip()
    if not text:
        raise DurationError("empty duration; write e.g. \"90s\", \"1h30m\" or \"PT2H\"")
    try:
        return float(text)
    except ValueError:
        pass
    lowered = text.lower()
    if _COMPACT.sub("", lowered) == "" and _COMPACT.search(lowered):
        return sum(float(n) * _UNIT_SECONDS[u] for n, u in _COMPACT.findall(lowered))
    iso = _ISO.fullmatch(text.upper())
    if iso and any(iso.groupdict().values()) and not text.upper().endswith("T"):
        return sum(float(v) * _UNIT_SECONDS[k.lower()] for k, v in iso.groupdict().items() if v)
    raise DurationError(f"{_shown(value)} is not a duration; write e.g. \"90s\", \"1h30m\" or \"PT2H\"")


def format_duration(seconds: float) -> str:
    """Compact form for display: 86400 -> `1d`, 129600 -> `36h`, 5400 -> `1h30m`, 0.5 -> `500ms`."""
    if seconds < 1 and seconds > 0:
        return f"{round(seconds * 1000)}ms"
    total = round(seconds)
    if total == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if unit == "d" and total % 86400 != 0 and total < 7 * 86400:
            continue  # 36h reads better than 1d12h for delays people set by the hour
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
