"""A loop's outage is logged as one warning when it starts and one line when the loop works again; the retries in
between go to debug, so a long outage does not fill the log (or a `runs watch` terminal) with one line a retry."""

from __future__ import annotations

import logging

import pytest

from engine.outages import OutageReport


def test_an_outage_is_one_warning_then_one_line_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("lockgate.test.outage")
    report = OutageReport(log, "heartbeat")
    with caplog.at_level(logging.DEBUG, logger=log.name):
        report.worked()  # nothing failed: nothing to say
        for attempt in range(3):
            report.failed("heartbeat: Redis write failed (attempt %d)", attempt)
        report.worked()
        report.worked()
        report.failed("heartbeat: Redis write failed (attempt %d)", 9)
    assert [(record.levelname, record.getMessage()) for record in caplog.records] == [
        ("WARNING", "heartbeat: Redis write failed (attempt 0)"),
        ("DEBUG", "heartbeat: Redis write failed (attempt 1)"),
        ("DEBUG", "heartbeat: Redis write failed (attempt 2)"),
        ("INFO", "heartbeat works again"),
        ("WARNING", "heartbeat: Redis write failed (attempt 9)"),  # a new outage warns again
    ]
