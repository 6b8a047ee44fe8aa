"""The run state machine: one table of legal transitions; the projector refuses everything else."""

from __future__ import annotations

RUN_TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "cancelled", "failed", "interrupted"}),
    "running": frozenset({"succeeded", "failed", "interrupted", "waiting", "cancelled"}),
    "waiting": frozenset({"running", "cancelled", "failed", "interrupted"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "interrupted": frozenset(),
    "cancelled": frozenset(),
}
"""status -> statuses it may move to. Terminal states never change."""

EVENT_TARGET_STATUS: dict[str, str] = {
    "run_started": "running",
    "run_resumed": "running",
    "run_parked": "waiting",
    "run_succeeded": "succeeded",
    "run_failed": "failed",
    "run_cancelled": "cancelled",
    "run_interrupted": "interrupted",
}
"""Run events and the status they move a run to."""

STATUSES_ACCEPTING: dict[str, frozenset[str]] = {
    "step": frozenset({"running"}),
    "approval": frozenset({"running", "waiting"}),
    "hold": frozenset({"running", "waiting", "succeeded", "failed", "cancelled", "interrupted"}),
}
"""Run statuses in which events that do not move the run (steps, approvals, holds) are accepted."""

TERMINAL = frozenset(status for status, targets in RUN_TRANSITIONS.items() if not targets)


class IllegalTransition(ValueError):
    """An event that would move a run where the state machine does not allow."""


def check_transition(run_id: str, current: str, event_type: str) -> str | None:
    """The status `event_type` moves the run to (None if it does not move it); raises IllegalTransition."""
    target = EVENT_TARGET_STATUS.get(event_type)
    if target is not None:
        if target not in RUN_TRANSITIONS[current]:
            raise IllegalTransition(f'run "{run_id}": {event_type} would move it from {current} to {target}, '
                                    "which the run state machine does not allow")
        return target
    family = event_type.split("_", 1)[0]
    accepting = STATUSES_ACCEPTING.get(family)
    if accepting is not None and current not in accepting:
        raise IllegalTransition(f'run "{run_id}": {event_type} is not accepted while the run is {current}')
    return None
