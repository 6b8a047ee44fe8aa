"""Triggers that start runs from outside: webhooks, schedules and engine events (spec engine.md §6)."""
