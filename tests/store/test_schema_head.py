"""The schema head the engine checks without Alembic is Alembic's own head, and a database at it is used as is."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from engine.store.db import SCHEMA_HEAD, init_db, make_engine, schema_revision
from engine.store.schema_check import _scripts, schema_state


def test_the_schema_head_constant_is_alembics_head() -> None:
    assert _scripts().get_current_head() == SCHEMA_HEAD


def test_a_database_is_read_at_its_revision_without_alembic(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    assert schema_revision(engine) is None
    assert schema_state(engine).status == "empty"
    init_db(engine)
    assert schema_revision(engine) == SCHEMA_HEAD
    assert schema_state(engine).status == "current"
    for revision, status in (("0005_rerun", "behind"), ("9999_later", "newer")):
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = :revision"), {"revision": revision})
        assert schema_revision(engine) == revision
        assert schema_state(engine).status == status
    engine.dispose()
