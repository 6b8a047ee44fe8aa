"""Durations parse in one place: `90s`, `1h30m`, `PT2H`, bare seconds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("15m", 900),
        ("2h", 7200),
        ("3d", 259200),
        ("1w", 604800),
        ("1h30m", 5400),
        ("1H30M", 5400),
        ("500ms", 0.5),
        ("1.5h", 5400),
        ("PT2H", 7200),
        ("PT1H30M", 5400),
        ("P1DT2H", 93600),
        ("pt90s", 90),
        ("P1W", 604800),
        (45, 45),
        (2.5, 2.5),
        ("45", 45),
        (" 10m ", 600),
        ("0s", 0),
    ],
)
def test_accepted_forms(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "  ", "soon", "1x", "h", "1h 30m", "PT", "P", "P1H", "1h-5m", True, None, [], {}, math.nan, math.inf]
)
def test_refused_forms_say_what_is_accepted(text: object) -> None:
    with pytest.raises(DurationError) as problem:
        parse_duration(text)
    assert "duration" in str(problem.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (86400, "1d"),
        (129600, "36h"),
        (5400, "1h30m"),
        (0.5, "500ms"),
        (0, "0s"),
        (90, "1m30s"),
        (7 * 86400, "7d"),
        (255600, "71h"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=60 * 86400))
def test_formatted_durations_parse_back(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds
