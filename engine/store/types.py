"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect

# JSONB on PostgreSQL (indexable, compact); JSON text on SQLite.
JsonDocument = sa.JSON().with_variant(JSONB(), "postgresql")

# Money as integer micro-dollars (see engine.money.amounts): exact sums on both databases.
Micros = sa.BigInteger()


class UtcDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on both databases (SQLite drops the zone; we put it back)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"timestamp {value!r} has no time zone; pass an aware UTC datetime (datetime.now(UTC))")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utc_from_epoch(seconds: float) -> datetime:
    """An aware UTC datetime from epoch seconds (what `engine.clock` gives)."""
    return datetime.fromtimestamp(seconds, UTC)
