"""Publish-time validation: a pure function of the flow document.

`validate()` never raises on bad input; every problem is a Diagnostic with a
stable code from the flow-format spec.
"""

from __future__ import annotations

import bisect
import difflib
import functools
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from croniter import croniter
from pydantic import ValidationError

from engine.catalog import CATALOG, EVENT_TYPES, NodeType, template_fields, written_keys
from engine.durations import DurationError, format_duration, parse_duration
from engine.event_set import PUBLISHED_EVENT_TYPES
from engine.flow import Edge, Flow, FlowLoadError, Node, flow_from_data, parse_document
from engine.flow_graph import FlowGraph
from engine.retry_plan import INLINE_RETRY_WAIT_LIMIT, retry_delay, total_backoff, wait_seconds
from engine.script_rules import script_problems
from engine.templates import (
    TemplateProblem,
    template_callback_refs,
    template_input_refs,
    template_reads,
    template_state_refs,
)

Severity = Literal["error", "warning"]

DEFAULT_LIMITS = {"max_delay": "71h", "max_wait": "72h", "suspended_step_timeout": "24h"}
MAX_CYCLES_LISTED = 5
# Name comparisons spent on did-you-mean hints per validation (about 3 µs each): every hint in a small flow,
# the first few in a 5,000-node one.
HINT_COMPARISON_BUDGET = 50_000
# Up to this many forks above a writer are each tried for separating it from others; past it, only nearby ones.
FEW_FORKS = 32
# Up to this many candidate writers are checked for shared ancestors one by one; past it, with graph-wide masks.
FEW_CANDIDATES = 8
# Ancestors a writer's fork search climbs through before the pairs are settled from the other writers' side.
WALK_BUDGET = 48


@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a flow: a stable code, its severity, the node (if any) and a fix-it message."""

    code: str
    severity: Severity
    node: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    """True when any diagnostic blocks publishing."""
    return any(d.severity == "error" for d in diagnostics)


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean \"{close[0]}\"?" if close else ""


def validate_document(document: str | bytes | dict[str, Any] | Flow) -> tuple[Flow | None, list[Diagnostic]]:
    """Parse (if needed) and validate; the Flow is None when the document is not a flow."""
    if isinstance(document, Flow):
        return document, validate(document)
    try:
        data = document if isinstance(document, dict) else parse_document(document)
        flow = flow_from_data(data)
    except FlowLoadError as exc:
        return None, [
            Diagnostic("invalid_document", "error", None, f"{path}: {message}") for path, message in exc.problems
        ]
    return flow, validate(flow)


def validate(flow: Flow | str | bytes | dict[str, Any]) -> list[Diagnostic]:
    """Every publish-time diagnostic for `flow`: errors first, then warnings; never raises on bad input."""
    if not isinstance(flow, Flow):
        return validate_document(flow)[1]
    return _Checker(flow).run() + _undeclared_inputs(flow)


class _Checker:
    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.found: list[Diagnostic] = []
        self.nodes: dict[str, Node] = {}
        self.specs: dict[str, NodeType] = {}
        self.ports: dict[str, tuple[str, ...]] = {}
        # Edges keyed by (from, port) so router/approval branches stay distinct.
        self.out_edges: dict[str, list[tuple[str, str]]] = {}
        self._edge_ports: dict[tuple[str, str], set[str]] = {}
        self.graph = FlowGraph((), ())
        self._hint_budget = HINT_COMPARISON_BUDGET
        self._exclusive_mask: int | None = None
        self._below_exclusive: dict[str, int] | None = None
        self._splitting_mask: int | None = None
        self._writer_masks: dict[str, int] = {}
        self._hints: dict[tuple[str, int], tuple[Collection[str], str]] = {}
        self._models: list[str] | None = None
        self._port_children: dict[str, list[int]] = {}

    def _hint(self, word: str, options: Collection[str]) -> str:
        """A did-you-mean while the comparison budget lasts; a file with thousands of dangling names stays fast."""
        if len(options) > self._hint_budget:
            return ""
        self._hint_budget -= len(options)
        # The same name among the same options (fifty reserves "for" one missing model) is compared once.
        # Keyed by the options' identity (callers pass collections they no longer change); the entry holds the
        # options too, so their id cannot be reused by another collection while cached.
        cache_key = (word, id(options))
        cached = self._hints.get(cache_key)
        if cached is None:
            cached = self._hints[cache_key] = (options, _did_you_mean(word, options))
        return cached[1]

    def add(self, code: str, node: str | None, message: str, severity: Severity = "error") -> None:
        self.found.append(Diagnostic(code, severity, node, message))

    def run(self) -> list[Diagnostic]:
        limits = self._limits()
        self._nodes()
        self._edges()
        self.graph = FlowGraph(self.nodes, ((s, t) for s, edges in self.out_edges.items() for _, t in edges))
        self._triggers()
        cyclic = self._cycles()
        self._node_rules(limits)
        for code, node_id, message in script_problems(self.nodes[n] for n in self.specs):
            self.add(code, node_id, message)
        self._retry_waits(limits["max_wait"], cyclic)
        if not cyclic:
            self._reserve_targets_downstream()
            self._finance_chain()
            self._reachability()
            self._joins()
            self._state_flow()
        self._unconnected_ports()
        self._unsafe_templates()
        self._callback_urls()
        errors = [d for d in self.found if d.severity == "error"]
        return errors + [d for d in self.found if d.severity != "error"]

    def _limits(self) -> dict[str, float]:
        limits: dict[str, float] = {}
        settings = self.flow.settings
        for name, default in DEFAULT_LIMITS.items():
            raw = getattr(settings, name)
            try:
                limits[name] = _non_negative_seconds(raw if raw is not None else default)
            except DurationError as exc:
                self.add("bad_duration", None, f"settings.{name}: {exc}")
                limits[name] = parse_duration(default)
        return limits

    def _nodes(self) -> None:
        for node in self.flow.nodes:
            if node.id in self.nodes:
                message = f"node \"{node.id}\" is defined twice; give each node its own id"
                self.add("duplicate_node_id", node.id, message)
                continue
            self.nodes[node.id] = node
            if node.retry is not None:
                self._retry_delay(node, node.retry.base_delay)
            spec = CATALOG.get(node.type)
            if spec is None:
                self.add(
                    "unknown_node_type",
                    node.id,
                    f"node \"{node.id}\": unknown type \"{node.type}\"{_did_you_mean(node.type, CATALOG)}",
                )
                continue
            self.specs[node.id] = spec
            self.ports[node.id] = spec.output_ports(node.config)
            self._config(node, spec)

    def _retry_delay(self, node: Node, delay: str | float) -> None:
        try:
            _non_negative_seconds(delay)
        except DurationError as exc:
            self.add("bad_duration", node.id, f"node \"{node.id}\" ({node.type}): retry.base_delay: {exc}")

    def _config(self, node: Node, spec: NodeType) -> None:
        try:
            spec.config_model.model_validate(node.config)
        except ValidationError as exc:
            fields = list(spec.config_model.model_fields)
            aliases = [f.alias or name for name, f in spec.config_model.model_fields.items()]
            for error in exc.errors(include_url=False):
                path = ".".join(str(p) for p in error["loc"]) or "config"
                where = f"node \"{node.id}\" ({node.type})"
                kind = error["type"]
                if kind == "extra_forbidden" and len(error["loc"]) == 1:
                    key = str(error["loc"][0])
                    known = ", ".join(aliases) if aliases else "none"
                    self.add(
                        "unknown_config_key",
                        node.id,
                        f"{where}: unknown config key \"{key}\"{_did_you_mean(key, aliases or fields)} "
                        f"(keys: {known})",
                    )
                elif kind == "extra_forbidden":
                    self.add("unknown_config_key", node.id, f"{where}: unknown config key \"{path}\"; remove it")
                elif kind == "bad_duration":
                    self.add("bad_duration", node.id, f"{where}: {path}: {error['msg']}")
                elif kind == "bad_template":
                    fix = "check its {{ }} and {% %} pairs"
                    self.add("bad_template", node.id, f"{where}: {path}: {error['msg']}; {fix}")
                elif kind == "missing":
                    self.add("invalid_config", node.id, f"{where}: config.{path} is required; set it")
                elif kind == "blank":
                    self.add("invalid_config", node.id, f"{where}: config.{path} is empty; it is required, set it")
                else:
                    self.add("invalid_config", node.id, f"{where}: config.{path}: {error['msg']}; correct the value")

    def _edges(self) -> None:
        for index, edge in enumerate(self.flow.edges):
            if edge.from_ not in self.nodes or edge.to not in self.nodes:
                for end in (edge.from_, edge.to):
                    if end not in self.nodes:
                        hint = self._hint(end, self.nodes)
                        problem = f"{_edge_name(index, edge)}: no node \"{end}\"{hint}"
                        self.add("edge_unknown_node", None, f"{problem}; reconnect the edge or delete it")
                continue
            port = self._edge_port(index, edge)
            if port is None:
                continue
            target_spec = self.specs.get(edge.to)
            if target_spec is not None and not target_spec.has_input:
                self.add(
                    "edge_unknown_port",
                    edge.to,
                    f"{_edge_name(index, edge)}: \"{edge.to}\" is a trigger and has no input; remove the edge",
                )
                continue
            ports = self._edge_ports.setdefault((edge.from_, edge.to), set())
            if port not in ports:
                ports.add(port)
                self.out_edges.setdefault(edge.from_, []).append((port, edge.to))

    def _edge_port(self, index: int, edge: Edge) -> str | None:
        """The output port an edge leaves from, or None (reported) when the source has no such port."""
        if edge.from_ not in self.specs:
            return edge.port or "out"  # unknown type: already reported, its ports are unknown
        ports = self.ports[edge.from_]
        if edge.port is not None and edge.port in ports:
            return edge.port
        if edge.port is None and len(ports) == 1:
            return ports[0]
        where = _edge_name(index, edge)
        if not ports:
            message = f"{where}: \"{edge.from_}\" is a terminal and has no output; remove the edge"
        elif edge.port is None:
            message = f"{where}: \"{edge.from_}\" has several outputs ({', '.join(ports)}); name the port"
        else:
            message = (
                f"{where}: \"{edge.from_}\" has no output port \"{edge.port}\"{_did_you_mean(edge.port, ports)} "
                f"(ports: {', '.join(ports)})"
            )
        self.add("edge_unknown_port", edge.from_, message)
        return None

    def _triggers(self) -> None:
        triggers = [n for n, s in self.specs.items() if s.kind == "trigger"]
        if not triggers:
            self.add("no_trigger", None, "the flow has no trigger; add one (e.g. trigger.manual) so runs can start")
        webhooks = [n for n in triggers if self.specs[n].type == "trigger.webhook"]
        for extra in webhooks[1:]:
            self.add(
                "duplicate_webhook_trigger",
                extra,
                f"node \"{extra}\": a flow has at most one webhook trigger "
                f"(\"{webhooks[0]}\" is the first); remove one",
            )
        by_event: dict[str, str] = {}
        for node_id in triggers:
            if self.specs[node_id].type != "trigger.event":
                continue
            event_type = self.nodes[node_id].config.get("event_type")
            if not isinstance(event_type, str):
                continue
            if event_type not in EVENT_TYPES:
                self.add(
                    "unknown_event_type",
                    node_id,
                    f"node \"{node_id}\": event type \"{event_type}\" is not one the engine publishes"
                    f"{_did_you_mean(event_type, EVENT_TYPES)} (known: {', '.join(EVENT_TYPES)})",
                )
            elif event_type not in PUBLISHED_EVENT_TYPES:
                self.add("event_never_published", node_id, never_published_message(node_id, event_type))
            elif event_type in by_event:
                self.add(
                    "duplicate_event_trigger",
                    node_id,
                    f"node \"{node_id}\": \"{by_event[event_type]}\" already triggers on \"{event_type}\"; keep one",
                )
            else:
                by_event[event_type] = node_id

    def _cycles(self) -> bool:
        if self.graph.acyclic:
            return False
        for cycle in self.graph.cycles(MAX_CYCLES_LISTED):
            path = " → ".join([*cycle, cycle[0]])
            self.add("cycle", cycle[0], f"the graph has a cycle: {path}; remove an edge (use foreach to iterate)")
        return True

    def _node_rules(self, limits: dict[str, float]) -> None:
        limit = limits["max_delay"]
        for node_id, spec in self.specs.items():
            config = self.nodes[node_id].config
            if spec.type in ("queue", "approval"):
                key = "delay" if spec.type == "queue" else "timeout"
                try:
                    seconds = _duration_seconds(config.get(key))
                except DurationError:
                    continue
                if seconds > limit:
                    code = "delay_too_long" if spec.type == "queue" else "decision_time_too_long"
                    what = "delay" if spec.type == "queue" else "decision timeout"
                    self.add(
                        code,
                        node_id,
                        f"node \"{node_id}\" ({spec.type}): {what} {config.get(key)} is above the "
                        f"{_fmt(limit)} limit (settings.max_delay); shorten it or split the wait",
                    )
            if spec.type == "approval":
                self._approval_v2(node_id, config)
            if spec.type == "trigger.schedule":
                self._schedule(node_id, config)
            elif spec.type == "budget.reserve":
                self._reserve_target(node_id, config)
            elif spec.type == "wait.callback":
                self._callback_timeout(node_id, config, limit)

    def _approval_v2(self, node_id: str, config: dict[str, Any]) -> None:
        """Approvals v2: a quorum the listed approvers can reach; an escalation before the timeout."""
        required = config.get("required", 1)
        approvers = config.get("approvers", "any")
        extra = config.get("escalate_to")
        if isinstance(required, int) and isinstance(approvers, list) and extra != "any":
            listed = approvers + (extra if isinstance(extra, list) else [])
            names = {name for name in listed if isinstance(name, str)}  # other items: invalid_config says so
            if required > len(names):
                self.add("quorum_unreachable", node_id,
                         f"node \"{node_id}\" (approval): required is {required} but only {len(names)} "
                         f"approver(s) are listed ({', '.join(sorted(names)) or 'none'}); list more approvers, "
                         "use \"any\", or lower required")
        if config.get("remind_every") is not None:
            try:
                every = _duration_seconds(config.get("remind_every"))
            except DurationError:
                every = 1.0  # bad_duration or invalid_config already says so
            if every <= 0:
                self.add("bad_duration", node_id,
                         f"node \"{node_id}\" (approval): remind_every {config.get('remind_every')} must be above 0; "
                         "give an interval such as 4h, or remove remind_every")
        if config.get("escalate_after") is None:
            return
        try:
            after = _duration_seconds(config.get("escalate_after"))
            timeout = _duration_seconds(config.get("timeout"))
        except DurationError:
            return  # bad_duration or invalid_config already says so
        if after >= timeout:
            self.add("escalation_after_timeout", node_id,
                     f"node \"{node_id}\" (approval): escalate_after {config.get('escalate_after')} is not shorter "
                     f"than the timeout {config.get('timeout')}, so the escalation could never happen; shorten "
                     "escalate_after or lengthen the timeout")

    def _callback_timeout(self, node_id: str, config: dict[str, Any], limit: float) -> None:
        try:
            seconds = _duration_seconds(config.get("timeout"))
        except DurationError:
            return  # bad_duration or invalid_config already says so
        if seconds > limit:
            self.add("delay_too_long", node_id,
                     f"node \"{node_id}\" (wait.callback): timeout {config.get('timeout')} is above the "
                     f"{_fmt(limit)} limit (settings.max_delay); shorten it or split the wait")

    def _retry_waits(self, max_wait: float, cyclic: bool) -> None:
        """A retry's backoff is a park: all of a step's waits must fit in `max_wait`; inside a foreach, where a
        step cannot park and the worker waits instead, they must stay short."""
        in_loop = {} if cyclic else self._foreach_members()
        for node_id, node in self.nodes.items():
            retry = node.retry
            if retry is None or retry.max_attempts < 2:
                continue
            try:
                wait_seconds(retry.max_interval, "retry.max_interval")
            except DurationError as exc:
                self.add("bad_duration", node_id, f"node \"{node_id}\": {exc}")
                continue
            try:
                total = total_backoff(retry)
                cap = retry_delay(retry, retry.max_attempts - 1)
            except DurationError:
                continue  # a bad base_delay or a negative wait is the duration check's to report
            plan = (f"{retry.max_attempts - 1} retries wait {_fmt(total)} in all (the longest {_fmt(cap)}, "
                    f"retry.max_interval {retry.max_interval})")
            if total > max_wait:
                self.add("retry_exceeds_max_wait", node_id,
                         f"node \"{node_id}\": its {plan}, above the {_fmt(max_wait)} a run may wait "
                         "(settings.max_wait); lower max_attempts, base_delay or max_interval")
            loop = in_loop.get(node_id)
            if loop is not None and total > INLINE_RETRY_WAIT_LIMIT:
                self.add("retry_wait_in_foreach", node_id,
                         f"node \"{node_id}\" runs inside foreach \"{loop}\", where a retry waits in the worker "
                         f"instead of parking; its {plan}, above the {_fmt(INLINE_RETRY_WAIT_LIMIT)} allowed there: "
                         "lower max_attempts, base_delay or max_interval, or move the step out of the loop")

    def _foreach_members(self) -> dict[str, str]:
        """Each node inside a foreach body, with a foreach it runs in."""
        members: dict[str, str] = {}
        for node_id, spec in self.specs.items():
            if spec.kind != "forEach":
                continue
            for port, target in self.out_edges.get(node_id, []):
                if port == "item":
                    for member in (target, *self.graph.members(self.graph.descendants(target))):
                        members[member] = node_id
        return members

    def _schedule(self, node_id: str, config: dict[str, Any]) -> None:
        cron, every = config.get("cron"), config.get("every")
        where = f"node \"{node_id}\" (trigger.schedule)"
        if cron is None and every is None:
            self.add("bad_schedule", node_id, f"{where}: set cron (e.g. \"0 9 * * 1-5\") or every (e.g. \"15m\")")
            return
        if cron is not None and every is not None:
            self.add("bad_schedule", node_id, f"{where}: set cron or every, not both")
        if cron is not None and (not isinstance(cron, str) or not croniter.is_valid(cron)):
            example = "e.g. \"0 9 * * 1-5\""
            self.add("bad_schedule", node_id, f"{where}: cron {cron!r} is not a valid cron expression, {example}")
        if every is not None:
            try:
                seconds = parse_duration(every)
            except DurationError as exc:
                self.add("bad_duration", node_id, f"{where}: every: {exc}")
                return
            if seconds <= 0:
                self.add("bad_schedule", node_id, f"{where}: every {every!r} must be a positive interval")
        timezone = config.get("timezone")
        if isinstance(timezone, str):
            from zoneinfo import ZoneInfo

            try:
                ZoneInfo(timezone)
            except Exception:
                self.add("bad_schedule", node_id, f"{where}: unknown timezone {timezone!r}, e.g. \"Europe/Berlin\"")

    def _reserve_target(self, node_id: str, config: dict[str, Any]) -> None:
        target = config.get("for")
        if not isinstance(target, str) or not target:
            return  # invalid_config already says it is missing
        where = f"node \"{node_id}\" (budget.reserve)"
        spec = self.specs.get(target)
        if spec is None or spec.type != "ai.model":
            if self._models is None:
                self._models = [n for n, s in self.specs.items() if s.type == "ai.model"]
            hint = self._hint(target, self._models) if target not in self.nodes else ""
            what = "no such node" if target not in self.nodes else f"a {self.nodes[target].type}, not an ai.model"
            problem = f"{where}: \"for\" names \"{target}\" ({what}){hint}"
            self.add("reserve_target_invalid", node_id, f"{problem}; set it to the ai.model this budget pays for")

    def _reserve_targets_downstream(self) -> None:
        for node_id, target in self._reserves():
            spec = self.specs.get(target) if target is not None else None
            if target is None or spec is None or spec.type != "ai.model" or self.graph.reaches(node_id, target):
                continue
            self.add(
                "reserve_target_invalid",
                node_id,
                f"node \"{node_id}\" (budget.reserve): ai.model \"{target}\" is not downstream of it; "
                "connect the reserve before the model call",
            )

    def _reserves(self) -> list[tuple[str, str | None]]:
        """(reserve node, the node its `for` names, if a string) for every budget.reserve."""
        found: list[tuple[str, str | None]] = []
        for node_id, spec in self.specs.items():
            if spec.type == "budget.reserve":
                target = self.nodes[node_id].config.get("for")
                found.append((node_id, target if isinstance(target, str) else None))
        return found

    def _finance_chain(self) -> None:
        parking = [n for n, s in self.specs.items() if s.type in ("queue", "approval", "wait.callback")]
        if not parking:
            return
        parking_mask = self.graph.mask(parking)
        document_order = {node_id: index for index, node_id in enumerate(self.nodes)}
        for node_id, target in self._reserves():
            if not self.graph.descendants(node_id) & parking_mask:
                continue
            reached = self.graph.reachable_avoiding(node_id, target, parking_mask)
            for parked in sorted(self.graph.members(reached), key=document_order.__getitem__):
                self.add(
                    "park_inside_finance_chain",
                    parked,
                    f"node \"{parked}\" ({self.nodes[parked].type}) can be reached from budget.reserve \"{node_id}\" "
                    f"before the model \"{target}\" it reserves for; a parked run holds no reserve, "
                    f"so move the wait before the reserve or after the model",
                )

    def _reachability(self) -> None:
        triggers = [n for n, s in self.specs.items() if s.kind == "trigger"]
        reached = self.graph.mask(triggers)
        for trigger in triggers:
            reached |= self.graph.descendants(trigger)
        unreached = set(self.graph.members(self.graph.mask(self.nodes) & ~reached))
        for node_id in self.nodes:
            if node_id in unreached:
                self.add(
                    "unreachable_node",
                    node_id,
                    f"node \"{node_id}\": no trigger reaches it, so it never runs; connect it or delete it",
                    "warning",
                )

    def _joins(self) -> None:
        for node_id, spec in self.specs.items():
            inputs = len(self.graph.pred[node_id])
            if spec.kind == "join" and inputs < 2:
                self.add(
                    "join_needs_two_inputs",
                    node_id,
                    f"node \"{node_id}\" (join): has {inputs} incoming edge(s); "
                    "a join merges two or more branches; connect another branch or remove the join",
                )

    def _unconnected_ports(self) -> None:
        for node_id, ports in self.ports.items():
            used = {port for port, _ in self.out_edges.get(node_id, [])}
            for port in ports:
                if port not in used:
                    self.add(
                        "port_unconnected",
                        node_id,
                        f"node \"{node_id}\": output \"{port}\" is not connected; runs that take it end there",
                        "warning",
                    )

    def _unsafe_templates(self) -> None:
        for node_id, spec in self.specs.items():
            for path, source in template_fields(spec.type, self.nodes[node_id].config):
                try:
                    unsafe = template_reads(source).unsafe
                except TemplateProblem:
                    continue  # bad_template already reported by the config check
                if unsafe:
                    names = ", ".join(unsafe)
                    self.add(
                        "template_unsafe",
                        node_id,
                        f"node \"{node_id}\": {path} reaches for Python internals ({names}), which the sandbox "
                        "refuses at run time; read inputs, state and run values only",
                    )

    def _callback_urls(self) -> None:
        """`callback_url("x")` must name a `wait.callback` node of this flow."""
        waits: list[str] | None = None
        for node_id, spec in self.specs.items():
            for path, source in template_fields(spec.type, self.nodes[node_id].config):
                try:
                    named = template_callback_refs(source).nodes
                except TemplateProblem:
                    continue  # bad_template already reported by the config check
                for target in sorted(named):
                    target_spec = self.specs.get(target)
                    if target_spec is not None and target_spec.type == "wait.callback":
                        continue
                    if waits is None:
                        waits = [n for n, s in self.specs.items() if s.type == "wait.callback"]
                    what = "no such node" if target not in self.nodes else f"a {self.nodes[target].type}"
                    hint = self._hint(target, waits) if target not in self.nodes else ""
                    known = ", ".join(f"\"{w}\"" for w in waits[:5]) or "none in this flow"
                    self.add("callback_unknown_node", node_id,
                             f"node \"{node_id}\": {path} calls callback_url(\"{target}\") ({what}){hint}; "
                             f"name a wait.callback node (wait.callback nodes: {known})")

    def _state_flow(self) -> None:
        # Writers of each key in topological order, so the nearest possible upstream writer is tried first.
        writers: dict[str, list[str]] = {}
        for node_id in self.graph.order or []:
            spec = self.specs.get(node_id)
            if spec is not None:
                for key in written_keys(spec.type, node_id, self.nodes[node_id].config):
                    writers.setdefault(key, []).append(node_id)
        positions = {key: [self.graph.position[w] for w in nodes] for key, nodes in writers.items()}
        for node_id, spec in self.specs.items():
            self._template_refs(node_id, spec, writers, positions)
        self._write_conflicts(writers)

    def _written_upstream(
        self, node_id: str, key: str, writers: dict[str, list[str]], positions: dict[str, list[int]]
    ) -> bool:
        nodes = writers.get(key)
        if not nodes:
            return False
        below = bisect.bisect_left(positions[key], self.graph.position[node_id])
        if any(self.graph.reaches(nodes[i], node_id) for i in range(below - 1, max(below - 8, 0) - 1, -1)):
            return True
        if below <= 8:
            return False
        # Many earlier writers, none of the nearest upstream (a key written on parallel branches): ask at once.
        mask = self._writer_masks.get(key)
        if mask is None:
            mask = self._writer_masks[key] = self.graph.mask(nodes)
        return bool(self.graph.ancestors(node_id) & mask)

    def _template_refs(
        self, node_id: str, spec: NodeType, writers: dict[str, list[str]], positions: dict[str, list[int]]
    ) -> None:
        reported: set[str] = set()
        for path, source in template_fields(spec.type, self.nodes[node_id].config):
            try:
                refs = template_state_refs(source)
            except TemplateProblem:
                continue  # bad_template already reported by the config check
            for ref in sorted(refs - reported):
                if self._written_upstream(node_id, ref, writers, positions):
                    continue
                reported.add(ref)
                if ref not in writers:
                    why = f"which no node writes{self._hint(ref, writers)}"
                else:
                    written_by = ", ".join(f"\"{w}\"" for w in writers[ref][:3])
                    why = f"which only {written_by} write(s), not upstream of this node; "
                    why += "connect them or read another key"
                self.add(
                    "template_unknown_reference",
                    node_id,
                    f"node \"{node_id}\": {path} reads state.{ref}, {why}",
                    "warning",
                )

    def _write_conflicts(self, writers: dict[str, list[str]]) -> None:
        reducers: dict[str, list[str]] = {}
        for node_id, spec in self.specs.items():
            reduce = self.nodes[node_id].config.get("reduce")
            if spec.kind == "join" and isinstance(reduce, dict):
                for key in reduce:
                    reducers.setdefault(key, []).append(node_id)
        graph = self.graph
        for key, nodes in writers.items():
            if len(nodes) < 2:
                continue
            writer_mask = graph.mask(nodes)
            reducing_joins = graph.mask(reducers.get(key, ()))
            # One warning per conflicting writer (naming the first writer it races), not one per pair:
            # fifty parallel writers of a key are forty-nine problems, not 1,225.
            raced_first: dict[str, str] = {}
            reported = 0
            # Writers whose branch climbs far above the others' (the rejected side of a long approval chain): the
            # pairs are settled from the other writer's side instead, where the climb is short.
            climbing = 0
            for first in nodes:
                # Later writers `first` does not reach: in topological order nothing later reaches back to it,
                # so these are the writers unordered with it.
                later = writer_mask >> (graph.position[first] + 1) << (graph.position[first] + 1)
                candidates = later & ~graph.descendants(first) & ~reported
                if candidates:
                    candidates = self._not_reduced_with(first, candidates, reducing_joins)
                if not candidates:
                    continue
                racing = self._racing(first, candidates, WALK_BUDGET)
                if racing is None:
                    climbing |= graph.bit(first)
                    continue
                for second in graph.members(racing):
                    reported |= graph.bit(second)
                    raced_first[second] = first
            if climbing:
                self._race_climbing_writers(nodes, climbing, reducing_joins, raced_first)
            position = graph.position
            for second, first in sorted(raced_first.items(), key=lambda pair: (position[pair[1]], position[pair[0]])):
                self.add(
                    "write_conflict",
                    second,
                    f"nodes \"{first}\" and \"{second}\" run in parallel and both write state.{key}; "
                    f"add a join with a reducer for \"{key}\" or use different keys",
                    "warning",
                )

    def _race_climbing_writers(
        self, nodes: list[str], climbing: int, reducing_joins: int, raced_first: dict[str, str]
    ) -> None:
        """Settle the pairs of `climbing` writers from each later writer's side; keep the earliest first per writer.

        The relation is symmetric, so a later writer can ask which earlier climbing writers race it.
        """
        graph = self.graph
        for second in nodes:
            earlier = climbing & ((1 << graph.position[second]) - 1) & ~graph.ancestors(second)
            if earlier:
                earlier = self._not_reduced_with(second, earlier, reducing_joins)
            if not earlier:
                continue
            racing = self._racing(second, earlier, None)
            if not racing:
                continue
            first = next(graph.members(racing))  # the earliest in topological order
            known = raced_first.get(second)
            if known is None or graph.position[first] < graph.position[known]:
                raced_first[second] = first

    def _not_reduced_with(self, writer: str, candidates: int, reducing_joins: int) -> int:
        """`candidates` less those meeting `writer` again at a join that reduces the key."""
        graph = self.graph
        joins_below = graph.descendants(writer) & reducing_joins
        if not joins_below:
            return candidates
        if joins_below.bit_count() < candidates.bit_count():
            for join in graph.members(joins_below):
                candidates &= ~graph.ancestors(join)
            return candidates
        kept = 0
        for second in graph.members(candidates):
            if not graph.descendants(second) & joins_below:
                kept |= graph.bit(second)
        return kept

    def _racing(self, writer: str, candidates: int, budget: int | None) -> int | None:
        """Of `candidates` (writers unordered with `writer`), those that may run in parallel with it.

        They do when some fork sends one run down two branches, one leading only to `writer`, one only to the
        candidate. A fork whose every branch reaches both (a diamond that joins again) does not separate them;
        router and approval ports are exclusive choices, so branches from different ports of one never run
        together. None when finding the forks would walk up more than `budget` nodes.
        """
        graph = self.graph
        # With no router or approval among their common ancestors, the lowest of those has no child above both:
        # it splits them, and it is a fork. Without a common ancestor (different triggers) nothing splits them.
        racing, hard = self._split_by_common_ancestors(writer, candidates)
        if not hard:
            return racing
        # A fork separates `writer` from a candidate through two children it sends one run to together, one
        # leading to `writer`: so it is an ancestor of `writer` with such children. Few such: try each. Many (a
        # long spine of parallel steps): only those next to `writer` or its ancestors that miss some candidate.
        splitting = graph.ancestors(writer) & self._splitting
        if not splitting:
            return racing
        forks: Iterable[str]
        if splitting.bit_count() <= FEW_FORKS:
            forks = graph.members(splitting)
        else:
            found = self._forks_near(writer, hard, budget)
            if found is None:
                return None
            forks = found
        toward_writer = graph.ancestors(writer) | graph.bit(writer)
        separated = 0
        for fork in forks:
            for children in self._children_by_port(fork):
                leading_to_writer = children & toward_writer
                if not leading_to_writer or leading_to_writer == children:
                    continue
                # Candidates on another child's branch, unless every child leading to `writer` reaches them too.
                reached_from_all = -1
                for child in graph.members(leading_to_writer):
                    reached_from_all &= graph.descendants(child)
                elsewhere = 0
                for child in graph.members(children & ~toward_writer):
                    elsewhere |= graph.descendants(child) | graph.bit(child)
                separated |= elsewhere & ~reached_from_all
        return racing | (hard & separated)

    def _split_by_common_ancestors(self, writer: str, candidates: int) -> tuple[int, int]:
        """(`candidates` sharing ancestors with `writer`, none a router or approval; those sharing one that is)."""
        graph = self.graph
        if candidates.bit_count() <= FEW_CANDIDATES:
            # A few: compare ancestors directly rather than index the whole graph for them.
            above_writer, exclusive = graph.ancestors(writer), self._exclusive
            racing = hard = 0
            for candidate in graph.members(candidates):
                common = above_writer & graph.ancestors(candidate)
                if common & exclusive:
                    hard |= graph.bit(candidate)
                elif common:
                    racing |= graph.bit(candidate)
            return racing, hard
        if self._below_exclusive is None:
            self._below_exclusive = graph.below_ancestors_in(self._exclusive)
        below_exclusive = self._below_exclusive[writer]
        racing = candidates & ~below_exclusive
        if racing:
            racing &= graph.related(writer)
        return racing, candidates & below_exclusive

    def _forks_near(self, writer: str, hard: int, budget: int | None) -> set[str] | None:
        """Parents of `writer` and of its ancestors that do not reach every node of `hard`, found walking up.

        None when the walk passes more than `budget` such ancestors.
        """
        forks: set[str] = set()
        near, stack = {writer}, [writer]
        while stack:
            for parent in self.graph.pred[stack.pop()]:
                forks.add(parent)
                if parent not in near and self.graph.descendants(parent) & hard != hard:
                    near.add(parent)
                    stack.append(parent)
            if budget is not None and len(near) > budget:
                return None
        return forks

    @property
    def _splitting(self) -> int:
        """Mask of nodes that send one run to two or more children together (per port, when ports are exclusive)."""
        if self._splitting_mask is None:
            exclusive = self._exclusive
            found = []
            for node_id, edges in self.out_edges.items():
                if len(edges) < 2:
                    continue
                if exclusive >> self.graph.position[node_id] & 1:
                    ports = [port for port, _ in edges]
                    if len(set(ports)) < len(ports):
                        found.append(node_id)
                elif len({target for _, target in edges}) > 1:
                    found.append(node_id)
            self._splitting_mask = self.graph.mask(found)
        return self._splitting_mask

    @property
    def _exclusive(self) -> int:
        """Mask of routers and approvals: nodes whose ports are exclusive choices."""
        if self._exclusive_mask is None:
            self._exclusive_mask = self.graph.mask(
                n for n, s in self.specs.items() if s.kind == "router" or s.type in ("approval", "wait.callback")
            )
        return self._exclusive_mask

    def _children_by_port(self, node_id: str) -> list[int]:
        """The masks of children `node_id` sends one run to together: one per port if exclusive, else one for all."""
        found = self._port_children.get(node_id)
        if found is None:
            by_port: dict[str, int] = {}
            for port, target in self.out_edges.get(node_id, []):
                by_port[port] = by_port.get(port, 0) | self.graph.bit(target)
            if self._exclusive & self.graph.bit(node_id):
                found = list(by_port.values())
            else:
                everything = 0
                for mask in by_port.values():
                    everything |= mask
                found = [everything]
            self._port_children[node_id] = found
        return found


def never_published_message(node_id: str, event_type: str) -> str:
    """Why a `trigger.event` on a listed type the engine does not publish is refused."""
    published = ", ".join(t for t in EVENT_TYPES if t in PUBLISHED_EVENT_TYPES)
    return (f"node \"{node_id}\": the engine lists event type \"{event_type}\" but never publishes it, so this "
            f"trigger would never start a run; listen to one it publishes ({published})")


def _non_negative_seconds(value: Any) -> float:
    """`_duration_seconds`, refusing a negative duration too."""
    seconds = _duration_seconds(value)
    if seconds < 0:
        raise DurationError(f"{value!r} is negative; durations are zero or more")
    return seconds


def _undeclared_inputs(flow: Flow) -> list[Diagnostic]:
    """Warnings for templates reading `inputs.X` the flow does not declare (a run refuses undeclared inputs)."""
    found: list[Diagnostic] = []
    declared = ", ".join(flow.inputs) or "none"
    for node in flow.nodes:
        if node.type not in CATALOG:
            continue
        reported: set[str] = set()
        for path, source in template_fields(node.type, node.config):
            try:
                refs = template_input_refs(source)
            except TemplateProblem:
                continue  # bad_template already reported by the config check
            for ref in sorted(refs - reported - flow.inputs.keys()):
                reported.add(ref)
                fix = _did_you_mean(ref, flow.inputs) or "; add it to the flow's inputs"
                found.append(Diagnostic(
                    "template_unknown_reference", "warning", node.id,
                    f"node \"{node.id}\": {path} reads inputs.{ref}, which the flow does not declare "
                    f"(declared: {declared}){fix}",
                ))
    return found


def _duration_seconds(value: Any) -> float:
    """`parse_duration`, remembered for text: a big flow repeats a few delays ("24h") hundreds of times."""
    return _text_duration_seconds(value) if isinstance(value, str) else parse_duration(value)


@functools.lru_cache(maxsize=1024)
def _text_duration_seconds(text: str) -> float:
    return parse_duration(text)


def _edge_name(index: int, edge: Edge) -> str:
    return f"edge #{index + 1} ({edge.from_} → {edge.to})"


def _fmt(seconds: float) -> str:
    return format_duration(seconds)
