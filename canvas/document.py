"""The observable flow document: the engine's Flow plus an undo stack and change signals.

Edit methods push commands; commands call the primitives (`insert_node_at`,
`remove_edge_at`, ...), which are the only code that changes the flow and
each emits a signal the scene draws from. Nodes and edges are treated as
immutable values (edits swap in copies), so `flow()` snapshots are cheap.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QUndoStack

from canvas import commands
from canvas.flow_header import (
    FlowHeader,
    flow_id_problem,
    input_name_problem,
    input_spec,
    moved,
    renamed,
    slug,
    unique_id,
    unique_input_name,
)
from canvas.geometry import has_input, output_ports
from canvas.layout import layered_positions
from engine.catalog import node_type
from engine.flow import Edge, Flow, InputSpec, Node, dump_flow, flow_to_data, load_flow, save_flow
from engine.validation import Diagnostic, validate

VALIDATION_DELAY_MS = 150
FRAGMENT_FORMAT = "lockgate.fragment/1"
PASTE_OFFSET = 40.0

# Config a freshly added node starts with, so it is valid (or nearly) the moment it lands.
STARTER_CONFIG: dict[str, dict[str, Any]] = {
    "trigger.schedule": {"every": "1h"},
    "trigger.event": {"event_type": "run.failed"},
    "queue": {"delay": "1h"},
    "approval": {"timeout": "24h", "approvers": "any", "message": ""},
    "wait.callback": {"timeout": "24h", "output_key": "callback"},
    "ai.model": {"provider": "local", "model": "sim-small", "prompt": "", "output_key": "answer"},
    "router": {"branches": [{"port": "yes", "when": "{{ true }}"}]},
    "set": {"values": {"key": "value"}},
    "http.request": {"method": "GET", "url": "https://example.com"},
    "flow.call": {"flow": "", "inputs": {}, "output_key": "result"},
    "script": {"language": "python", "output_key": "result",
               "code": "import json, sys\n\nbox = json.load(sys.stdin)\nprint(json.dumps(box[\"inputs\"]))\n"},
}


def empty_flow(flow_id: str = "untitled", name: str = "Untitled") -> Flow:
    """A flow with no nodes, ready to draw in."""
    return Flow(format="lockgate.flow/1", id=flow_id, name=name)


class FlowDocument(QObject):
    """One open flow: its current state, its undo stack, its file and its diagnostics."""

    node_added = Signal(str)
    node_removed = Signal(str)
    node_changed = Signal(str)
    nodes_moved = Signal(list)
    edge_added = Signal(object)
    edge_removed = Signal(object)
    flow_changed = Signal()
    header_changed = Signal()
    """The flow's own properties (id, name, description, enabled, inputs, settings) changed."""
    diagnostics_changed = Signal(list)
    dirty_changed = Signal(bool)
    path_changed = Signal(object)

    def __init__(self, flow: Flow | None = None, path: Path | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._flow = (flow or empty_flow()).model_copy(update={})
        self._flow.nodes = list(self._flow.nodes)
        self._flow.edges = list(self._flow.edges)
        self._nodes_by_id: dict[str, Node] = {}
        for node in self._flow.nodes:
            self._nodes_by_id.setdefault(node.id, node)
        self.path: Path | None = path
        self.id_follows_name = False
        """True for a new flow until its id is set by hand: renaming the flow then renames its id too."""
        self.history_id: str | None = self._flow.id if path is not None else None
        """The flow id whose published history this draft continues (None: a new flow, not published yet)."""
        self._diagnostics: list[Diagnostic] = []
        self.extra_checks: list[Callable[[Flow], list[Diagnostic]]] = []
        """Checks beyond the flow file's own validation that need outside knowledge (the app adds one that
        knows the engine's budgets); their diagnostics follow the validator's."""
        self.undo_stack = QUndoStack(self)
        self.undo_stack.cleanChanged.connect(self._clean_changed)
        self._validation_timer = QTimer(self)
        self._validation_timer.setSingleShot(True)
        self._validation_timer.setInterval(VALIDATION_DELAY_MS)
        self._validation_timer.timeout.connect(self._validate_debounced)
        self._content_version = 0
        self._validated_version = -1
        # The first validation runs right after the window first paints, so opening a big flow shows it at once.
        QTimer.singleShot(0, self, self._validate_debounced)

    def _clean_changed(self, clean: bool) -> None:
        self.dirty_changed.emit(not clean)

    # ----- construction, files -------------------------------------------------

    @classmethod
    def from_flow(cls, flow: Flow, parent: QObject | None = None) -> FlowDocument:
        """A document holding a copy of `flow`, not tied to a file."""
        return cls(flow, None, parent)

    @classmethod
    def open(cls, path: str | Path, parent: QObject | None = None) -> FlowDocument:
        """Open a `*.flow.json`; problems show as diagnostics, a non-flow raises FlowLoadError."""
        target = Path(path)
        return cls(load_flow(target), target, parent)

    def save(self, path: str | Path | None = None) -> Path:
        """Write the flow byte-stably to `path` (or the current path) and mark it clean."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("this flow has no file yet; pass a path to save it (e.g. my-flow.flow.json)")
        save_flow(self._flow, target)
        if target != self.path:
            self.path = target
            self.path_changed.emit(target)
        self.undo_stack.setClean()
        return target

    def text(self) -> str:
        """The flow as it would be saved."""
        return dump_flow(self._flow)

    # ----- reading ---------------------------------------------------------------

    def flow(self) -> Flow:
        """A snapshot of the current flow (later edits do not change it)."""
        return self._flow.model_copy(update={"nodes": list(self._flow.nodes), "edges": list(self._flow.edges)})

    def flow_ref(self) -> Flow:
        """The live flow, for read-only use by commands and the scene."""
        return self._flow

    def node(self, node_id: str) -> Node | None:
        return self._nodes_by_id.get(node_id)

    def node_index(self, node_id: str) -> int:
        for index, node in enumerate(self._flow.nodes):
            if node.id == node_id:
                return index
        raise KeyError(f'no node "{node_id}" in flow "{self._flow.id}"')

    def positions(self, node_ids: Iterable[str]) -> dict[str, tuple[float, float]]:
        return {i: self._nodes_by_id[i].position for i in node_ids if i in self._nodes_by_id}

    def edges_of(self, node_id: str) -> list[Edge]:
        return [e for e in self._flow.edges if e.from_ == node_id or e.to == node_id]

    def is_dirty(self) -> bool:
        return not self.undo_stack.isClean()

    def diagnostics(self) -> list[Diagnostic]:
        """Current diagnostics (validating first if an edit is still waiting for its debounced run)."""
        if self._stale:
            self.validate_now()
        return list(self._diagnostics)

    def last_diagnostics(self) -> list[Diagnostic]:
        """The diagnostics of the last validation, without running one (for painting)."""
        return list(self._diagnostics)

    @property
    def _stale(self) -> bool:
        return self._validated_version != self._content_version

    def _content_changed(self) -> None:
        # Positions never change diagnostics, so moves do not call this.
        self._content_version += 1
        self._validation_timer.start()

    def _validate_debounced(self) -> None:
        # Runs on the GUI thread on purpose: a worker thread can run Python's cyclic GC and so destroy
        # Qt objects off-thread, which crashes PySide. Debouncing keeps it off the paint path.
        if self._stale:
            self.validate_now()

    def _publish(self, version: int, diagnostics: list[Diagnostic]) -> None:
        self._validated_version = version
        self._diagnostics = diagnostics
        self.diagnostics_changed.emit(list(diagnostics))

    def validate_now(self) -> list[Diagnostic]:
        """Validate at once (content edits schedule this 150 ms after the last one) and notify."""
        self._validation_timer.stop()
        found = validate(self._flow)
        for check in self.extra_checks:
            found += check(self._flow)
        self._publish(self._content_version, found)
        return list(self._diagnostics)

    def unique_node_id(self, base: str, also_taken: set[str] | frozenset[str] = frozenset()) -> str:
        """`base` if free, else `base_2`, `base_3`, ... (skipping ids in `also_taken` too)."""
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", base) or "node"
        if stem not in self._nodes_by_id and stem not in also_taken:
            return stem
        stem = re.sub(r"_\d+$", "", stem) or "node"
        number = 2
        while f"{stem}_{number}" in self._nodes_by_id or f"{stem}_{number}" in also_taken:
            number += 1
        return f"{stem}_{number}"

    def connection_refusal(self, source: str, port: str | None, target: str) -> str | None:
        """Why `source.port → target` may not be drawn, or None when it may."""
        source_node, target_node = self.node(source), self.node(target)
        if source_node is None or target_node is None:
            return f'no node "{source if source_node is None else target}" in this flow'
        if source == target:
            return "a node cannot connect to itself"
        if not has_input(target_node):
            return f'"{target_node.title or target}" is a trigger and takes no input'
        ports = output_ports(source_node)
        if not ports:
            return f'"{source_node.title or source}" ends the flow and has no output'
        chosen = port if port is not None else (ports[0] if len(ports) == 1 else None)
        if chosen is None:
            return f'"{source_node.title or source}" has several outputs ({", ".join(ports)}); drag from one'
        if chosen not in ports:
            return f'"{source_node.title or source}" has no output "{chosen}" (outputs: {", ".join(ports)})'
        for edge in self._flow.edges:
            if edge.from_ == source and edge.to == target and self._edge_port(edge) == chosen:
                return f'"{source}" {chosen} is already connected to "{target}"'
        if self._reaches(target, source):
            return f'this would close a cycle ("{target}" already leads to "{source}"); use foreach to repeat'
        return None

    def _edge_port(self, edge: Edge) -> str | None:
        if edge.port is not None:
            return edge.port
        node = self.node(edge.from_)
        ports = output_ports(node) if node is not None else ()
        return ports[0] if len(ports) == 1 else None

    def _reaches(self, start: str, goal: str) -> bool:
        following: dict[str, list[str]] = {}
        for edge in self._flow.edges:
            following.setdefault(edge.from_, []).append(edge.to)
        seen = {start}
        stack = [start]
        while stack:
            current = stack.pop()
            if current == goal:
                return True
            for nxt in following.get(current, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    # ----- edits (each pushes one undo step) ----------------------------------------

    def add_node(self, type_name: str, pos: tuple[float, float], title: str | None = None) -> str:
        """Add a node of `type_name` with its top-left at `pos`; returns the new id."""
        spec = node_type(type_name)
        node_id = self.unique_node_id(
            type_name.split(".")[-1] if type_name.startswith("trigger.") else type_name.replace(".", "_")
        )
        node = Node(
            id=node_id,
            type=type_name,
            title=title if title is not None else (spec.title if spec is not None else type_name),
            position=(round(pos[0]), round(pos[1])),
            config=copy.deepcopy(STARTER_CONFIG.get(type_name, {})),
        )
        self.undo_stack.push(commands.AddNodeCommand(self, node))
        return node_id

    def delete_nodes(self, node_ids: Iterable[str]) -> None:
        """Delete nodes and every edge touching them as one step."""
        ids = [i for i in dict.fromkeys(node_ids) if i in self._nodes_by_id]
        if ids:
            self.undo_stack.push(commands.DeleteNodesCommand(self, ids))

    def move_nodes(
        self, new_positions: dict[str, tuple[float, float]], old: dict[str, tuple[float, float]] | None = None
    ) -> None:
        """Move many nodes as one step; `old` gives where they were when items moved first (a drag)."""
        rounded = {
            i: (float(round(x)), float(round(y))) for i, (x, y) in new_positions.items() if i in self._nodes_by_id
        }
        before = old if old is not None else self.positions(rounded)
        if rounded and any(before.get(i) != p for i, p in rounded.items()):
            self.undo_stack.push(commands.MoveNodesCommand(self, rounded, old={i: before[i] for i in rounded}))

    # The edit API names `connect`/`disconnect` shadow QObject's; signals connect through `signal.connect`.
    def connect(self, source: str, port: str | None, target: str) -> str | None:  # type: ignore[override]
        """Draw an edge; returns the refusal reason, or None when it was added."""
        reason = self.connection_refusal(source, port, target)
        if reason is not None:
            return reason
        node = self.node(source)
        assert node is not None
        ports = output_ports(node)
        # Single-output nodes save without a port, the way hand-written flows do.
        stored_port = None if len(ports) == 1 else port
        self.undo_stack.push(commands.AddEdgeCommand(self, Edge(**{"from": source, "to": target, "port": stored_port})))
        return None

    def disconnect(self, edge: Edge) -> None:  # type: ignore[override]
        """Remove `edge` (the same object the document holds)."""
        index = self.edge_index(edge)
        self.undo_stack.push(commands.RemoveEdgeCommand(self, index))

    def edge_index(self, edge: Edge) -> int:
        for index, held in enumerate(self._flow.edges):
            if held is edge:
                return index
        for index, held in enumerate(self._flow.edges):
            if held == edge:
                return index
        raise KeyError(f'edge {edge.from_} → {edge.to} is not in flow "{self._flow.id}"')

    def rename_node(self, node_id: str, title: str) -> None:
        node = self.node(node_id)
        if node is not None and node.title != title:
            self.undo_stack.push(commands.RenameNodeCommand(self, node_id, title))

    def set_config_field(self, node_id: str, key: str, value: Any) -> None:
        """Set one top-level config key; value None removes it."""
        node = self.node(node_id)
        if (
            node is None
            or (value is None and key not in node.config)
            or (key in node.config and node.config[key] == value)
        ):
            return
        self.undo_stack.push(commands.SetConfigFieldCommand(self, node_id, key, value))

    def set_node_field(self, node_id: str, field: str, value: Any) -> None:
        """Set `retry` (dict or None), `continue_on_fail` or `idempotent` (bool or None)."""
        if field not in ("retry", "continue_on_fail", "idempotent"):
            raise ValueError(f'node field "{field}" is not editable here; use retry, continue_on_fail or idempotent')
        if self.node(node_id) is not None:
            command = commands.SetNodeFieldCommand(self, node_id, field, value)
            if command.new_node != command.old_node:
                self.undo_stack.push(command)

    def copy_fragment(self, node_ids: Iterable[str]) -> dict[str, Any]:
        """The nodes and the edges between them, as JSON data for the clipboard."""
        chosen = set(node_ids)
        data = flow_to_data(self._flow)
        return {
            "format": FRAGMENT_FORMAT,
            "nodes": [n for n in data["nodes"] if n["id"] in chosen],
            "edges": [e for e in data["edges"] if e["from"] in chosen and e["to"] in chosen],
        }

    def paste(self, fragment: dict[str, Any], at: tuple[float, float] | None = None, text: str = "Paste") -> list[str]:
        """Add a copied fragment with fresh ids, its top-left at `at` (else offset from the original); new ids."""
        if fragment.get("format") != FRAGMENT_FORMAT or not fragment.get("nodes"):
            return []
        sources = [Node.model_validate(n) for n in fragment["nodes"]]
        left = min(n.position[0] for n in sources)
        top = min(n.position[1] for n in sources)
        dx, dy = (at[0] - left, at[1] - top) if at is not None else (PASTE_OFFSET, PASTE_OFFSET)
        renamed: dict[str, str] = {}
        taken: set[str] = set()
        for node in sources:
            renamed[node.id] = self.unique_node_id(node.id, taken)
            taken.add(renamed[node.id])
        nodes: list[Node] = []
        for node in sources:
            config = copy.deepcopy(node.config)
            if node.type == "budget.reserve" and config.get("for") in renamed:
                config["for"] = renamed[config["for"]]
            nodes.append(
                node.model_copy(
                    update={
                        "id": renamed[node.id],
                        "position": (float(round(node.position[0] + dx)), float(round(node.position[1] + dy))),
                        "config": config,
                    }
                )
            )
        edges = [
            Edge(**{"from": renamed[e["from"]], "to": renamed[e["to"]], "port": e.get("port")})
            for e in fragment.get("edges", [])
            if e.get("from") in renamed and e.get("to") in renamed
        ]
        self.undo_stack.push(commands.PasteCommand(self, nodes, edges, text))
        return [n.id for n in nodes]

    def duplicate(self, node_ids: Iterable[str]) -> list[str]:
        """Copy and paste in one go, offset from the originals."""
        return self.paste(self.copy_fragment(node_ids), text="Duplicate")

    def insert_on_edge(self, node_id: str, edge: Edge) -> bool:
        """Splice `node_id` into `edge` (source → node → target) as one step; False if it cannot go there."""
        node = self.node(node_id)
        if node is None or edge.from_ == node_id or edge.to == node_id or not has_input(node):
            return False
        ports = output_ports(node)
        if not ports:
            return False
        index = self.edge_index(edge)
        self.undo_stack.beginMacro(f"Insert {node_id} on edge")
        try:
            self.undo_stack.push(commands.RemoveEdgeCommand(self, index))
            ok = self.connect(edge.from_, self._edge_port(edge), node_id) is None
            ok = ok and self.connect(node_id, ports[0], edge.to) is None
        finally:
            self.undo_stack.endMacro()
        if not ok:
            self.retract_last()
        return ok

    def retract_last(self) -> None:
        """Undo the last command and drop it from the stack: a refused edit leaves nothing behind to redo."""
        self.undo_stack.undo()
        command = self.undo_stack.command(self.undo_stack.index())
        if command is not None:
            command.setObsolete(True)
            self.undo_stack.redo()  # an obsolete command is deleted here, not done again

    def auto_layout(self) -> None:
        """Lay the flow out left to right by topological generation, as one step."""
        if not self._flow.nodes:
            return
        left = min(n.position[0] for n in self._flow.nodes)
        top = min(n.position[1] for n in self._flow.nodes)
        fresh = layered_positions(self._flow)
        if not fresh:
            return
        # Keep the laid-out flow where the old one started so the view does not jump.
        shift_x = left - min(x for x, _ in fresh.values())
        shift_y = top - min(y for _, y in fresh.values())
        moved = {i: (float(x + shift_x), float(y + shift_y)) for i, (x, y) in fresh.items()}
        if any(self._nodes_by_id[i].position != p for i, p in moved.items()):
            self.undo_stack.push(commands.AutoLayoutCommand(self, moved))

    # ----- the flow's own properties (each change one undo step) ---------------------

    def header(self) -> FlowHeader:
        return FlowHeader.of(self._flow)

    def set_header(self, header: FlowHeader, text: str, id_follows_name: bool | None = None) -> None:
        follows = self.id_follows_name if id_follows_name is None else id_follows_name
        if not header.same_as(self.header()) or follows != self.id_follows_name:
            self.undo_stack.push(commands.SetHeaderCommand(self, header, follows, text))

    def rename_flow(self, name: str, taken: Collection[str] = ()) -> None:
        """Set the flow's name; while the id follows the name, the id becomes the name's slug (made unique
        against `taken`, the ids of other open and published flows)."""
        header = self.header()
        if name == header.name:
            return
        changes: dict[str, object] = {"name": name}
        if self.id_follows_name and name.strip():
            changes["id"] = unique_id(slug(name), set(taken) - {header.id})
        self.set_header(header.with_(**changes), f'Rename flow to "{name}"')

    def set_flow_id(self, flow_id: str) -> None:
        """Set the id by hand (it stops following the name); raises ValueError for an id the pattern refuses."""
        problem = flow_id_problem(flow_id)
        if problem is not None:
            raise ValueError(problem)
        if flow_id != self._flow.id:
            self.set_header(self.header().with_(id=flow_id), f"Change flow id to {flow_id}", id_follows_name=False)

    def set_description(self, text: str) -> None:
        self.set_header(self.header().with_(description=text), "Change flow description")

    def set_enabled(self, enabled: bool) -> None:
        self.set_header(self.header().with_(enabled=enabled), "Enable flow" if enabled else "Disable flow")

    def set_setting(self, key: str, value: str | int | float | None) -> None:
        """Set one of `max_delay`, `max_wait`, `suspended_step_timeout` (None: back to the default)."""
        self.set_header(self.header().with_setting(key, value), f"Change settings.{key}")

    def add_input(self, name: str | None = None, spec: InputSpec | None = None) -> str:
        header = self.header()
        chosen = name or unique_input_name(header.inputs)
        problem = input_name_problem(chosen, header.inputs)
        if problem is not None:
            raise ValueError(problem)
        inputs = {**header.inputs, chosen: spec or input_spec("string", False, False, None)}
        self.set_header(header.with_(inputs=inputs), f"Add input {chosen}")
        return chosen

    def remove_input(self, name: str) -> None:
        header = self.header()
        if name in header.inputs:
            inputs = {n: s for n, s in header.inputs.items() if n != name}
            self.set_header(header.with_(inputs=inputs), f"Remove input {name}")

    def rename_input(self, old: str, new: str) -> None:
        """Rename an input in place; raises ValueError for a name templates cannot read or one taken."""
        header = self.header()
        if old not in header.inputs or old == new:
            return
        problem = input_name_problem(new, header.inputs, current=old)
        if problem is not None:
            raise ValueError(problem)
        self.set_header(header.with_(inputs=renamed(header.inputs, old, new)), f"Rename input {old} to {new}")

    def move_input(self, name: str, offset: int) -> None:
        header = self.header()
        if name in header.inputs:
            self.set_header(header.with_(inputs=moved(header.inputs, name, offset)), f"Move input {name}")

    def set_input(self, name: str, spec: InputSpec) -> None:
        header = self.header()
        if name in header.inputs:
            self.set_header(header.with_(inputs={**header.inputs, name: spec}), f"Change input {name}")

    # ----- primitives (commands only) ---------------------------------------------

    def insert_node_at(self, index: int, node: Node) -> None:
        self._flow.nodes.insert(index, node)
        self._nodes_by_id.setdefault(node.id, node)
        self.node_added.emit(node.id)
        self._content_changed()
        self.flow_changed.emit()

    def remove_node_at(self, index: int) -> Node:
        node = self._flow.nodes.pop(index)
        if self._nodes_by_id.get(node.id) is node:
            del self._nodes_by_id[node.id]
            for other in self._flow.nodes:
                if other.id == node.id:
                    self._nodes_by_id[node.id] = other
                    break
        self.node_removed.emit(node.id)
        self._content_changed()
        self.flow_changed.emit()
        return node

    def insert_edge_at(self, index: int, edge: Edge) -> None:
        self._flow.edges.insert(index, edge)
        self.edge_added.emit(edge)
        self._content_changed()
        self.flow_changed.emit()

    def remove_edge_at(self, index: int) -> Edge:
        edge = self._flow.edges.pop(index)
        self.edge_removed.emit(edge)
        self._content_changed()
        self.flow_changed.emit()
        return edge

    def replace_node(self, node: Node) -> None:
        index = self.node_index(node.id)
        old = self._flow.nodes[index]
        self._flow.nodes[index] = node
        self._nodes_by_id[node.id] = node
        self.node_changed.emit(node.id)
        if output_ports(old) != output_ports(node):
            # Port rows moved, so edges from this node must be re-anchored.
            self.nodes_moved.emit([node.id])
        self._content_changed()
        self.flow_changed.emit()

    def set_positions(self, positions: dict[str, tuple[float, float]]) -> None:
        moved: list[str] = []
        for index, node in enumerate(self._flow.nodes):
            new = positions.get(node.id)
            if new is not None and node.position != new:
                replacement = node.model_copy(update={"position": new})
                self._flow.nodes[index] = replacement
                if self._nodes_by_id.get(node.id) is node:
                    self._nodes_by_id[node.id] = replacement
                moved.append(node.id)
        if moved:
            self.nodes_moved.emit(moved)
            self.flow_changed.emit()

    def apply_header(self, header: FlowHeader, id_follows_name: bool) -> None:
        flow = self._flow
        flow.id, flow.name, flow.description, flow.enabled = header.id, header.name, header.description, header.enabled
        flow.inputs = dict(header.inputs)
        flow.settings = header.settings
        self.id_follows_name = id_follows_name
        self.header_changed.emit()
        self._content_changed()
        self.flow_changed.emit()
