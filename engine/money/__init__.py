"""Budgets and holds."""
