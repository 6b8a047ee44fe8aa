"""The run record `create_run` writes through the SQLite driver is the one SQLAlchemy's insert would write."""

from __future__ import annotations

from engine.runtime.run_records import RUN_INSERTED, RUNS


def test_every_column_with_a_default_is_set_by_the_run_insert() -> None:
    defaulted = {column.name for column in RUNS.columns if column.default is not None}
    assert defaulted <= set(RUN_INSERTED)
