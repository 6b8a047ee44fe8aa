"""Node and port geometry in scene units, shared by items, layout and hit tests (no Qt)."""

from __future__ import annotations

from engine.catalog import node_type
from engine.flow import Node

NODE_WIDTH = 176.0
HEADER_HEIGHT = 26.0
PORT_ROW_HEIGHT = 18.0
BODY_PADDING = 8.0
PORT_RADIUS = 5.0
PORT_HIT_RADIUS = 10.0
GRID_SIZE = 20.0


def output_ports(node: Node) -> tuple[str, ...]:
    """Output port names of `node` (none for an unknown type or a terminal)."""
    spec = node_type(node.type)
    return spec.output_ports(node.config) if spec is not None else ()


def has_input(node: Node) -> bool:
    """Whether the node takes incoming edges (everything but triggers; unknown types do, so edges show)."""
    spec = node_type(node.type)
    return spec.has_input if spec is not None else True


def node_height(port_count: int) -> float:
    """Header plus one row per output port (at least one row, for the summary)."""
    return HEADER_HEIGHT + max(1, port_count) * PORT_ROW_HEIGHT + BODY_PADDING


def input_port_offset(height: float) -> tuple[float, float]:
    """Where the input port sits, relative to the node's top-left."""
    return (0.0, HEADER_HEIGHT / 2 + (height - HEADER_HEIGHT / 2) / 2 - 4)


def output_port_offset(index: int) -> tuple[float, float]:
    """Where output port `index` sits, relative to the node's top-left."""
    return (NODE_WIDTH, HEADER_HEIGHT + BODY_PADDING / 2 + PORT_ROW_HEIGHT * index + PORT_ROW_HEIGHT / 2)
