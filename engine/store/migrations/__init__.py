"""Alembic migrations of the SQL store, run programmatically by `engine.store.db.init_db`."""
