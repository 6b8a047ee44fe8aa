"""flow.call tests reuse the engine and API areas' fixtures (real Redis, SQLite and PostgreSQL, the HTTP server)."""

from tests.api.conftest import any_db_api, api
from tests.engine.conftest import any_db_engine, engine, make_flow, site, start_engine, wait_until

__all__ = ["any_db_api", "any_db_engine", "api", "engine", "make_flow", "site", "start_engine", "wait_until"]
