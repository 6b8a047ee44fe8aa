"""Validation rules of the `script` node that its config model cannot express (codes from the flow-format spec)."""

from __future__ import annotations

from collections.abc import Iterable

from engine.catalog import SCRIPT_MAX_TIMEOUT_SECONDS
from engine.durations import DurationError, format_duration, parse_duration
from engine.flow import Node


def script_problems(nodes: Iterable[Node]) -> list[tuple[str, str, str]]:
    """(code, node id, message) for each `script` node whose timeout is above the 1h bound."""
    found: list[tuple[str, str, str]] = []
    for node in nodes:
        if node.type != "script":
            continue
        raw = node.config.get("timeout", "60s")
        try:
            seconds = parse_duration(raw)
        except (DurationError, TypeError):
            continue  # the config model reports it as bad_duration
        if seconds > SCRIPT_MAX_TIMEOUT_SECONDS:
            found.append(("script_timeout_too_long", node.id,
                          f'node "{node.id}" (script): timeout {raw} is above the '
                          f"{format_duration(SCRIPT_MAX_TIMEOUT_SECONDS)} a script may run; shorten it, or split "
                          "the work into steps"))
    return found
