"""API keys: created once (shown once), stored only as a SHA-256 hash, revocable, each with its rights.

A key is `lgk_` and 43 URL-safe characters (256 random bits); with that much entropy a plain
SHA-256 is a safe stored form and lets a key be found by its hash.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import sqlalchemy as sa

from engine.clock import Clock, SystemClock
from engine.runtime.write_lock import sqlite_writer
from engine.store.db import reading
from engine.store.driver_reads import sqlite_reader
from engine.store.models import ApiKey
from engine.store.types import utc_from_epoch

API_KEYS = cast(sa.Table, ApiKey.__table__)
KEY_PREFIX = "lgk_"
KEY_PATTERN = re.compile(r"^lgk_[A-Za-z0-9_-]{43}$")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")
READ_SCOPE = "runs:read"
START_SCOPE = "runs:start"
PUBLISH_SCOPE = "flows:publish"
DECIDE_SCOPE = "approvals:decide"
RIGHTS: dict[str, str] = {"read": READ_SCOPE, "start": START_SCOPE, "publish": PUBLISH_SCOPE, "decide": DECIDE_SCOPE}
"""A right's short name (the CLI's `--rights`) -> the scope stored with a key and checked by the API."""
ALL_SCOPES: tuple[str, ...] = tuple(RIGHTS.values())
"""A key created without `--rights` may do everything the API does."""


class KeyProblem(ValueError):
    """A key command that cannot be done (bad or taken name, unknown key); the message says the fix."""


@dataclass(frozen=True)
class KeyInfo:
    name: str
    scopes: list[str]
    created_at: str
    revoked_at: str | None

    def to_data(self) -> dict[str, object]:
        return {"name": self.name, "scopes": self.scopes, "created_at": self.created_at,
                "revoked_at": self.revoked_at, "active": self.revoked_at is None}


KeyRefusal = Literal["malformed_key", "unknown_key", "revoked_key", "key_without_rights"]


@dataclass(frozen=True)
class KeyCheck:
    """Who a presented key is: `name` when valid, else the refusal and its message."""

    name: str | None
    refusal: KeyRefusal | None = None
    message: str = ""


def right_of(scope: str) -> str:
    """A scope's short name (`runs:read` -> `read`); an unknown scope as it is."""
    return next((right for right, known in RIGHTS.items() if known == scope), scope)


def rights_named(scopes: Iterable[str]) -> list[str]:
    """A key's rights by their short names in the API's order (`["read", "decide"]`); unknown scopes after them,
    as they are."""
    held = set(scopes)
    return [*(right_of(scope) for scope in ALL_SCOPES if scope in held), *sorted(held - set(ALL_SCOPES))]


def scopes_of_rights(rights: str) -> tuple[str, ...]:
    """The scopes a comma-separated list of rights names (short `read` or full `runs:read`), in the API's order."""
    asked = [part.strip() for part in rights.split(",") if part.strip()]
    if not asked:
        raise KeyProblem(f"name at least one right: {', '.join(RIGHTS)}")
    unknown = [part for part in asked if part not in RIGHTS and part not in ALL_SCOPES]
    if unknown:
        close = difflib.get_close_matches(unknown[0], [*RIGHTS, *ALL_SCOPES], n=1)
        meant = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyProblem(f"unknown right {', '.join(repr(part) for part in unknown)}{meant}; the rights are "
                         + ", ".join(f"{right} ({scope})" for right, scope in RIGHTS.items()))
    wanted = {RIGHTS.get(part, part) for part in asked}
    return tuple(scope for scope in ALL_SCOPES if scope in wanted)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(sql: sa.Engine, name: str, clock: Clock | None = None,
               scopes: tuple[str, ...] = ALL_SCOPES) -> str:
    """Store a new key named `name` (its hash only) with `scopes` and return the key: the only time it exists in
    full."""
    if not NAME_PATTERN.match(name):
        raise KeyProblem(f"key name {name!r} is not usable: use letters, digits and . _ @ - (up to 128), "
                         "starting with a letter or digit")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    now = utc_from_epoch((clock or SystemClock()).now())
    with sqlite_writer(sql), sql.begin() as conn:
        taken = conn.execute(sa.select(API_KEYS.c.revoked_at).where(API_KEYS.c.name == name)).first()
        if taken is not None:
            state = "a revoked key keeps its name for the record" if taken.revoked_at else "it is in use"
            raise KeyProblem(f'key name "{name}" is taken ({state}); choose another name')
        conn.execute(sa.insert(API_KEYS).values(name=name, key_hash=hash_key(key), scopes=list(scopes),
                                                created_at=now, revoked_at=None))
    return key


def revoke_key(sql: sa.Engine, name: str, clock: Clock | None = None) -> None:
    """Revoke the key `name`; every request with it is refused from now on."""
    now = utc_from_epoch((clock or SystemClock()).now())
    with sqlite_writer(sql), sql.begin() as conn:
        row = conn.execute(sa.select(API_KEYS.c.revoked_at).where(API_KEYS.c.name == name)).first()
        if row is None:
            raise KeyProblem(f'no key is named "{name}"; see the names with `lockgate keys list`')
        if row.revoked_at is not None:
            raise KeyProblem(f'key "{name}" was already revoked at {row.revoked_at:%Y-%m-%d %H:%M:%S} UTC; '
                             "nothing changed")
        conn.execute(sa.update(API_KEYS).where(API_KEYS.c.name == name).values(revoked_at=now))


def list_keys(sql: sa.Engine) -> list[KeyInfo]:
    """Every key by name, revoked ones included (never the key or its hash)."""
    with reading(sql) as conn:
        rows = conn.execute(sa.select(API_KEYS.c.name, API_KEYS.c.scopes, API_KEYS.c.created_at,
                                      API_KEYS.c.revoked_at).order_by(API_KEYS.c.name)).all()
    return [KeyInfo(row.name, list(row.scopes or []), row.created_at.isoformat(),
                    row.revoked_at.isoformat() if row.revoked_at else None) for row in rows]


_KEY_BY_HASH = sa.select(API_KEYS.c.name, API_KEYS.c.scopes, API_KEYS.c.revoked_at).where(
    API_KEYS.c.key_hash == sa.bindparam("key_hash"))
_DRIVER_KEY_BY_HASH = f"SELECT name, scopes, revoked_at FROM {API_KEYS.name} WHERE key_hash = ?"


def _key_by_hash(sql: sa.Engine, key_hash: str) -> Mapping[str, Any] | None:
    """The key's name, scopes and revocation time (read on every API request: on SQLite through the driver)."""
    if sql.dialect.name == "sqlite":
        with sqlite_reader(sql) as reader:
            rows = reader.rows(_DRIVER_KEY_BY_HASH, (key_hash,), API_KEYS)
        return rows[0] if rows else None
    with reading(sql) as conn:
        found = conn.execute(_KEY_BY_HASH, {"key_hash": key_hash}).mappings().first()
    return dict(found) if found is not None else None


def check_key(sql: sa.Engine, key: str, scope: str) -> KeyCheck:
    """Who `key` belongs to, if it is well formed, known, not revoked and has `scope`."""
    if not KEY_PATTERN.match(key):
        return KeyCheck(None, "malformed_key", "the key is malformed: keys look like lgk_ followed by 43 "
                        "letters, digits, - or _; copy it again from `lockgate keys create`")
    row = _key_by_hash(sql, hash_key(key))
    if row is None:
        return KeyCheck(None, "unknown_key", "the key is not known here (never created on this engine's store, "
                        "or mistyped); create one with `lockgate keys create NAME`")
    name = row["name"]
    if row["revoked_at"] is not None:
        return KeyCheck(name, "revoked_key", f'key "{name}" was revoked; create a new key with '
                        "`lockgate keys create NAME`")
    held = list(row["scopes"] or [])
    if scope not in held:
        has = ", ".join(rights_named(held)) or "none"
        return KeyCheck(name, "key_without_rights", f'key "{name}" lacks the {right_of(scope)} right ({scope}); '
                        f"its rights: {has}. Use a key that has it, e.g. one made with "
                        f"`lockgate keys create NAME --rights {right_of(scope)}`")
    return KeyCheck(name)
