"""Property: after any sequence of edits, each undo restores the file byte for byte as it was at that point, and
each redo the next state again."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QApplication

from canvas.document import FlowDocument
from canvas.scene import FlowScene
from engine.catalog import CATALOG

from .conftest import TRIAGE

TYPES = sorted(CATALOG)


def _pick(items: list[Any], index: int) -> Any:
    return items[index % len(items)] if items else None


def _apply(document: FlowDocument, op: tuple[Any, ...]) -> None:
    flow = document.flow_ref()
    ids = [n.id for n in flow.nodes]
    kind = op[0]
    if kind == "add":
        document.add_node(TYPES[op[1] % len(TYPES)], (op[2], op[3]))
    elif kind == "delete" and ids:
        document.delete_nodes([_pick(ids, op[1]), _pick(ids, op[2])])
    elif kind == "move" and ids:
        document.move_nodes({_pick(ids, op[1]): (op[2], op[3])})
    elif kind == "connect" and ids:
        source = document.flow_ref().nodes[op[1] % len(ids)]
        ports = CATALOG[source.type].output_ports(source.config) if source.type in CATALOG else ()
        document.connect(source.id, _pick(list(ports), op[3]), _pick(ids, op[2]))
    elif kind == "disconnect" and flow.edges:
        document.disconnect(_pick(flow.edges, op[1]))
    elif kind == "rename" and ids:
        document.rename_node(_pick(ids, op[1]), f"Step {op[2]}")
    elif kind == "config" and ids:
        document.set_config_field(
            _pick(ids, op[1]),
            _pick(["delay", "timeout", "model", "note"], op[2]),
            None if op[3] % 3 == 0 else f"{op[3] % 50}m",
        )
    elif kind == "paste" and ids:
        document.paste(document.copy_fragment([_pick(ids, op[1]), _pick(ids, op[2])]))
    elif kind == "retry" and ids:
        retry = None if op[2] % 3 == 0 else {"max_attempts": 1 + op[2] % 5, "backoff": "linear"}
        document.set_node_field(_pick(ids, op[1]), "retry", retry)
    elif kind == "flag" and ids:
        document.set_node_field(_pick(ids, op[1]), _pick(["continue_on_fail", "idempotent"], op[2]), op[3] % 2 == 0)
    elif kind == "layout":
        document.auto_layout()
    elif kind == "insert" and ids and flow.edges:
        document.insert_on_edge(_pick(ids, op[1]), _pick(flow.edges, op[2]))


small = st.integers(min_value=0, max_value=40)
coordinate = st.integers(min_value=-2000, max_value=2000)
operation = st.one_of(
    st.tuples(st.just("add"), small, coordinate, coordinate),
    st.tuples(st.just("move"), small, coordinate, coordinate),
    *(
        st.tuples(st.just(k), small, small, small)
        for k in ("delete", "connect", "disconnect", "rename", "config", "paste", "layout", "insert", "retry", "flag")
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(operation, min_size=1, max_size=14))
def test_random_edits_then_full_undo_restore_the_file(qapp: QApplication, operations: list[tuple[Any, ...]]) -> None:
    """Every undo steps back to the file as it was at that point of the stack, every redo forward again."""
    document = FlowDocument.open(TRIAGE)
    scene = FlowScene(document)
    stack = document.undo_stack
    states = {0: document.text()}
    """The file at each stack index; an edit merged into the last command replaces that command's state."""
    for op in operations:
        _apply(document, op)
        states[stack.index()] = document.text()
        _assert_scene_mirrors(scene, document)
    steps = stack.index()
    assert sorted(states) == list(range(steps + 1))
    assert stack.count() == steps, "an edit left a command to redo behind (a refused edit must leave none)"
    while stack.canUndo():
        stack.undo()
        assert document.text() == states[stack.index()]
        _assert_scene_mirrors(scene, document)
    assert stack.index() == 0 and document.text() == states[0]
    while stack.canRedo():
        stack.redo()
        assert document.text() == states[stack.index()]
        _assert_scene_mirrors(scene, document)
    assert stack.index() == steps and document.text() == states[steps]


def _assert_scene_mirrors(scene: FlowScene, document: FlowDocument) -> None:
    """Items follow the document's notifications only, so they must match it after any edit."""
    flow = document.flow_ref()
    assert set(scene.node_items) == {n.id for n in flow.nodes}
    for node in flow.nodes:
        item = scene.node_items[node.id]
        assert (item.pos().x(), item.pos().y()) == node.position
        assert item.node == node
    assert sorted(id(e) for e in flow.edges) == sorted(scene.edge_items)
    for edge_item in scene.edge_items.values():
        path = edge_item.path()
        departure, arrival = path.elementAt(0), path.elementAt(3)
        assert edge_item.mapToScene(QPointF(departure.x, departure.y)) == edge_item.source.output_anchor(
            edge_item.port_name()
        )
        assert edge_item.mapToScene(QPointF(arrival.x, arrival.y)) == edge_item.target.input_anchor()
