"""flow.call tests reuse the engine area's fixtures (real Redis, SQLite and PostgreSQL)."""

from tests.engine.conftest import any_db_engine, engine, make_flow, start_engine, wait_until

__all__ = ["any_db_engine", "engine", "make_flow", "start_engine", "wait_until"]
