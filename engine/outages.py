"""Whether an error says Redis or the database did not answer, rather than that our code or the data is wrong.

Background loops log an outage as a one-line warning and try again; anything else keeps its traceback."""

from __future__ import annotations

import redis

from engine.store.db import unavailable


def outage(exc: BaseException) -> bool:
    """Redis refused, dropped or timed out the connection (or is loading), or the database did not answer
    (`engine.store.db.unavailable`)."""
    return isinstance(exc, redis.ConnectionError | redis.TimeoutError) or unavailable(exc)


def outage_subject(exc: BaseException) -> str:
    """What did not answer in an `outage`: "Redis" or "the database"."""
    return "Redis" if isinstance(exc, redis.RedisError) else "the database"


def described(exc: BaseException) -> str:
    """The error's type and first line, for a warning that carries no traceback."""
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0]}" if first else type(exc).__name__
