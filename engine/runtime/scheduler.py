"""Scheduling by kind with dead-path elimination: which nodes are ready, which are skipped.

Pure: it knows kinds, edges and what happened so far, never bodies, Redis or SQL. An edge is
*delivered* when its source completed through its port, *skipped* when the source was skipped or
took other ports (or lies outside this run's scope, e.g. an unfired trigger), else *pending*.
"""

from __future__ import annotations

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
        if origin_ports:
            self.status[origin] = "done"
            self.taken[origin] = origin_ports

    # --- what happened ----------------------------------------------------------------------

    def start(self, node_id: str) -> None:
        self.status[node_id] = "running"

    def complete(self, node_id: str, ports: tuple[str, ...] | list[str]) -> None:
        self.status[node_id] = "done"
        self.taken[node_id] = tuple(ports)

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
        """(nodes ready to run, nodes newly skipped), in flow order; skips propagate to a fixpoint."""
        ready: list[str] = []
        skipped: list[str] = []
        changed = True
        while changed:
            changed = False
            for node_id in self.plan.nodes:
                if node_id not in self.scope or self.status[node_id] != "pending" or node_id in ready:
                    continue
                verdict = self._verdict(node_id)
                if verdict == "ready":
                    ready.append(node_id)
                elif verdict == "skip":
                    self.status[node_id] = "skipped"
                    skipped.append(node_id)
                    changed = True
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
