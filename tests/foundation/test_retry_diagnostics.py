"""Retry plans at validation: all waits within `max_wait` (`retry_exceeds_max_wait`), short inside a foreach
(`retry_wait_in_foreach`), and a `max_interval` that is a duration."""

from __future__ import annotations

from typing import Any

import pytest

from tests.foundation.builders import chain, codes, diagnose, edge, end, node, of_code, setter, start


def _retried(**retry: Any) -> dict[str, Any]:
    return {**setter("work", x="1"), "retry": retry}


@pytest.mark.parametrize(
    ("retry", "max_wait", "refused"),
    [
        ({"max_attempts": 4, "base_delay": "1h", "max_interval": "1h"}, "3h", False),  # 3 waits of 1h: exactly
        ({"max_attempts": 4, "base_delay": "1h", "max_interval": "1h"}, "2h59m59s", True),
        ({"max_attempts": 5, "base_delay": "1h", "max_interval": "2h"}, "7h", False),  # 1h, 2h, 2h, 2h
        ({"max_attempts": 5, "base_delay": "1h", "max_interval": "4h"}, "7h", True),  # 1h, 2h, 4h, 4h
        ({"max_attempts": 3, "backoff": "linear", "base_delay": "30m", "max_interval": "1h"}, "1h30m", False),
        ({"max_attempts": 100, "base_delay": "1h"}, None, False),  # capped at 5m each: 99 x 5m < 72h
        ({"max_attempts": 100, "base_delay": "1h", "max_interval": "1h"}, None, True),  # 99h > 72h
        ({"max_attempts": 1, "base_delay": "100h", "max_interval": "100h"}, "1h", False),  # never waits
    ],
)
def test_a_retry_plan_must_fit_in_max_wait(retry: dict[str, Any], max_wait: str | None, refused: bool) -> None:
    settings = {"max_wait": max_wait} if max_wait else {}
    found = diagnose([start(), _retried(**retry), end()], chain("start", "work", "done"), settings=settings)
    assert ("retry_exceeds_max_wait" in codes(found)) is refused, found
    if refused:
        [problem] = of_code(found, "retry_exceeds_max_wait")
        assert problem.node == "work" and problem.severity == "error" and "settings.max_wait" in problem.message


def _looped(**retry: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [start(), node("each", "foreach", {"items": "{{ [1, 2] }}"}), _retried(**retry), end()]
    return nodes, [edge("start", "each"), edge("each", "work", "item"), edge("each", "done", "done")]


@pytest.mark.parametrize(
    ("retry", "refused"),
    [
        ({"max_attempts": 3, "base_delay": "1s"}, False),  # the defaults' scale: 1s, 2s
        ({"max_attempts": 3, "base_delay": "100s"}, False),  # 100s + 200s: exactly 5m
        ({"max_attempts": 3, "base_delay": "101s"}, True),
        ({"max_attempts": 4, "base_delay": "100s", "max_interval": "100s"}, False),  # 3 x 100s
        ({"max_attempts": 5, "base_delay": "1m"}, True),  # 1m, 2m, 4m, 5m
    ],
)
def test_a_retry_inside_a_foreach_must_wait_at_most_5m(retry: dict[str, Any], refused: bool) -> None:
    found = diagnose(*_looped(**retry))
    assert ("retry_wait_in_foreach" in codes(found)) is refused, found
    if refused:
        [problem] = of_code(found, "retry_wait_in_foreach")
        assert problem.node == "work" and '"each"' in problem.message


def test_the_same_plan_outside_the_loop_may_wait_longer() -> None:
    found = diagnose([start(), _retried(max_attempts=5, base_delay="1m"), end()], chain("start", "work", "done"))
    assert "retry_wait_in_foreach" not in codes(found)


@pytest.mark.parametrize("max_interval", ["soon", "", -5])
def test_max_interval_must_be_a_duration(max_interval: Any) -> None:
    found = diagnose([start(), _retried(max_attempts=3, max_interval=max_interval), end()],
                     chain("start", "work", "done"))
    [problem] = of_code(found, "bad_duration")
    assert problem.node == "work" and "retry.max_interval" in problem.message
