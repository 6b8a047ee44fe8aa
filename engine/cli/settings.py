"""The settings a command runs with: `app.main` reads them once per command and puts them in force
(`in_force`) while its handler runs; the command's pieces ask `command_settings()`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from engine.config import EngineConfig
from engine.settings import LockgateSettings, load_settings

_in_force: list[LockgateSettings] = []


@contextmanager
def in_force(settings: LockgateSettings) -> Iterator[LockgateSettings]:
    """`command_settings()` is `settings` inside."""
    _in_force.append(settings)
    try:
        yield settings
    finally:
        _in_force.pop()


def command_settings() -> LockgateSettings:
    """The settings in force; a command run without `app.main` (one command's own parser, in a test) reads the
    environment here instead, each time."""
    return _in_force[-1] if _in_force else load_settings()


def command_config() -> EngineConfig:
    """The engine locations of `command_settings()`."""
    return EngineConfig.from_settings(command_settings())
