"""Canvas frame benchmark (offscreen): open/show, full-view repaint, drag frames, undo, memory. Prints JSON.

Run: `QT_QPA_PLATFORM=offscreen .venv/bin/python tests/bench/canvas_frames.py [--nodes 1000 --edges 1200]`
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

TYPES = ["queue", "approval", "ai.model", "budget.reserve", "set", "http.request", "router", "join", "terminal"]
CONFIGS: dict[str, dict[str, Any]] = {
    "queue": {"delay": "24h"},
    "approval": {"timeout": "24h", "approvers": "any", "message": "ok?"},
    "ai.model": {"provider": "local", "model": "sim-small", "prompt": "hi", "output_key": "answer"},
    "budget.reserve": {"for": "x", "amount": 0.2},
    "set": {"values": {"note": "hello"}},
    "http.request": {"method": "POST", "url": "http://127.0.0.1:9/refunds"},
    "router": {"branches": [{"port": "refund", "when": "{{ true }}"}]},
    "join": {"mode": "all"},
    "terminal": {},
}
COLUMNS = 40


def generated_flow(node_count: int, edge_count: int, seed: int = 7) -> dict[str, Any]:
    """A DAG in a grid, edges going 1-3 columns right and up to 3 rows away, as drawn flows do.

    Edges only point to later columns, so there is no cycle.
    """
    rng = random.Random(seed)
    rows = (node_count + COLUMNS - 1) // COLUMNS
    nodes = [{"id": "n0", "type": "trigger.manual", "title": "Start", "position": [0, 0], "config": {}}]
    for index in range(1, node_count):
        kind = TYPES[index % len(TYPES)]
        column, row = index % COLUMNS, index // COLUMNS
        nodes.append(
            {
                "id": f"n{index}",
                "type": kind,
                "title": f"{kind} step {index}",
                "position": [column * 230, row * 110],
                "config": CONFIGS[kind],
            }
        )
    ports = {"approval": ["approved", "rejected"], "router": ["refund", "default"]}
    edges: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str | None]] = set()
    while len(edges) < edge_count:
        a = rng.randrange(0, node_count)
        source = nodes[a]
        column, row = a % COLUMNS, a // COLUMNS
        target_column = column + rng.randint(1, 3)
        target_row = row + rng.randint(-3, 3)
        if source["type"] == "terminal" or target_column >= COLUMNS or not 0 <= target_row < rows:
            continue
        b = target_row * COLUMNS + target_column
        if b >= node_count or b == 0:
            continue
        port = rng.choice(ports[source["type"]]) if source["type"] in ports else None
        key = (str(source["id"]), f"n{b}", port)
        if key in seen:
            continue
        seen.add(key)
        edge: dict[str, Any] = {"from": key[0], "to": key[1]}
        if port:
            edge["port"] = port
        edges.append(edge)
    return {"format": "lockgate.flow/1", "id": "bench", "name": "Bench", "nodes": nodes, "edges": edges}


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


class PaintCounter(QObject):
    """Counts paint events on the viewport, to prove each drag frame was drawn."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.count += 1
        return False


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def send(widget: Any, kind: QEvent.Type, pos: QPoint, buttons: Qt.MouseButton) -> None:
    button = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseMove else Qt.MouseButton.LeftButton
    event = QMouseEvent(
        kind, QPointF(pos), QPointF(widget.mapToGlobal(pos)), button, buttons, Qt.KeyboardModifier.NoModifier
    )
    QApplication.sendEvent(widget, event)


def repaint_times(view: Any, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        view.viewport().repaint()
        times.append(time.perf_counter() - start)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--edges", type=int, default=1200)
    parser.add_argument("--frames", type=int, default=60)
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(app, QApplication)
    from canvas.document import FlowDocument
    from canvas.editor import FlowEditor
    from canvas.theme import apply_theme

    apply_theme(app, "light")
    path = Path(tempfile.mkdtemp()) / "bench.flow.json"
    path.write_text(json.dumps(generated_flow(args.nodes, args.edges)))
    rss_before = rss_mb()

    start = time.perf_counter()
    document = FlowDocument.open(path)
    editor = FlowEditor(document)
    editor.resize(1600, 900)
    editor.show()
    editor.view.fit_selection_or_all(whole=True)  # every node on screen: the heaviest frame
    editor.view.viewport().repaint()
    open_seconds = time.perf_counter() - start
    # Validation runs on the first event-loop pass after the window painted; time it on its own.
    validation_start = time.perf_counter()
    app.processEvents()
    validation_seconds = time.perf_counter() - validation_start
    view = editor.view
    fit_zoom = view.zoom()

    repaint_times(view, 5)
    full_view = repaint_times(view, args.frames)

    view.set_zoom(1.0)
    view.centerOn(2000, 600)
    app.processEvents()
    repaint_times(view, 5)
    detail_view = repaint_times(view, args.frames)

    # Drag a 10×5 block of 50 selected nodes at the fit-all zoom. A frame is one mouse move plus the
    # event-loop pass that paints what it dirtied (Qt repaints only the changed region, as on screen).
    view.fit_selection_or_all(whole=True)
    app.processEvents()
    chosen = [f"n{row * COLUMNS + column}" for row in range(5, 10) for column in range(5, 15)]
    view.flow_scene.select_nodes(chosen)
    grab_item = view.node_item(chosen[0])
    assert grab_item is not None
    viewport = view.viewport()
    painted = PaintCounter()
    viewport.installEventFilter(painted)
    grab = view.mapFromScene(grab_item.sceneBoundingRect().center())
    send(viewport, QEvent.Type.MouseButtonPress, grab, Qt.MouseButton.LeftButton)
    app.processEvents()
    drag_frames = []
    for step in range(1, args.frames + 1):
        point = grab + QPoint(step * 2, step)
        frame_start = time.perf_counter()
        send(viewport, QEvent.Type.MouseMove, point, Qt.MouseButton.LeftButton)
        app.processEvents()
        app.processEvents()
        drag_frames.append(time.perf_counter() - frame_start)
    send(viewport, QEvent.Type.MouseButtonRelease, grab + QPoint(args.frames * 2, args.frames), Qt.MouseButton.NoButton)
    assert painted.count >= args.frames, f"only {painted.count} paints for {args.frames} drag frames"
    moved = document.undo_stack.count() == 1
    assert moved, "the drag did not become one undo step"

    undo_start = time.perf_counter()
    document.undo_stack.undo()
    app.processEvents()
    app.processEvents()
    undo_seconds = time.perf_counter() - undo_start
    first = document.node(chosen[0])
    assert first is not None and first.position == (grab_item.pos().x(), grab_item.pos().y())

    result = {
        "benchmark": "canvas_frames",
        "nodes": len(document.flow_ref().nodes),
        "edges": len(document.flow_ref().edges),
        "viewport": [viewport.width(), viewport.height()],
        "open_and_show_ms": ms(open_seconds),
        "first_validation_after_show_ms": ms(validation_seconds),
        "fit_all_zoom": round(fit_zoom, 3),
        "full_view_repaint_ms": {
            "median": ms(statistics.median(full_view)),
            "p95": ms(percentile(full_view, 0.95)),
            "min": ms(min(full_view)),
        },
        "detail_view_repaint_100pct_ms": {
            "median": ms(statistics.median(detail_view)),
            "p95": ms(percentile(detail_view, 0.95)),
        },
        "drag_50_nodes_frame_ms": {
            "median": ms(statistics.median(drag_frames)),
            "p95": ms(percentile(drag_frames, 0.95)),
            "min": ms(min(drag_frames)),
        },
        "undo_drag_ms": ms(undo_seconds),
        "drag_paints": painted.count,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "rss_mb": {"before_open": round(rss_before, 1), "after": round(rss_mb(), 1)},
        "targets": {"open_ms": 1000, "full_view_repaint_ms": 16, "drag_frame_ms": 8},
    }
    print(json.dumps(result, indent=2))
    editor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
