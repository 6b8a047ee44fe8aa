"""SQL store: SQLAlchemy models, Alembic migrations, sessions."""
