"""A flow compiled for scheduling: nodes by id, kinds, resolved edge ports, foreach bodies, scopes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property

from engine.catalog import CATALOG, Kind
from engine.flow import Flow, Node


@dataclass(frozen=True)
class EdgeRef:
    """An edge with its output port resolved (an omitted port means the node's only one)."""

    source: str
    port: str
    target: str


@dataclass
class FlowPlan:
    """What the scheduler and executor need of a flow, computed once per published version."""

    flow: Flow
    nodes: dict[str, Node] = field(init=False)
    kinds: dict[str, Kind] = field(init=False)
    ports: dict[str, tuple[str, ...]] = field(init=False)
    incoming: dict[str, list[EdgeRef]] = field(init=False)
    outgoing: dict[str, list[EdgeRef]] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = {node.id: node for node in self.flow.nodes}
        self.kinds = {}
        self.ports = {}
        for node in self.flow.nodes:
            spec = CATALOG.get(node.type)
            if spec is None:
                raise ValueError(f'node "{node.id}": unknown node type "{node.type}"; publish validates this')
            self.kinds[node.id] = spec.kind
            self.ports[node.id] = spec.output_ports(node.config)
        self.incoming = {node_id: [] for node_id in self.nodes}
        self.outgoing = {node_id: [] for node_id in self.nodes}
        for edge in self.flow.edges:
            ports = self.ports.get(edge.from_, ())
            port = edge.port if edge.port is not None else (ports[0] if ports else "out")
            ref = EdgeRef(edge.from_, port, edge.to)
            self.outgoing[edge.from_].append(ref)
            self.incoming[edge.to].append(ref)

    @cached_property
    def triggers(self) -> tuple[str, ...]:
        return tuple(node_id for node_id, kind in self.kinds.items() if kind == "trigger")

    @cached_property
    def _memo(self) -> dict[tuple[str, str], frozenset[str]]:
        """Scopes and lineages already computed: the flow never changes, so each is worked out once per
        plan (the worker's PlanCache keeps plans), not once per job or foreach iteration."""
        return {}

    def _memoized(self, what: str, node_id: str, compute: Callable[[str], frozenset[str]]) -> frozenset[str]:
        key = (what, node_id)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = compute(node_id)
        return found

    @staticmethod
    def _walk(starts: Iterable[str], step: Callable[[str], Iterable[str]]) -> frozenset[str]:
        seen: set[str] = set()
        stack = list(starts)
        while stack:
            node_id = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            stack.extend(step(node_id))
        return frozenset(seen)

    def reachable(self, starts: list[EdgeRef]) -> frozenset[str]:
        """Nodes reachable through `starts` (edge targets and everything after them)."""
        return self._walk((edge.target for edge in starts),
                          lambda node_id: (edge.target for edge in self.outgoing[node_id]))

    def foreach_body(self, foreach_id: str) -> frozenset[str]:
        """Nodes run once per item: everything reachable from the foreach's `item` port."""
        return self._memoized("body", foreach_id,
                              lambda n: self.reachable([e for e in self.outgoing[n] if e.port == "item"]))

    def _without_nested_bodies(self, nodes: frozenset[str]) -> frozenset[str]:
        owned: set[str] = set()
        for node_id in nodes:
            if self.kinds[node_id] == "forEach":
                owned |= self.foreach_body(node_id)
        return nodes - owned

    def trigger_scope(self, trigger_id: str) -> frozenset[str]:
        """Nodes a run started by `trigger_id` schedules at top level (foreach bodies excluded)."""
        return self._memoized("trigger", trigger_id, lambda n: self._without_nested_bodies(
            self.reachable(self.outgoing[n]) | {n}))

    def iteration_scope(self, foreach_id: str) -> frozenset[str]:
        """Nodes one iteration of `foreach_id` schedules (nested foreach bodies excluded)."""
        return self._memoized("iteration", foreach_id,
                              lambda n: self._without_nested_bodies(self.foreach_body(n)) | {n})

    def ancestors(self, node_id: str) -> frozenset[str]:
        return self._memoized("ancestors", node_id, lambda n: self._walk(
            (edge.source for edge in self.incoming[n]),
            lambda current: (edge.source for edge in self.incoming[current])))
