"""Alembic environment: always driven by `engine.store.db.init_db` with a connection in hand."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context

from engine.store.models import Base
from engine.store.types import UtcDateTime

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "lockgate migrations run through engine.store.db.init_db(engine), which passes a connection; "
        "the alembic command line is not configured for this project"
    )


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    """Render our column types as plain SQLAlchemy ones, so migrations never import app code."""
    if type_ == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    compare_type=True,
    render_item=render_item,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
