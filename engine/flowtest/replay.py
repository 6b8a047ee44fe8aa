"""Replay a flow test in-process: the engine's own executor walks the flow, boundary steps take their
recorded answers, and a manual clock jumps to each park's due time (a 24 h wait costs nothing).

Each park is resumed as the worker resumes it: a fresh executor restored from the checkpoint.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
from pydantic import BaseModel

from engine.clock import ManualClock
from engine.events import EventBase, EventStamper
from engine.flow import Flow
from engine.flowtest.answers import RecordedAnswers, replay_bodies
from engine.flowtest.callbacks import placeholder_url
from engine.flowtest.model import FlowTest
from engine.runtime.context import RunContext
from engine.runtime.executor import RunExecutor, RunOutcome
from engine.runtime.inputs import secret_names
from engine.runtime.plan import FlowPlan

MAX_PARKS = 10_000
"""A flow parks this often only in a retry loop gone wrong: the replay stops and fails there."""


class ReplayResult(BaseModel):
    """What the replayed run did."""

    status: str
    error_type: str | None = None
    error: str | None = None
    path: list[str]
    state: dict[str, Any]
    result: Any = None
    parks: int = 0
    simulated_seconds: float = 0.0
    """How far the replay's clock jumped: the run's waits, taken at once."""


class _Collected:
    """An emitter that keeps the replay's events in memory."""

    def __init__(self) -> None:
        self.events: list[EventBase] = []

    def emit(self, event: EventBase) -> None:
        self.events.append(event)

    def flush(self) -> None:
        pass


def _plain(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, default=str))


def _path(events: list[EventBase]) -> list[str]:
    path: list[str] = []
    for event in events:
        step = event.__dict__.get("step")
        if (
            event.__dict__.get("type") == "step_started"
            and isinstance(step, str)
            and "[" not in step
            and step not in path
        ):
            path.append(step)
    return path


def replay(flow: Flow, test: FlowTest) -> ReplayResult:
    """Run `flow` on the test's inputs and recorded answers; what it did (never raises for a run's failure)."""
    plan = FlowPlan(flow)
    start = test.recorded_from.started_at
    clock = ManualClock(start)
    bodies = replay_bodies(RecordedAnswers(test.answers))
    emitter = _Collected()
    secrets = secret_names(flow)

    def jump(seconds: float) -> None:  # a retry's backoff inside a foreach: waited on the clock
        clock.advance(seconds)

    def executor(last_seq: int) -> tuple[RunExecutor, RunContext]:
        ctx = RunContext(
            test.recorded_from.run_id,
            flow.id,
            test.recorded_from.version,
            test.trigger,
            copy.deepcopy(test.inputs),
            secrets,
            tuple(flow.inputs),
            callback_url=placeholder_url,
        )
        stamper = EventStamper(ctx.run_id, clock, last_seq=last_seq)
        return RunExecutor(plan, ctx, stamper, emitter, clock, sleep=jump, worker="flowtest", bodies=bodies), ctx

    if test.trigger not in plan.triggers:
        return ReplayResult(
            status="failed",
            error_type="unknown_trigger",
            path=[],
            state={},
            error=f'the test starts at trigger "{test.trigger}", which the flow no longer has',
        )
    run, ctx = executor(0)
    outcome: RunOutcome = run.start(ctx.redact(test.inputs))
    parks = 0
    while outcome.status == "parked" and outcome.park is not None and outcome.parked_node is not None:
        parks += 1
        due = outcome.park.due_at
        if due is None or parks > MAX_PARKS:
            why = "waits with no due time" if due is None else f"parked more than {MAX_PARKS} times"
            return ReplayResult(
                status="failed",
                error_type="replay_stuck",
                path=_path(emitter.events),
                state=_plain(ctx.redact(ctx.state)),
                parks=parks,
                error=f'node "{outcome.parked_node}" {why}; replay cannot go on',
                simulated_seconds=clock.now() - start,
            )
        clock.set(max(clock.now(), due))
        checkpoint = copy.deepcopy(_plain(run.checkpoint(outcome.parked_node)))
        run, ctx = executor(int(checkpoint["seq"]))
        run.restore(checkpoint)
        outcome = run.resume(outcome.parked_node)
    failure = next((e for e in reversed(emitter.events) if e.__dict__.get("type") == "run_failed"), None)
    return ReplayResult(
        status=outcome.status,
        path=_path(emitter.events),
        state=_plain(ctx.redact(ctx.state)),
        result=_plain(outcome.result),
        error_type=failure.__dict__.get("error_type") if failure is not None else None,
        error=failure.__dict__.get("error") if failure is not None else None,
        parks=parks,
        simulated_seconds=round(clock.now() - start, 6),
    )
