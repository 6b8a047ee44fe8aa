"""The replay body table: real bodies for pure node types, the recording's answers for boundary types."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.approvals.claims import TIMEOUT_ACTOR
from engine.durations import parse_duration
from engine.flowtest.model import PURE_TYPES, WAITING_TYPES, RecordedAnswer
from engine.runtime.bodies import BodySpec, Park, StepCall, StepError, StepResult, body_for

PARK_REASONS = {"approval": "approval", "wait.callback": "callback", "flow.call": "child_run"}
TIMEOUT_COMMENT = "no decision before the approval's timeout"


class RecordedAnswers:
    """The recording's answers, found per step: by node id and, inside a foreach, by the item's index (a
    nested foreach's steps are told apart by their innermost index only)."""

    def __init__(self, answers: list[RecordedAnswer]) -> None:
        self._by_node: dict[str, list[RecordedAnswer]] = {}
        for answer in answers:
            self._by_node.setdefault(answer.node, []).append(answer)

    def find(self, call: StepCall) -> RecordedAnswer | None:
        """This step's answer: the same one for every attempt and for its resume after a park."""
        candidates = self._by_node.get(call.node.id, [])
        index = call.extra_names.get("index")
        if index is not None:
            candidates = [a for a in candidates if a.step.endswith(f"[{index}]")]
        else:
            candidates = [a for a in candidates if a.step == call.node.id]
        return candidates[0] if candidates else None


def _approval_timed_out(call: StepCall, answer: RecordedAnswer) -> bool:
    record = answer.writes.get(call.node.id)
    return isinstance(record, dict) and record.get("decided_by") == TIMEOUT_ACTOR


def _approval_timeout(call: StepCall) -> StepResult:
    record = {
        "decision": "rejected",
        "decided_by": TIMEOUT_ACTOR,
        "comment": TIMEOUT_COMMENT,
        "decided_at": call.clock.now(),
    }
    return StepResult(ports=("rejected",), writes={call.node.id: record})


def _callback_timed_out(_call: StepCall, answer: RecordedAnswer) -> bool:
    return answer.ports == ["timed_out"]


def _callback_timeout(_call: StepCall) -> StepResult:
    return StepResult(ports=("timed_out",))


TIMEOUTS: dict[str, tuple[Callable[[StepCall, RecordedAnswer], bool], Callable[[StepCall], StepResult]]] = {
    "approval": (_approval_timed_out, _approval_timeout),
    "wait.callback": (_callback_timed_out, _callback_timeout),
}
"""Types with a `timeout`: (whether the recorded answer was the timeout, the step's outcome when it times out)."""


def _wait(call: StepCall, answer: RecordedAnswer) -> tuple[float, bool]:
    """(seconds the step waits, whether it now ends by its timeout instead of its recorded answer).

    With the flow's timeout as recorded, the step takes its recorded answer after its recorded wait. With
    another timeout, an answer recorded later than the new timeout, or a recorded timeout, becomes a
    timeout at the new time, as the engine would decide."""
    waited = answer.waited_seconds or 0.0
    handling = TIMEOUTS.get(call.node.type)
    if handling is None or (answer.given or {}).get("timeout") == call.given.get("timeout"):
        return waited, False
    timeout = float(parse_duration(call.given["timeout"]))
    if handling[0](call, answer) or waited > timeout:
        return timeout, True
    return waited, False


def recorded_body(answers: RecordedAnswers) -> Callable[[StepCall], StepResult | Park]:
    def body(call: StepCall) -> StepResult | Park:
        answer = answers.find(call)
        if answer is None:
            raise StepError(
                f'node "{call.node.id}" ({call.node.type}): the test has no recorded answer for this '
                "step; the recorded run never reached it. Record the test again from a run that does",
                "not_recorded",
            )
        if call.attempt < answer.attempts:
            raise StepError(
                f'node "{call.node.id}": attempt {call.attempt} of {answer.attempts} failed in the recorded run',
                "recorded_attempt_failed",
            )
        if call.node.type in WAITING_TYPES and not call.resumed:
            return Park(
                PARK_REASONS.get(call.node.type, "recorded_wait"), due_at=call.clock.now() + _wait(call, answer)[0]
            )
        if _wait(call, answer)[1]:
            return TIMEOUTS[call.node.type][1](call)
        if answer.status == "failed":
            raise StepError(
                answer.error or f'node "{call.node.id}" failed in the recorded run', answer.error_type or "error"
            )
        writes: dict[str, Any] = dict(answer.writes)
        return StepResult(ports=tuple(answer.ports) if answer.ports is not None else None, writes=writes)

    return body


def replay_bodies(answers: RecordedAnswers) -> Callable[[str], BodySpec | None]:
    """The body table replay runs on: `body_for` for pure types; a recorded body (after the type's real
    `prepare`, so templates render and fail as they would) for every boundary type."""
    body = recorded_body(answers)
    specs: dict[str, BodySpec | None] = {}

    def table(type_name: str) -> BodySpec | None:
        if type_name not in specs:
            real = body_for(type_name)
            specs[type_name] = (
                real if type_name in PURE_TYPES else BodySpec(body, prepare=real.prepare if real is not None else None)
            )
        return specs[type_name]

    return table
