"""`Waiting`: what a parked run waits on, read from the engine's `waiting_on` record (a run's, a live change's).

The read models carry `waiting_on` as stored JSON; the app reads it once, here, into a typed value. A key that is
missing, or of another type than the engine writes, reads as None.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.read_models import RunSummary


@dataclass(frozen=True)
class Waiting:
    node: str | None = None
    reason: str | None = None
    due_at: float | None = None
    """Epoch seconds the wait ends (a delay, a retry's backoff, an approval's timeout)."""
    attempt: int | None = None
    """`retry_backoff` only: the attempt that runs at `due_at`."""
    child_run_id: str | None = None
    """`child_run` only: the run the `flow.call` step waits for."""


def waiting_of(record: object) -> Waiting | None:
    """The `waiting_on` record as a `Waiting`; None for no record (empty, or not a JSON object)."""
    if not isinstance(record, dict) or not record:
        return None
    node, reason = record.get("node"), record.get("reason")
    due_at, attempt, child = record.get("due_at"), record.get("attempt"), record.get("child_run_id")
    return Waiting(
        node=str(node) if node else None,
        reason=str(reason) if reason is not None else None,
        due_at=float(due_at) if isinstance(due_at, int | float) else None,
        attempt=attempt if isinstance(attempt, int) else None,
        child_run_id=child if isinstance(child, str) and child else None,
    )


def run_waiting(run: RunSummary) -> Waiting | None:
    """What `run` waits on while it is waiting; None in any other status."""
    return waiting_of(run.waiting_on) if run.status == "waiting" else None
