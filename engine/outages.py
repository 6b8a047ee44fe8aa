"""Whether an error says Redis or the database did not answer, rather than that our code or the data is wrong.

Background loops log an outage as a one-line warning and try again; anything else keeps its traceback."""

from __future__ import annotations

import logging

import redis

from engine.shown_urls import shown_url
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


def unreachable(exc: BaseException, redis_url: str | None, db_url: str | None) -> str:
    """One line for a command that could not start because of an `outage`: what did not answer, where, why, and
    which setting names it. Passwords in the URLs are not shown."""
    if isinstance(exc, redis.RedisError):
        what = f"Redis at {shown_url(redis_url)}" if redis_url else "the data folder's embedded Redis"
        setting = "LOCKGATE_REDIS_URL"
    else:
        what = f"the database at {shown_url(db_url)}" if db_url else "the data folder's SQLite database"
        setting = "LOCKGATE_DB_URL"
    reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
    return f"{what} does not answer ({reason[:300]}); check that it runs and that {setting} names it"


class OutageReport:
    """The log of one loop's outage: a warning when it starts, the retries at debug level, and one line when the
    loop works again, so an outage of an hour is two lines, not one a retry."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self.log = log
        self.what = what
        self.failing = False

    def failed(self, message: str, *args: object) -> None:
        """The loop failed (`message` says how and what it does meanwhile)."""
        self.log.log(logging.DEBUG if self.failing else logging.WARNING, message, *args)
        self.failing = True

    def worked(self) -> None:
        """The loop worked; after a failure, says so once."""
        if self.failing:
            self.failing = False
            self.log.info("%s works again", self.what)
