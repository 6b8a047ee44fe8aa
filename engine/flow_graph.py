"""A flow's node graph with reachability precomputed as bitsets.

Validation asks "does A reach B?" for many pairs; one pass over the topological
order answers all of them (each node's descendants and ancestors as a Python
int whose bit i is the node at topological position i), instead of one graph
search per question.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import networkx as nx


class FlowGraph:
    """Distinct node-to-node links of a flow; reachability once it is acyclic."""

    def __init__(self, node_ids: Iterable[str], links: Iterable[tuple[str, str]]) -> None:
        self.succ: dict[str, list[str]] = {}
        self.pred: dict[str, list[str]] = {}
        for node_id in node_ids:
            self.succ.setdefault(node_id, [])
            self.pred.setdefault(node_id, [])
        seen: set[tuple[str, str]] = set()
        for source, target in links:
            if (source, target) in seen:
                continue
            seen.add((source, target))
            self.succ[source].append(target)
            self.pred[target].append(source)
        self.order = self._topological_order()
        self.position: dict[str, int] = {}
        self._descendants: dict[str, int] = {}
        self._ancestors: dict[str, int] = {}
        self._related: dict[str, int] = {}
        if self.order is not None:
            self._index_reachability(self.order)

    @property
    def acyclic(self) -> bool:
        return self.order is not None

    def _topological_order(self) -> list[str] | None:
        remaining = {node_id: len(preds) for node_id, preds in self.pred.items()}
        ready = [node_id for node_id, count in remaining.items() if count == 0]
        order: list[str] = []
        while ready:
            node_id = ready.pop()
            order.append(node_id)
            for target in self.succ[node_id]:
                remaining[target] -= 1
                if remaining[target] == 0:
                    ready.append(target)
        return order if len(order) == len(self.succ) else None

    def _index_reachability(self, order: list[str]) -> None:
        self.position = {node_id: index for index, node_id in enumerate(order)}
        for node_id in reversed(order):
            mask = 0
            for target in self.succ[node_id]:
                mask |= self._descendants[target] | (1 << self.position[target])
            self._descendants[node_id] = mask

    def cycles(self, limit: int) -> list[list[str]]:
        """Up to `limit` cycles, each as its list of nodes."""
        graph = nx.DiGraph()
        graph.add_edges_from((s, t) for s, targets in self.succ.items() for t in targets)
        found: list[list[str]] = []
        for cycle in nx.simple_cycles(graph):
            found.append(list(cycle))
            if len(found) >= limit:
                break
        return found

    def bit(self, node_id: str) -> int:
        """The one-node mask of `node_id` (acyclic graphs only)."""
        return 1 << self.position[node_id]

    def mask(self, node_ids: Iterable[str]) -> int:
        """The mask holding `node_ids`."""
        mask = 0
        for node_id in node_ids:
            mask |= 1 << self.position[node_id]
        return mask

    def descendants(self, node_id: str) -> int:
        """Mask of every node reachable from `node_id` (not itself)."""
        return self._descendants[node_id]

    def ancestors(self, node_id: str) -> int:
        """Mask of every node that reaches `node_id` (not itself); computed for all nodes on first use."""
        if not self._ancestors and self.order is not None:
            for each in self.order:
                mask = 0
                for source in self.pred[each]:
                    mask |= self._ancestors[source] | (1 << self.position[source])
                self._ancestors[each] = mask
        return self._ancestors[node_id]

    def related(self, node_id: str) -> int:
        """Mask of every node that shares an ancestor with `node_id`: the only ones a fork above it can also reach."""
        if not self._related and self.order is not None:
            self._related = self.below_ancestors_in(self.mask(self.order))
        return self._related[node_id]

    def below_ancestors_in(self, wanted: int) -> dict[str, int]:
        """For each node, the mask of every node reachable from one of its ancestors in `wanted` (acyclic only).

        One pass in topological order: what a node's wanted ancestors reach is what its parents' reach, plus
        what each wanted parent reaches itself.
        """
        found: dict[str, int] = {}
        for node_id in self.order or []:
            mask = 0
            for source in self.pred[node_id]:
                mask |= found[source]
                if wanted >> self.position[source] & 1:
                    mask |= self._descendants[source]
            found[node_id] = mask
        return found

    def reaches(self, source: str, target: str) -> bool:
        """True when a path leads from `source` to `target`."""
        return bool(self._descendants[source] >> self.position[target] & 1)

    def members(self, mask: int) -> Iterator[str]:
        """The nodes in `mask`, in topological order."""
        while mask:
            low = mask & -mask
            yield self.order[low.bit_length() - 1]  # type: ignore[index]
            mask ^= low

    def reachable_avoiding(self, start: str, blocked: str | None, wanted: int) -> int:
        """Nodes of `wanted` reachable from `start` on paths that never enter `blocked`."""
        if blocked not in self.position or not self.reaches(start, blocked):
            return self._descendants[start] & wanted  # nothing to avoid: every path is open
        found = 0
        stack = [start]
        visited = {start}
        while stack:
            node_id = stack.pop()
            for target in self.succ[node_id]:
                if target == blocked or target in visited:
                    continue
                visited.add(target)
                found |= wanted & (1 << self.position[target])
                # Below a node that reaches nothing wanted there is nothing to find.
                if self._descendants[target] & wanted:
                    stack.append(target)
        return found
