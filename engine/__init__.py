"""Lockgate's engine: flow model, catalog, validation and runtime. No Qt here."""

__version__ = "0.1.0"
