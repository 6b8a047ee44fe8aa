"""Committed event contract files (JSON Schema and fixtures); regenerate with `python -m engine.events.schema`."""
