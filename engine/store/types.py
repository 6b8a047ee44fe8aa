"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect


class JsonDocument(sa.TypeDecorator[Any]):
    """JSON text on SQLite; JSONB on PostgreSQL (indexable, compact), whose dialect module (2 MB a process) is
    loaded only there. Stores Python's None as JSON `null` and compares by value, as `sa.JSON` does."""

    impl = sa.JSON
    cache_ok = True
    should_evaluate_none = True
    hashable = False

    def load_dialect_impl(self, dialect: Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(sa.JSON())


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
