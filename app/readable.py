"""Engine records as people read them: moments (`decided_at: 1796112416.96`, ISO strings) as local times."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

EARLIEST_EPOCH = 946_684_800.0
"""2000-01-01: a number under a `*_at` key below this is not a moment (a count, an offset)."""
LATEST_EPOCH = 4_102_444_800.0
"""2100-01-01."""
RUN_ID_SHOWN = 8
"""Characters of a run id said in messages: its last ones. An id starts with its start's Unix milliseconds
(`engine.ids.time_ordered_id`), so runs started within a minute share their first 8 digits; the last 8 are
random, and also a piece of the full id to search for in logs and the CLI's output."""


def counted(count: int, noun: str) -> str:
    """`count` with `noun`, plural unless it is one: "1 error", "3 warnings"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def short_run_id(run_id: str) -> str:
    """The part of a run id that tells it from the others: its last `RUN_ID_SHOWN` characters."""
    return run_id[-RUN_ID_SHOWN:]


def is_moment_key(key: object) -> bool:
    return isinstance(key, str) and (key.endswith("_at") or key in ("at", "due", "deadline"))


def local_moment(value: Any) -> str | None:
    """`2026-12-01 12:29:42 UTC+01:00` for epoch seconds or an ISO string; None when it is not a moment."""
    moment: datetime | None = None
    if isinstance(value, int | float) and not isinstance(value, bool) and EARLIEST_EPOCH <= value <= LATEST_EPOCH:
        moment = datetime.fromtimestamp(float(value), UTC)
    elif isinstance(value, str) and len(value) >= 10 and value[4:5] == "-":
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    if moment is None:
        return None
    local = moment.astimezone()
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or "")


def readable_json(value: Any, key: object = None) -> Any:
    """`value` with every moment under a `*_at` key shown as a local time (other values unchanged)."""
    if isinstance(value, dict):
        return {k: readable_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [readable_json(item, key) for item in value]
    if is_moment_key(key):
        shown = local_moment(value)
        if shown is not None:
            return shown
    return value
