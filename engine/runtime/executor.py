"""Executes one run's steps in a worker: scheduling, bodies, retries, continue_on_fail, foreach, parking.

It reports only through events handed to an `Emitter`; it never touches SQL. Everything it needs
to resume a parked run is in `checkpoint()`. A top-level step's retry waits out its backoff parked
(`retry_backoff`, holding no worker) and resumes at its next attempt; inside a foreach, where a
step cannot park, the backoff is waited inline (validation bounds it, `retry_wait_in_foreach`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import redis

import engine.runtime.body_table  # noqa: F401  (registers every node type's body)
from engine.catalog import RETRY_PARK_REASON
from engine.clock import Clock
from engine.events import EventBase, EventStamper, RerunSeed
from engine.logs import run_context
from engine.retry_plan import retry_delay
from engine.runtime import crashpoints
from engine.runtime.bodies import (
    BodySpec,
    Park,
    StepCall,
    StepCancelled,
    StepError,
    StepResult,
    StepServices,
    body_for,
)
from engine.runtime.context import RunContext
from engine.runtime.fencing import JobFenced
from engine.runtime.given import shown_given
from engine.runtime.plan import FlowPlan
from engine.runtime.scheduler import Scheduler
from engine.store.db import unavailable
from engine.templates import TemplateProblem


class Emitter(Protocol):
    def emit(self, event: EventBase) -> None: ...

    def flush(self) -> None: ...


Outcome = Literal["succeeded", "failed", "cancelled", "parked"]


@dataclass
class RunOutcome:
    status: Outcome
    park: Park | None = None
    parked_node: str | None = None
    result: Any = None


CANCELLED = "cancelled"
"""Error type of a step stopped while it ran because its run was cancelled."""


class _Cancelled(Exception):
    def __init__(self, node: str) -> None:
        self.node = node


class _StepFailed(Exception):
    def __init__(self, node: str, message: str, error_type: str) -> None:
        super().__init__(message)
        self.node = node
        self.error_type = error_type


class _Parked(Exception):
    def __init__(self, node: str, park: Park) -> None:
        self.node = node
        self.park = park


@dataclass
class _Scope:
    """One scheduling scope: the run's top level, or one foreach iteration."""

    scheduler: Scheduler
    state: dict[str, Any]
    names: dict[str, Any] = field(default_factory=dict)
    suffix: str = ""
    order: list[str] = field(default_factory=list)
    writes: dict[str, dict[str, Any]] = field(default_factory=dict)


def _normal_ports(plan: FlowPlan, node_id: str) -> tuple[str, ...]:
    kind = plan.kinds[node_id]
    if kind == "router":
        return ("default",)
    if kind == "forEach":
        return ("done",)
    return plan.ports[node_id][:1] if plan.kinds[node_id] == "listen" else plan.ports[node_id]


class RunExecutor:
    """Runs one run from its trigger (or its parked node) until it ends or parks."""

    def __init__(self, plan: FlowPlan, ctx: RunContext, stamper: EventStamper, emitter: Emitter, clock: Clock, *,
                 cancel_requested: Callable[[], bool] = lambda: False,
                 sleep: Callable[[float], None] = time.sleep, worker: str = "",
                 services: StepServices | None = None,
                 bodies: Callable[[str], BodySpec | None] = body_for) -> None:
        self.services = services
        self.bodies = bodies
        """The body table: node type -> body (a flow test's replay answers boundary types from its recording)."""
        self.plan = plan
        self.ctx = ctx
        self.stamper = stamper
        self.emitter = emitter
        self.clock = clock
        self.cancel_requested = cancel_requested
        self.sleep = sleep
        self.worker = worker
        self.result: Any = None
        self.top = _Scope(Scheduler(plan, plan.trigger_scope(ctx.trigger), ctx.trigger), ctx.state)
        self.in_flight: str | None = None
        """The top-level node whose step is running (a foreach node while its iterations run)."""
        self.in_flight_resumed = False
        """Whether that step is a parked step resuming (it runs again as a resume after a crash)."""
        self.in_flight_attempt = 1
        """The attempt of that step running now, or next after a failed one (a crash continues there)."""
        self.parked_attempt: int | None = None
        """Set when the run parks on a retry's backoff: the attempt its resume runs."""
        self.resume_attempt: int | None = None
        """Read from the checkpoint restored: a `retry_backoff` park's next attempt."""

    # --- entry points ---------------------------------------------------------------------

    def start(self, redacted_inputs: dict[str, Any]) -> RunOutcome:
        self.emitter.emit(self.stamper.run_started(self.ctx.flow_id, self.ctx.version, self.ctx.trigger,
                                                   redacted_inputs, self.worker))
        return self._guarded(None)

    def rerun(self, redacted_inputs: dict[str, Any], seed: dict[str, Any]) -> RunOutcome:
        """Start a rerun at `seed["from_node"]`: the reused steps (`seed["steps"]`, in their original order) are
        marked done with their recorded ports and writes, never executed, so the state container is as it was
        when that node first started in the original run (`engine.runtime.rerun`).

        Its `run_started` carries the state and errors so folded (the run record starts from them), and one
        `step_reused` per reused step records it in the rerun's own steps."""
        scheduler = self.top.scheduler
        reused_from, from_node = str(seed.get("rerun_of") or ""), str(seed["from_node"])
        steps = [(str(r["node"]), r.get("ports"), dict(r.get("writes") or {})) for r in seed.get("steps", [])]
        for node_id, ports, writes in steps:
            scheduler.start(node_id)
            scheduler.complete(node_id, tuple(ports) if ports is not None else _normal_ports(self.plan, node_id))
            self.top.order.append(node_id)
            self.top.writes[node_id] = writes
            self.ctx.state.update(writes)
        errors = dict(seed.get("errors") or {})
        self.ctx.errors.update(errors)
        origin = RerunSeed(rerun_of=reused_from, from_node=from_node, state=self.ctx.redact(dict(self.ctx.state)),
                           errors=errors)
        self.emitter.emit(self.stamper.run_started(self.ctx.flow_id, self.ctx.version, self.ctx.trigger,
                                                   redacted_inputs, self.worker, rerun=origin))
        for node_id, ports, writes in steps:
            failure = errors.get(node_id) if ports is None else None
            self.emitter.emit(self.stamper.step_reused(
                node_id, node_id, self.plan.nodes[node_id].type, reused_from,
                list(ports) if ports is not None else None, self.ctx.redact(writes),
                error=str(failure["message"]) if failure else None,
                error_type=str(failure["type"]) if failure else None))
        return self._guarded(from_node, resumed=False)

    def resume(self, parked_node: str) -> RunOutcome:
        """Continue at the parked node: a parked body resumes, a retry's backoff runs its next attempt afresh."""
        self.emitter.emit(self.stamper.run_resumed(parked_node, self.worker))
        attempt, self.resume_attempt = self.resume_attempt, None
        if attempt is not None:
            return self._guarded(parked_node, resumed=False, attempt=attempt)
        return self._guarded(parked_node)

    def recover(self, progress: dict[str, Any], idempotent: Callable[[str], bool]) -> RunOutcome:
        """Continue a reclaimed run from its progress checkpoint: completed steps are not run again; the
        step that was in flight runs again when `idempotent(node)`, else the run fails (`step_not_idempotent`)."""
        self.restore(progress)
        node = progress.get("in_flight")
        if node is None or node in self.top.order:
            return self._guarded(None)
        if idempotent(node):
            return self._guarded(node, resumed=bool(progress.get("in_flight_resumed")),
                                 attempt=int(progress.get("in_flight_attempt") or 1))
        message = (f'node "{node}" ({self.plan.nodes[node].type}) was in progress when its worker was lost, and it '
                   "is not idempotent: running it again could repeat its effect (a second POST, a second "
                   "charge). The run is stopped here; you decide: check what the step did, then start the run "
                   'again, or mark the node `"idempotent": true` if repeating it is safe')
        self.emitter.emit(self.stamper.step_failed(node, node, message, error_type="step_not_idempotent"))
        self.emitter.emit(self.stamper.run_failed(message, "step_not_idempotent", node))
        return RunOutcome("failed")

    def progress(self) -> dict[str, Any]:
        """The checkpoint a reclaimed job continues from: the run so far and the top-level step in flight."""
        snapshot = self.checkpoint(self.in_flight or "")
        snapshot["in_flight"] = self.in_flight
        snapshot["in_flight_resumed"] = self.in_flight_resumed
        snapshot["in_flight_attempt"] = self.in_flight_attempt
        return snapshot

    def _guarded(self, resume_node: str | None, resumed: bool = True, attempt: int = 1) -> RunOutcome:
        try:
            if resume_node is not None:
                with run_context(self.ctx.run_id, resume_node):
                    self._run_step(self.top, resume_node, resumed=resumed, first_attempt=attempt)
            self._run_scope(self.top)
        except (JobFenced, redis.RedisError):  # the job stays pending and is redelivered; the run is not failed
            raise
        except _Parked as parked:
            if self.cancel_requested():  # asked to cancel while the step ran: it never parks (no job resumes it)
                self.emitter.emit(self.stamper.run_cancelled(node=parked.node))
                return RunOutcome("cancelled")
            self.emitter.emit(self.stamper.run_parked(parked.node, parked.park.reason, parked.park.due_at,
                                                      attempt=self.parked_attempt,
                                                      child_run_id=parked.park.child_run_id))
            return RunOutcome("parked", park=parked.park, parked_node=parked.node)
        except _Cancelled as cancelled:
            self.emitter.emit(self.stamper.run_cancelled(node=cancelled.node))
            return RunOutcome("cancelled")
        except _StepFailed as failed:
            self.emitter.emit(self.stamper.run_failed(self.ctx.redact(str(failed)), failed.error_type, failed.node))
            return RunOutcome("failed")
        except Exception as exc:  # a bug of ours must fail the run, never the worker
            if unavailable(exc):  # the database did not answer: redelivered like a Redis failure
                raise
            message = f"engine error: {type(exc).__name__}: {exc}"
            self.emitter.emit(self.stamper.run_failed(self.ctx.redact(message), "engine_error"))
            return RunOutcome("failed")
        result = self.ctx.redact(self.result)
        self.emitter.emit(self.stamper.run_succeeded(result))
        return RunOutcome("succeeded", result=result)

    # --- scheduling -------------------------------------------------------------------------

    def _run_scope(self, scope: _Scope) -> None:
        while True:
            ready, skipped = scope.scheduler.advance()
            for node_id in skipped:
                self.emitter.emit(self.stamper.step_skipped(node_id, node_id + scope.suffix))
            if not ready:
                return
            # One step per pass, depth first: what the last step made ready runs before other branches
            # go on, so a join `any` runs on the first delivered branch and its path continues from it.
            last = scope.order[-1] if scope.order else None
            node_id = next((n for n in ready if any(e.source == last for e in self.plan.incoming[n])), ready[0])
            if self.cancel_requested():
                raise _Cancelled(node_id + scope.suffix)
            with run_context(self.ctx.run_id, node_id + scope.suffix):
                self._run_step(scope, node_id)

    def _branch_writes(self, scope: _Scope, join_id: str) -> list[dict[str, Any]]:
        sources = scope.scheduler.delivered_sources(join_id)
        lineages = [self.plan.ancestors(edge.source) | {edge.source} for edge in sources]
        common = frozenset.intersection(*lineages) if lineages else frozenset()
        branches = []
        for lineage in lineages:
            merged: dict[str, Any] = {}
            for node_id in scope.order:
                if node_id in lineage and node_id not in common:
                    merged.update(scope.writes.get(node_id, {}))
            branches.append(merged)
        return branches

    # --- one step ---------------------------------------------------------------------------

    def _run_step(self, scope: _Scope, node_id: str, *, resumed: bool = False, first_attempt: int = 1) -> None:
        node = self.plan.nodes[node_id]
        step = node_id + scope.suffix
        spec = self.bodies(node.type)
        scope.scheduler.start(node_id)
        top = scope is self.top
        if top:
            self.in_flight, self.in_flight_resumed = node_id, resumed
        retry = node.retry
        max_attempts = retry.max_attempts if retry else 1
        names = dict(scope.names)
        names["state"] = scope.state
        call = StepCall(node=node, ctx=self.ctx, clock=self.clock, extra_names=names, resumed=resumed,
                        services=self.services, emit=lambda make: self.emitter.emit(make(self.stamper)),
                        cancelled=self.cancel_requested)
        if self.plan.kinds[node_id] == "join":
            call.branch_writes = self._branch_writes(scope, node_id)
        for attempt in range(first_attempt, max_attempts + 1):
            if top:
                self.in_flight_attempt = attempt
            call.attempt = attempt
            began = time.perf_counter()
            started = False
            try:
                if spec is None:
                    raise StepError(f'node "{node_id}": no body is registered for type "{node.type}"', "no_body")
                # Rendered once per attempt, against the state of this moment; the body reads call.given.
                call.given = spec.prepare(call) if spec.prepare is not None else dict(node.config)
                self.emitter.emit(self.stamper.step_started(node_id, step, node.type, attempt,
                                                            shown_given(self.ctx, call.given)))
                started = True
                if spec.blocking:
                    self.emitter.flush()
                crashpoints.reached("step.before_effect")
                outcome = spec.body(call)
                crashpoints.reached("step.after_effect")
                if isinstance(outcome, Park):
                    if scope is not self.top:
                        raise StepError(f'node "{node_id}" ({node.type}) cannot wait inside a foreach yet; '
                                        "move it out of the loop", "park_in_foreach")
                    self.emitter.flush()
                    raise _Parked(node_id, outcome)
                writes = self._iterate(scope, node_id, outcome) if outcome.items is not None else outcome.writes
            except (_Parked, _Cancelled, JobFenced, redis.RedisError):
                raise
            except StepCancelled as stopped:
                self.emitter.emit(self.stamper.step_failed(
                    node_id, step, self.ctx.redact(str(stopped)), error_type=CANCELLED, step_attempt=attempt,
                    duration_ms=(time.perf_counter() - began) * 1000))
                raise _Cancelled(step) from None
            except Exception as exc:
                if unavailable(exc):  # no fault of the step: the job is handed back and the step runs again
                    raise
                if not started:  # it failed rendering what it is given: the record still shows it started
                    self.emitter.emit(self.stamper.step_started(node_id, step, node.type, attempt))
                error_type = exc.error_type if isinstance(exc, StepError) else (
                    "template_error" if isinstance(exc, TemplateProblem) else "exception")
                message = str(exc) if isinstance(exc, StepError | _StepFailed) else (
                    f'node "{node_id}" ({node.type}): {type(exc).__name__}: {exc}')
                message = self.ctx.redact(message)
                elapsed = (time.perf_counter() - began) * 1000
                if retry is not None and attempt < max_attempts:
                    delay = retry_delay(retry, attempt)
                    self.emitter.emit(self.stamper.step_failed(
                        node_id, step, message, error_type=error_type, step_attempt=attempt, will_retry=True,
                        retry_in=delay, duration_ms=elapsed))
                    if top:
                        self.in_flight_attempt, self.in_flight_resumed = attempt + 1, False
                    self.emitter.flush()
                    if delay > 0 and top:
                        self.parked_attempt = attempt + 1
                        raise _Parked(node_id, Park(RETRY_PARK_REASON, due_at=self.clock.now() + delay,
                                                    detail={"attempt": attempt + 1})) from None
                    if delay > 0:
                        self.sleep(delay)
                    continue
                if node.continue_on_fail:
                    self.emitter.emit(self.stamper.step_failed(
                        node_id, step, message, error_type=error_type, step_attempt=attempt, continued=True,
                        duration_ms=elapsed))
                    self.ctx.errors[step] = {"message": message, "type": error_type, "attempts": attempt}
                    scope.scheduler.complete(node_id, _normal_ports(self.plan, node_id))
                    scope.order.append(node_id)
                    return
                self.emitter.emit(self.stamper.step_failed(
                    node_id, step, message, error_type=error_type, step_attempt=attempt, duration_ms=elapsed))
                raise _StepFailed(step, message, error_type) from None
            self._complete(scope, node_id, step, outcome, writes, attempt, (time.perf_counter() - began) * 1000)
            return

    def _complete(self, scope: _Scope, node_id: str, step: str, outcome: StepResult, writes: dict[str, Any],
                  attempt: int, elapsed_ms: float) -> None:
        scope.state.update(writes)
        ports = outcome.ports if outcome.ports is not None else self.plan.ports[node_id]
        if outcome.items is not None:
            ports = ("done",)
        if self.plan.kinds[node_id] == "terminal":
            self.result = outcome.result
        tokens = outcome.tokens
        self.emitter.emit(self.stamper.step_completed(
            node_id, step, list(ports), self.ctx.redact(writes), elapsed_ms, attempt,
            tokens_in=tokens.tokens_in if tokens is not None else None,
            tokens_out=tokens.tokens_out if tokens is not None else None, cost_micros=outcome.cost_micros))
        scope.scheduler.complete(node_id, ports)
        scope.order.append(node_id)
        scope.writes[node_id] = writes

    # --- foreach ------------------------------------------------------------------------------

    def _iterate(self, scope: _Scope, node_id: str, outcome: StepResult) -> dict[str, Any]:
        items = outcome.items or []
        node = self.plan.nodes[node_id]
        iteration_scope = self.plan.iteration_scope(node_id)
        results: list[dict[str, Any]] = [{} for _ in items]

        def run_one(index: int) -> None:
            sub = _Scope(Scheduler(self.plan, iteration_scope, node_id, ("item",)), dict(scope.state),
                         names={**scope.names, "item": items[index], "index": index},
                         suffix=f"{scope.suffix}[{index}]")
            self._run_scope(sub)
            for written in sub.order:
                results[index].update(sub.writes.get(written, {}))

        if items and len(iteration_scope) > 1:
            self.emitter.flush()
            concurrency = min(int(node.config.get("concurrency", 4)), len(items))
            with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"foreach-{node_id}") as pool:
                for future in [pool.submit(run_one, index) for index in range(len(items))]:
                    future.result()
        key = node.config.get("output_key") or node_id
        value: list[Any] = results if len(iteration_scope) > 1 else list(items)
        return {key: value}

    # --- parking --------------------------------------------------------------------------------

    def checkpoint(self, parked_node: str) -> dict[str, Any]:
        """What a resume needs: state, errors, scheduling so far, writes per node, the sequence."""
        return {
            "parked_node": parked_node,
            "state": self.ctx.state,
            "errors": self.ctx.errors,
            "scheduler": self.top.scheduler.snapshot(),
            "order": list(self.top.order),
            "writes": self.top.writes,
            "result": self.result,
            "seq": self.stamper.last_seq,
            "retry_attempt": self.parked_attempt,
        }

    def restore(self, checkpoint: dict[str, Any]) -> None:
        self.ctx.state.clear()
        self.ctx.state.update(checkpoint.get("state", {}))
        self.ctx.errors.update(checkpoint.get("errors", {}))
        self.top.scheduler.restore(checkpoint.get("scheduler", {}))
        self.top.order = list(checkpoint.get("order", []))
        self.top.writes = dict(checkpoint.get("writes", {}))
        self.result = checkpoint.get("result")
        attempt = checkpoint.get("retry_attempt")
        self.resume_attempt = int(attempt) if attempt is not None else None
