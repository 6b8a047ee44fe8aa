"""Named points in a job's life where a test can make this process die for real.

`LOCKGATE_CRASH_AT=<point>[:<n>]`, read once at import, makes the process `os._exit(CRASH_EXIT_CODE)` at the
n-th pass (default 1) of that point, after appending the point's name to the file `LOCKGATE_CRASH_MARK` when
set (so a test knows the crash happened where it asked). Unset, `reached()` is one comparison.

The points, in the order a job meets them:
"""

from __future__ import annotations

import os
import threading

ENV = "LOCKGATE_CRASH_AT"
MARK_ENV = "LOCKGATE_CRASH_MARK"
CRASH_EXIT_CODE = 86

POINTS: dict[str, str] = {
    "worker.before_flush": "a worker is about to write a batch of a run's events and its progress",
    "worker.after_flush": "a worker wrote a batch of a run's events and its progress",
    "step.before_effect": "a step's body is about to run (an HTTP call, a model call, a wait)",
    "step.after_effect": "a step's body returned, before its completion is written",
    "worker.in_drop": "a worker decided to drop a duplicate or stale job, before acknowledging it",
    "worker.before_ack": "a job ended or parked; its last events, checkpoint and ack are about to be written",
    "worker.after_ack": "a job's last events, checkpoint and ack were written",
    "rebuild.mid": "the start-up rebuild of the due set read the waiting runs and is about to schedule them",
    "reclaim.before_requeue": "a job of a lost worker was claimed and is about to be redelivered",
    "reclaim.after_requeue": "a job of a lost worker was redelivered as its next attempt",
    "projector.before_commit": "the projector applied a batch in SQL and is about to commit",
    "projector.after_commit": "the projector committed a batch and is about to acknowledge it",
    "callback.claimed": "a run's `execution.finished` callback was claimed and is about to be sent",
    "notice.claimed": "an approval notice was read from its stream and is about to be sent",
}
__doc__ = (__doc__ or "") + "".join(f"\n- `{name}`: {what}." for name, what in POINTS.items())


def _target(raw: str | None) -> tuple[str, int] | None:
    if not raw:
        return None
    name, _, count = raw.partition(":")
    if name not in POINTS:
        raise ValueError(f"{ENV}={raw!r}: unknown crash point {name!r}; known: {', '.join(POINTS)}")
    if count and not (count.isdigit() and int(count) >= 1):
        raise ValueError(f"{ENV}={raw!r}: the pass number must be a whole number >= 1, e.g. {name}:2")
    return name, int(count or 1)


_TARGET = _target(os.environ.get(ENV))
_passes = 0
_lock = threading.Lock()


def rearm() -> None:
    """Read `LOCKGATE_CRASH_AT` again and restart the pass count: for a process forked from one that had
    already imported this module (a test's process launcher)."""
    global _TARGET, _passes
    with _lock:
        _TARGET = _target(os.environ.get(ENV))
        _passes = 0


def reached(point: str) -> None:
    """Die here when this is the configured point and pass; otherwise return at once."""
    if _TARGET is None or _TARGET[0] != point:
        return
    global _passes
    with _lock:
        _passes += 1
        if _passes < _TARGET[1]:
            return
        mark = os.environ.get(MARK_ENV)
        if mark:
            with open(mark, "a", encoding="utf-8") as file:
                file.write(f"{point}:{_passes}\n")
        os._exit(CRASH_EXIT_CODE)
