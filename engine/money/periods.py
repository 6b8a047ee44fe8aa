"""Budget periods: the UTC instant the current day, week (Monday) or month began."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal, get_args

Period = Literal["day", "week", "month"]
PERIODS: tuple[str, ...] = get_args(Period)


def period_starts(now: float) -> dict[str, int]:
    """Epoch seconds at which the day, week and month containing `now` began (UTC)."""
    moment = datetime.fromtimestamp(now, UTC)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    week = day - timedelta(days=day.weekday())
    month = day.replace(day=1)
    return {"day": int(day.timestamp()), "week": int(week.timestamp()), "month": int(month.timestamp())}


def period_start(period: str, now: float) -> int:
    return period_starts(now)[period]
