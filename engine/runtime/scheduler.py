"""Scheduling by kind with dead-path elimination: which nodes are ready, which are skipped.

Pure: it knows kinds, edges and what happened so far, never bodies, Redis or SQL. An edge is
*delivered* when its source completed through its port, *skipped* when the source was skipped or
took other ports (or lies outside this run's scope, e.g. an unfired trigger), else *pending*.

A node's verdict changes only when one of its sources finishes, so `advance()` looks again only at the
nodes below what finished since it last ran (and at those it found ready), not at the whole flow: a run
of an N-node chain costs N verdicts, not N².
"""

from __future__ import annotations

import heapq
from typing import Any, Literal

from engine.runtime.plan import EdgeRef, FlowPlan

NodeStatus = Literal["pending", "running", "done", "skipped"]
EdgeState = Literal["delivered", "skipped", "pending"]


class Scheduler:
    """Node statuses of one scope (a run's top level, or one foreach iteration)."""

    def __init__(self, plan: FlowPlan, scope: frozenset[str], origin: str, origin_ports: tuple[str, ...] = ()):
        self.plan = plan
        self.scope = scope
        self.origin = origin
        self.status: dict[str, NodeStatus] = {node_id: "pending" for node_id in scope}
        self.taken: dict[str, tuple[str, ...]] = {}
        self._order = [node_id for node_id in plan.nodes if node_id in scope]
        """The scope's nodes in flow order, the order verdicts are given in."""
        self._index = {node_id: index for index, node_id in enumerate(self._order)}
        self._unsettled: set[int] = set(self._index.values())
        """Pending nodes whose verdict may have changed (or was "ready") since `advance` last looked."""
        if origin_ports:
            self.status[origin] = "done"
            self.taken[origin] = origin_ports

    # --- what happened ----------------------------------------------------------------------

    def start(self, node_id: str) -> None:
        self.status[node_id] = "running"

    def complete(self, node_id: str, ports: tuple[str, ...] | list[str]) -> None:
        self.status[node_id] = "done"
        self.taken[node_id] = tuple(ports)
        self._unsettle_below(node_id)

    def _unsettle_below(self, node_id: str) -> None:
        for edge in self.plan.outgoing.get(node_id, ()):
            index = self._index.get(edge.target)
            if index is not None:
                self._unsettled.add(index)

    def edge_state(self, edge: EdgeRef) -> EdgeState:
        if edge.source not in self.scope:
            return "skipped"
        status = self.status[edge.source]
        if status == "done":
            return "delivered" if edge.port in self.taken.get(edge.source, ()) else "skipped"
        if status == "skipped":
            return "skipped"
        return "pending"

    # --- what comes next --------------------------------------------------------------------

    def advance(self) -> tuple[list[str], list[str]]:
        """(nodes ready to run, nodes newly skipped), in flow order; skips propagate to a fixpoint.

        Passes over the flow in order, as many as skips make necessary: a skip unsettles the nodes below it,
        looked at later in this pass when they come after it, else in the next pass.
        """
        ready: list[str] = []
        is_ready: set[str] = set()
        skipped: list[str] = []
        this_pass = [index for index in self._unsettled if self.status[self._order[index]] == "pending"]
        heapq.heapify(this_pass)
        self._unsettled = set()
        queued = set(this_pass)
        next_pass: set[int] = set()
        while this_pass:
            index = heapq.heappop(this_pass)
            node_id = self._order[index]
            if self.status[node_id] != "pending" or node_id in is_ready:
                continue
            verdict = self._verdict(node_id)
            if verdict == "ready":
                ready.append(node_id)
                is_ready.add(node_id)
                self._unsettled.add(index)  # still to start: the next call gives it again
            elif verdict == "skip":
                self.status[node_id] = "skipped"
                skipped.append(node_id)
                for edge in self.plan.outgoing.get(node_id, ()):
                    below = self._index.get(edge.target)
                    if below is None or self.status[edge.target] != "pending":
                        continue
                    if below > index and below not in queued:
                        heapq.heappush(this_pass, below)
                        queued.add(below)
                    elif below < index:
                        next_pass.add(below)
            if not this_pass and next_pass:
                this_pass = sorted(next_pass)
                queued = set(this_pass)
                next_pass = set()
        return ready, skipped

    def _verdict(self, node_id: str) -> Literal["ready", "skip", "wait"]:
        if self.plan.kinds[node_id] == "trigger":
            return "ready" if node_id == self.origin else "skip"
        states = [self.edge_state(edge) for edge in self.plan.incoming[node_id]]
        if not states:
            return "skip"
        join_any = self.plan.kinds[node_id] == "join" and self.plan.nodes[node_id].config.get("mode") == "any"
        if join_any and "delivered" in states:
            return "ready"
        if "pending" in states:
            return "wait"
        return "ready" if "delivered" in states else "skip"

    def delivered_sources(self, node_id: str) -> list[EdgeRef]:
        return [edge for edge in self.plan.incoming[node_id] if self.edge_state(edge) == "delivered"]

    def finished(self) -> bool:
        return all(status in ("done", "skipped") for status in self.status.values())

    # --- checkpoint ---------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"status": dict(self.status), "taken": {k: list(v) for k, v in self.taken.items()}}

    def restore(self, data: dict[str, Any]) -> None:
        for node_id, status in data.get("status", {}).items():
            if node_id in self.status:
                self.status[node_id] = status
        self.taken = {k: tuple(v) for k, v in data.get("taken", {}).items()}
        self._unsettled = set(self._index.values())
