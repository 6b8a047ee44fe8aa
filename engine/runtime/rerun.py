"""Rerun from here: a new run of a finished run's flow that reuses every step recorded before one node first
started and executes that node and what follows.

The original run's record is the source: its applied events (`applied_events`, in stored sequence) say which
top-level steps had completed, or failed past `continue_on_fail`, before the node's first `step_started`;
their step rows hold the writes and ports each delivered. Folding those writes in order gives the state
container exactly as it was when the node first started (writes are stored whole, unlike a step's `given`).
The rerun's worker marks those steps done without executing them (`RunExecutor.rerun`), so no upstream
effect is ever repeated, whatever a node's idempotency; its events carry that state (`run_started.rerun`) and
each reused step (`step_reused`), so a rerun's record lists what it reused and can itself be rerun.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, cast

import orjson
import sqlalchemy as sa

from engine.catalog import template_fields
from engine.flow import Flow
from engine.flow_diff import diff_flows
from engine.publish import UnknownFlowVersion, get_version, list_versions
from engine.runtime.create import BudgetPreflight, CreatedRun, RerunStart, RunRefused, create_run
from engine.runtime.handles import EngineHandles
from engine.runtime.idempotency import step_is_idempotent
from engine.runtime.inputs import secret_names
from engine.runtime.plan import FlowPlan
from engine.runtime.scheduler import Scheduler
from engine.runtime.transitions import TERMINAL
from engine.store.db import reading
from engine.store.models import AppliedEvent, Run, Step
from engine.templates import TemplateProblem, template_callback_refs

RUNS = cast(sa.Table, Run.__table__)
STEPS = cast(sa.Table, Step.__table__)
APPLIED = cast(sa.Table, AppliedEvent.__table__)

_BEGINS = ("step_started", "step_reused")
"""Where a top-level step begins in a run's record; a rerun's reused steps begin with their `step_reused`."""
RerunVersion = int | Literal["original", "current"]
RefusalKind = Literal["unknown_run", "run_not_finished", "unknown_node", "node_not_run", "node_in_foreach",
                      "upstream_changed", "secret_inputs_gone", "unknown_version", "callback_url_reused",
                      "repeats_effects"]


class RerunRefused(RunRefused):
    """A rerun refused before any run existed; `kind` says why, `nodes` names the nodes concerned."""

    def __init__(self, kind: RefusalKind, message: str, nodes: tuple[str, ...] = (),
                 original_version: int | None = None) -> None:
        super().__init__(message)
        self.reason = kind
        self.kind: RefusalKind = kind
        self.nodes = nodes
        """`upstream_changed`: the differing nodes; `callback_url_reused`: the reused nodes that call
        `callback_url()`; `repeats_effects`: the nodes whose effect would be repeated."""
        self.original_version = original_version
        """Set for `upstream_changed` and a numbered `unknown_version`: the version a rerun may use instead."""


@dataclass(frozen=True)
class ReusedStep:
    node: str
    ports: tuple[str, ...] | None
    """None for a step that failed past `continue_on_fail`: it delivers its normal ports."""
    writes: dict[str, Any]


@dataclass(frozen=True)
class RerunPlan:
    """What a rerun of `run_id` from `from_node` on `version` reuses and what it would repeat."""

    run_id: str
    flow_id: str
    from_node: str
    original_version: int
    version: int
    trigger: str
    inputs: dict[str, Any]
    reused: tuple[ReusedStep, ...]
    state: dict[str, Any]
    errors: dict[str, Any]
    repeated_effects: tuple[str, ...]
    """Non-idempotent nodes at or after `from_node` that already had their effect in the original run."""
    flow: Flow = field(repr=False, compare=False)

    def seed(self) -> dict[str, Any]:
        """The rerun job's `rerun` field."""
        return {"rerun_of": self.run_id, "from_node": self.from_node, "errors": self.errors,
                "steps": [{"node": s.node, "ports": list(s.ports) if s.ports is not None else None,
                           "writes": s.writes} for s in self.reused]}

    def start(self) -> RerunStart:
        return RerunStart(self.run_id, self.from_node, self.seed())


def _read(sql: sa.Engine, run_id: str) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    with reading(sql) as conn:
        run = conn.execute(sa.select(RUNS).where(RUNS.c.id == run_id)).mappings().first()
        if run is None:
            raise RerunRefused("unknown_run", f'run "{run_id}" does not exist')  # each surface adds its hint
        changes = [orjson.loads(text) for text in conn.execute(
            sa.select(APPLIED.c.change).where(APPLIED.c.run_id == run_id, APPLIED.c.seq.is_not(None))
            .order_by(APPLIED.c.seq)).scalars() if text is not None]
        steps = {row["step"]: dict(row) for row in conn.execute(
            sa.select(STEPS).where(STEPS.c.run_id == run_id)).mappings()}
    return run, changes, steps


def _version(sql: sa.Engine, flow_id: str, version: RerunVersion, original: int) -> tuple[int, Flow]:
    try:
        if version == "original":
            published, flow = get_version(sql, flow_id, original)
        elif version == "current":
            published, flow = get_version(sql, flow_id)
        else:
            published, flow = get_version(sql, flow_id, int(version))
    except UnknownFlowVersion as exc:
        if exc.kind == "unknown_version" and version not in ("original", "current"):
            versions = list_versions(sql, flow_id)
            newest = versions[-1].version if versions else original
            raise RerunRefused("unknown_version", f'flow "{flow_id}" has no version {version} (its versions are 1 '
                               f"to {newest}); name one of them, leave the version out to rerun on the original "
                               f'run\'s version ({original}), or ask for "current" (the newest published, '
                               f"{newest})", original_version=original) from None
        raise RerunRefused("unknown_version", str(exc)) from None
    return published.version, flow


def _upstream_changes(before: Flow, after: Flow, from_node: str, reused: set[str]) -> tuple[str, ...]:
    """Nodes upstream of `from_node` (ancestors in either version, and every reused step) that the newer
    version added, removed, reconfigured or rewired; a move on the canvas is no change."""
    old, new = FlowPlan(before), FlowPlan(after)
    upstream = set(old.ancestors(from_node)) | reused
    if from_node in new.nodes:
        upstream |= new.ancestors(from_node)
    diff = diff_flows(before, after)
    differing = [change.node_id for change in diff.nodes if change.status != "moved" and change.node_id in upstream]
    for edge in diff.edges:
        for end in (edge.from_, edge.to):
            if end in upstream and end not in differing:
                differing.append(end)
        if edge.to == from_node and edge.from_ not in differing:
            differing.append(edge.from_)
    return tuple(differing)


def _may_run(plan: FlowPlan, trigger: str, reused: tuple[ReusedStep, ...]) -> frozenset[str]:
    """The nodes a rerun that reuses `reused` may execute: every other node but those on a path the reused
    steps already ruled out (the scheduler's dead-path elimination), foreach bodies included. A reused step
    that failed past `continue_on_fail` counts as taking all its ports: it rules out nothing."""
    done = {step.node for step in reused}
    if trigger not in plan.nodes:
        return frozenset(plan.nodes) - done
    scope = plan.trigger_scope(trigger)
    scheduler = Scheduler(plan, scope, trigger)
    for step in reused:
        if step.node in scope:
            scheduler.start(step.node)
            scheduler.complete(step.node, step.ports if step.ports is not None else plan.ports[step.node])
    _ready, skipped = scheduler.advance()
    may_run = set(scope) - done - set(skipped)
    for node in list(may_run):
        if plan.kinds[node] == "forEach":
            may_run |= plan.foreach_body(node)
    return frozenset(may_run)


def _reused_callback_urls(before: FlowPlan, after: FlowPlan, trigger: str,
                          reused: tuple[ReusedStep, ...]) -> dict[str, list[str]]:
    """Reused nodes (as `before`, the version they ran on, configures them) whose templates call
    `callback_url()` for a `wait.callback` node that the rerun (on `after`) may execute again: their recorded
    writes and effects carry the original run's URL, the rerun's own would reach no one. A call whose node is
    not a constant may name any such node."""
    calls: dict[str, tuple[set[str], bool]] = {}
    for step in reused:
        node = before.nodes.get(step.node)
        if node is None:
            continue
        named: set[str] = set()
        dynamic = False
        for _path, source in template_fields(node.type, node.config):
            try:
                refs = template_callback_refs(source)
            except TemplateProblem:
                continue
            named |= refs.nodes
            dynamic = dynamic or refs.dynamic
        if named or dynamic:
            calls[step.node] = (named, dynamic)
    if not calls:
        return {}  # the common case: no reused step calls callback_url(), no scheduling to work out
    waits = {node for node in _may_run(after, trigger, reused) if after.nodes[node].type == "wait.callback"}
    found: dict[str, list[str]] = {}
    for reused_node, (named, dynamic) in calls.items():
        hit = waits if dynamic else named & waits
        if hit:
            found[reused_node] = sorted(hit)
    return found


def plan_rerun(sql: sa.Engine, run_id: str, from_node: str, version: RerunVersion = "original") -> RerunPlan:
    """What a rerun would reuse and repeat; raises RerunRefused (its `kind` says why)."""
    run, changes, steps = _read(sql, run_id)
    if run["status"] not in TERMINAL:
        raise RerunRefused("run_not_finished", f'run "{run_id}" is {run["status"]}; only a finished run can be '
                           "rerun (wait for it, or cancel it first)")
    flow_id, original = str(run["flow_id"]), int(run["version"])
    _, original_flow = _version(sql, flow_id, "original", original)
    old = FlowPlan(original_flow)
    if from_node not in old.nodes:
        raise RerunRefused("unknown_node", f'flow "{flow_id}" version {original} has no node "{from_node}" '
                           f"(its nodes: {', '.join(old.nodes)})")
    if any(old.kinds[n] == "forEach" and from_node in old.foreach_body(n) for n in old.nodes):
        raise RerunRefused("node_in_foreach", f'node "{from_node}" runs once per item of a foreach; rerun from the '
                           "foreach node instead")
    secrets = [name for name in sorted(secret_names(original_flow)) if (run["inputs"] or {}).get(name) is not None]
    if secrets:
        raise RerunRefused("secret_inputs_gone", f'run "{run_id}" was given secret inputs ({", ".join(secrets)}), '
                           "which are never kept after a run ends; start a new run with them instead")
    first = next((c["seq"] for c in changes if c.get("event") in _BEGINS and c.get("step") == from_node), None)
    if first is None:
        raise RerunRefused("node_not_run", f'node "{from_node}" never started in run "{run_id}" (it was skipped or '
                           "not reached); rerun from a node that ran")
    reused: list[ReusedStep] = []
    for change in changes:
        step = change.get("step")
        if change["seq"] >= first or not step or "[" in step:
            continue
        event, status = change.get("event"), change.get("step_status")
        if event == "step_completed" or (event == "step_reused" and status == "succeeded"):
            row = steps[step]
            reused.append(ReusedStep(step, tuple(row["ports"] or ()), dict(row["output"] or {})))
        elif event in ("step_failed", "step_reused") and status == "failed":
            reused.append(ReusedStep(step, None, {}))
    reused_ids = {step.node for step in reused}
    chosen, flow = (original, original_flow) if version in ("original", original) else \
        _version(sql, flow_id, version, original)
    if chosen != original:
        if from_node not in {node.id for node in flow.nodes}:
            raise RerunRefused("unknown_node", f'version {chosen} of flow "{flow_id}" has no node "{from_node}"; '
                               f"rerun on the original version ({original})", original_version=original)
        differing = _upstream_changes(original_flow, flow, from_node, reused_ids)
        if differing:
            raise RerunRefused("upstream_changed", f'version {chosen} of flow "{flow_id}" differs upstream of '
                               f'"{from_node}" at {", ".join(differing)}; the recorded steps would not match it. '
                               f"Rerun on the original version ({original}) instead",
                               nodes=differing, original_version=original)
    new = old if flow is original_flow else FlowPlan(flow)
    stale = _reused_callback_urls(old, new, str(run["trigger"] or ""), tuple(reused))
    if stale:
        calls = "; ".join(f'"{node}" calls ' + ", ".join(f'callback_url("{wait}")' for wait in waits)
                          for node, waits in stale.items())
        earliest = next(iter(stale))
        raise RerunRefused("callback_url_reused", f"the rerun would reuse steps that rendered the original run's "
                           f"callback URL for a wait.callback node that runs again, so the rerun's own URL would "
                           f"reach no one and it could only time out: {calls}. Rerun from \"{earliest}\" or "
                           "earlier", nodes=tuple(stale))
    state: dict[str, Any] = {}
    for step in reused:
        state.update(step.writes)
    failed = {step.node for step in reused if step.ports is None}
    errors = {key: value for key, value in (run["errors"] or {}).items() if key in failed}
    effects: list[str] = []
    for row in sorted(steps.values(), key=lambda r: (r["started_at"] is None, r["started_at"], r["id"])):
        node = str(row["node_id"])
        if row["status"] != "succeeded" or node in reused_ids or node in effects or node not in new.nodes:
            continue
        if not step_is_idempotent(new, node):
            effects.append(node)
    return RerunPlan(run_id, flow_id, from_node, original, chosen, str(run["trigger"] or ""),
                     dict(run["inputs"] or {}), tuple(reused), state, errors, tuple(effects), flow)


def rerun_run(handles: EngineHandles, run_id: str, from_node: str, version: RerunVersion = "original", *,
              repeat_effects: bool = True,
              budget_preflight: BudgetPreflight | None = None) -> tuple[CreatedRun, RerunPlan]:
    """Start the rerun through `create_run` (the same input check and budget preflight as any run).
    `repeat_effects=False` refuses (`repeats_effects`) a rerun that would execute again a non-idempotent node
    that already had its effect (`RerunPlan.repeated_effects`); the facade's `RerunRequest` asks so by default."""
    plan = plan_rerun(handles.sql, run_id, from_node, version)
    if plan.repeated_effects and not repeat_effects:
        names = ", ".join(plan.repeated_effects)
        raise RerunRefused("repeats_effects", f'the rerun of run "{run_id}" from "{from_node}" would execute again '
                           f"nodes that are not idempotent and already had their effect in that run: {names}; "
                           'send "repeat_effects": true to start it anyway (a "dry_run": true shows what it '
                           "reuses and repeats)", nodes=plan.repeated_effects)
    options: dict[str, Any] = {} if budget_preflight is None else {"budget_preflight": budget_preflight}
    created = create_run(handles, plan.flow_id, plan.inputs, version=plan.version, trigger=plan.trigger or None,
                         rerun=plan.start(), **options)
    return created, plan
