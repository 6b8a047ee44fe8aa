"""Layered left-to-right layout by topological generation (networkx)."""

from __future__ import annotations

import networkx as nx

from canvas.geometry import NODE_WIDTH, node_height, output_ports
from engine.flow import Flow

LAYER_GAP = 64.0
ROW_GAP = 28.0


def layered_positions(flow: Flow, origin: tuple[float, float] = (0.0, 0.0)) -> dict[str, tuple[float, float]]:
    """New top-left positions: one column per generation, rows ordered by the mean row of predecessors."""
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(node.id for node in flow.nodes)
    graph.add_edges_from((e.from_, e.to) for e in flow.edges if e.from_ in graph and e.to in graph)
    # Cycles (the flow is invalid, but still drawn) collapse into one layer via the condensation.
    condensed = nx.condensation(graph)
    members = condensed.graph["mapping"]
    generation_of_component = {
        component: layer
        for layer, components in enumerate(nx.topological_generations(condensed))
        for component in components
    }
    layers: dict[int, list[str]] = {}
    for node in flow.nodes:
        layers.setdefault(generation_of_component[members[node.id]], []).append(node.id)
    heights = {node.id: node_height(len(output_ports(node))) for node in flow.nodes}
    row_of: dict[str, float] = {}
    positions: dict[str, tuple[float, float]] = {}
    for layer in sorted(layers):
        ids = layers[layer]
        order = {node_id: index for index, node_id in enumerate(ids)}

        def barycenter(node_id: str, order: dict[str, int] = order) -> tuple[float, int]:
            rows = [row_of[p] for p in graph.predecessors(node_id) if p in row_of]
            return (sum(rows) / len(rows) if rows else float("inf"), order[node_id])

        ids.sort(key=barycenter)
        total = sum(heights[i] for i in ids) + ROW_GAP * (len(ids) - 1)
        y = origin[1] - total / 2
        for node_id in ids:
            row_of[node_id] = y + heights[node_id] / 2
            positions[node_id] = (round(origin[0] + layer * (NODE_WIDTH + LAYER_GAP)), round(y))
            y += heights[node_id] + ROW_GAP
    return positions


Box = tuple[float, float, float, float]
"""x, y, width, height in scene units."""

FREE_GAP = 24.0


def free_position(occupied: list[Box], size: tuple[float, float], centre: tuple[float, float],
                  step: float = 20.0, rings: int = 60) -> tuple[float, float]:
    """The top-left nearest to having a box of `size` centred on `centre` where it overlaps none of `occupied`
    (with a gap around each), searched ring by ring on a `step` grid."""
    width, height = size
    start_x = round((centre[0] - width / 2) / step) * step
    start_y = round((centre[1] - height / 2) / step) * step

    def clear(x: float, y: float) -> bool:
        return all(
            x + width + FREE_GAP <= ox or ox + ow + FREE_GAP <= x or y + height + FREE_GAP <= oy
            or oy + oh + FREE_GAP <= y
            for ox, oy, ow, oh in occupied
        )

    for ring in range(rings + 1):
        candidates = [
            (start_x + dx * step, start_y + dy * step)
            for dx in range(-ring, ring + 1)
            for dy in range(-ring, ring + 1)
            if max(abs(dx), abs(dy)) == ring
        ]
        candidates.sort(key=lambda p: (p[0] - start_x) ** 2 + (p[1] - start_y) ** 2)
        for x, y in candidates:
            if clear(x, y):
                return (x, y)
    return (start_x, start_y)
