"""Whether a database's schema is the one this code expects, before a worker uses it.

On a shared database the schema is upgraded by one explicit step (`lockgate admin migrate`), not by
whichever worker starts first; a worker refuses a schema that is behind or ahead of its code, and the
refusal names the command that fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import sqlalchemy as sa

from engine.store.db import SCHEMA_HEAD, schema_revision

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

SchemaStatus = Literal["current", "behind", "empty", "newer"]

MIGRATE_COMMAND = "lockgate admin migrate"


@dataclass(frozen=True)
class SchemaState:
    current: str | None
    """The revision the database is at (None: never migrated)."""
    head: str
    """The newest revision this code knows."""
    status: SchemaStatus


class SchemaMismatch(RuntimeError):
    """The database's schema is not the code's; `code` says which way (`schema_behind`, `schema_newer`)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def _scripts() -> ScriptDirectory:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    return ScriptDirectory.from_config(config)


def schema_state(engine: sa.Engine) -> SchemaState:
    current = schema_revision(engine)
    if current == SCHEMA_HEAD:
        return SchemaState(current, SCHEMA_HEAD, "current")
    scripts = _scripts()
    head = scripts.get_current_head() or ""
    known = {revision.revision for revision in scripts.walk_revisions()}
    status: SchemaStatus
    if current is None:
        status = "empty"
    elif current == head:
        status = "current"
    elif current in known:
        status = "behind"
    else:
        status = "newer"
    return SchemaState(current, head, status)


def require_current_schema(engine: sa.Engine, where: str) -> SchemaState:
    """The schema state when it is current; SchemaMismatch (naming the command to run) otherwise."""
    state = schema_state(engine)
    if state.status == "newer":
        raise SchemaMismatch(f"the database {where} is at schema revision {state.current}, newer than this "
                             f"lockgate knows (its newest is {state.head}); upgrade lockgate on this host to the "
                             "version that migrated it", "schema_newer")
    if state.status in ("empty", "behind"):
        at = "has no lockgate schema yet" if state.current is None else f"is at schema revision {state.current}"
        raise SchemaMismatch(f"the database {where} {at}, this lockgate needs {state.head}; run `{MIGRATE_COMMAND}` "
                             "once (with the same LOCKGATE_DB_URL) before starting workers", "schema_behind")
    return state
