"""Canvas hotkeys as data: the view dispatches keys from this table and builds its QActions from it."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

KeySpec = str | QKeySequence.StandardKey


@dataclass(frozen=True)
class Binding:
    """One canvas command: its action name, menu text, keys and what it does."""

    name: str
    text: str
    keys: tuple[KeySpec, ...]
    tip: str

    def sequences(self) -> list[QKeySequence]:
        """The key sequences (standard keys resolve per platform, so this needs a running app)."""
        found: list[QKeySequence] = []
        for spec in self.keys:
            if isinstance(spec, QKeySequence.StandardKey):
                found.extend(QKeySequence.keyBindings(spec))
            else:
                found.append(QKeySequence(spec))
        return found


def _keys(*specs: KeySpec) -> tuple[KeySpec, ...]:
    return specs


# Keys are spelled out rather than taken from QKeySequence.StandardKey: the standard Delete also means Ctrl+D on
# some desktops (which is Duplicate here) and the standard Copy adds F16 and the Copy media key. "Ctrl" is the
# Command key on macOS.
BINDINGS: tuple[Binding, ...] = (
    Binding("delete", "Delete", _keys("Delete", "Backspace"), "Delete the selected nodes and edges"),
    Binding("cut", "Cut", _keys("Ctrl+X"), "Copy the selected nodes, then delete them (one undo step)"),
    Binding("copy", "Copy", _keys("Ctrl+C"), "Copy the selected nodes with the edges between them"),
    Binding("paste", "Paste", _keys("Ctrl+V"), "Paste copied nodes with fresh ids at the cursor"),
    Binding("duplicate", "Duplicate", _keys("Ctrl+D"), "Duplicate the selected nodes at the cursor"),
    Binding("rename", "Rename", _keys("F2"), "Edit the selected node's title in place"),
    Binding("select_all", "Select all", _keys("Ctrl+A"), "Select every node"),
    Binding("fit", "Fit selection or all", _keys("F"), "Zoom to the selection, or to the whole flow"),
    Binding("quick_add", "Add node…", _keys("Tab", "Shift+A"), "Search node types and add one at the cursor"),
    Binding("auto_layout", "Auto-layout", _keys("Ctrl+L"), "Arrange the flow left to right (undoable)"),
    Binding("zoom_in", "Zoom in", _keys("Ctrl++", "Ctrl+="), "Zoom in"),
    Binding("zoom_out", "Zoom out", _keys("Ctrl+-"), "Zoom out"),
    Binding("reset_zoom", "Actual size", _keys("Ctrl+0"), "Zoom to 100%"),
    Binding("toggle_snap", "Snap to grid", _keys("Ctrl+G"), "Snap dragged nodes to the grid"),
    Binding("toggle_minimap", "Minimap", _keys("Ctrl+M"), "Show or hide the overview in the corner"),
)

# Arrow keys nudge the selection: (dx, dy) in grid steps (Shift: single units).
NUDGE_KEYS = {Qt.Key.Key_Left: (-1, 0), Qt.Key.Key_Right: (1, 0), Qt.Key.Key_Up: (0, -1), Qt.Key.Key_Down: (0, 1)}
