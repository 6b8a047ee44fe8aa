"""Store fixtures: a migrated database on SQLite and on PostgreSQL, and the example flow."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from engine.flow import Flow, load_flow
from engine.store.db import init_db, make_engine
from tests.conftest import EXAMPLES


@pytest.fixture
def store(db_url: str) -> Iterator[sa.Engine]:
    """A migrated database (runs once on SQLite, once on PostgreSQL)."""
    engine = make_engine(db_url)
    init_db(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def hello_flow() -> Flow:
    return load_flow(EXAMPLES / "hello.flow.json")


def variant(flow: Flow, greeting: str) -> Flow:
    """The flow with another greeting: different content, same id."""
    data = flow.model_copy(deep=True)
    node = data.node("greet")
    assert node is not None
    node.config["values"]["greeting"] = greeting
    return data
