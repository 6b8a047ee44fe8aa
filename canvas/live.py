"""Live mode: per-node run counts and one run's path, drawn on existing items, at most once per frame."""

from __future__ import annotations

import itertools

from PySide6.QtCore import QObject, QTimer

from canvas.scene import FlowScene

LIVE_FRAME_MS = 16


class LiveOverlay(QObject):
    """Holds the latest live state and applies it to the scene's items on the next frame tick."""

    def __init__(self, scene: FlowScene, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.scene = scene
        self.flushes = 0
        self._counts: dict[str, tuple[int, int, str]] = {}
        self._path: tuple[list[str], str | None, str] = ([], None, "")
        self._marks: dict[str, tuple[str, str]] = {}
        self._shown: set[str] = set()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(LIVE_FRAME_MS)
        self._timer.timeout.connect(self.flush)

    def set_counts(self, counts: dict[str, tuple[int, int, str]]) -> None:
        self._counts = dict(counts)
        self._schedule()

    def set_run_path(self, nodes_in_order: list[str], current_node: str | None, waiting_text: str = "",
                     marks: dict[str, tuple[str, str]] | None = None) -> None:
        self._path = (list(nodes_in_order), current_node, waiting_text)
        self._marks = dict(marks or {})
        self._schedule()

    def clear(self) -> None:
        self._counts = {}
        self._path = ([], None, "")
        self._marks = {}
        self._schedule()

    def _schedule(self) -> None:
        # However many updates arrive within a frame, only the last state is drawn, once.
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        """Apply the pending state now; only items whose state changed repaint."""
        self._timer.stop()
        self.flushes += 1
        items = self.scene.node_items
        path, current, waiting_text = self._path
        on_path = set(path)
        touched = set(self._counts) | on_path | self._shown | set(self._marks) | ({current} if current else set())
        for node_id in touched:
            item = items.get(node_id)
            if item is None:
                continue
            running, waiting, reason = self._counts.get(node_id, (0, 0, ""))
            live = item.live
            text = waiting_text if node_id == current else reason
            mark, mark_text = self._marks.get(node_id, ("", ""))
            state = (running, waiting, text, node_id in on_path, node_id == current, mark, mark_text)
            if state != (live.running, live.waiting, live.waiting_text, live.on_path, live.current, live.mark,
                         live.mark_text):
                (live.running, live.waiting, live.waiting_text, live.on_path, live.current, live.mark,
                 live.mark_text) = state
                item.refresh_live()
        self._shown = {n for n in touched if n in items and not items[n].live.is_empty()}
        steps = set(itertools.pairwise(path))
        for edge_item in self.scene.edge_items.values():
            edge_item.set_on_run_path((edge_item.edge.from_, edge_item.edge.to) in steps)
