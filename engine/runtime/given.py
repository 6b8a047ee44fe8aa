"""What a step was given, as its record shows it: secrets redacted, every long string cut to a bound.

The rendered values a body works with stay whole; only the copy carried in `step_started.given` (and
stored in the steps row's `input`) is redacted and bounded, so a 2 MB request body cannot bloat events.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from engine.runtime.context import RunContext

MAX_GIVEN_CHARS = 4096
"""Longest string kept per value; a longer one keeps its head and a marker saying how much was cut."""


def truncated(text: str, limit: int = MAX_GIVEN_CHARS) -> str:
    """`text`, or its first `limit` characters followed by a marker naming the characters left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated {len(text) - limit} of {len(text)} chars]"


def _bounded(value: Any) -> Any:
    """`value` as plain JSON data (frozen mappings and tuples thawed) with every string bounded."""
    if isinstance(value, str):
        return truncated(value)
    if isinstance(value, MappingProxyType | dict):
        return {key: _bounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded(item) for item in value]
    return value


def shown_given(ctx: RunContext, given: dict[str, Any]) -> dict[str, Any]:
    """`given` as events and rows carry it: redacted first (a cut must not split a secret), then bounded."""
    # One copying walk here: redact already thaws what it changes, and _bounded thaws the rest.
    redacted: dict[str, Any] = ctx.redact(given)
    return {key: _bounded(value) for key, value in redacted.items()}
