"""Render a flow file to a PNG offscreen: `python -m canvas.screenshot FLOW OUT [--zoom 1.0] [--theme light]`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QApplication

from canvas.document import FlowDocument
from canvas.editor import FlowEditor
from canvas.theme import apply_theme
from canvas.view import FlowView

MARGIN = 48


def render_flow_png(
    flow_path: str | Path, out: str | Path, zoom: float = 1.0, theme: str = "light", live_demo: bool = False
) -> Path:
    """Open `flow_path` in an editor sized to fit it at `zoom`, and save what the view shows.

    With `live_demo`, the first nodes get sample live-mode counts and a run path, to show the overlay.
    """
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    apply_theme(app, theme)
    document = FlowDocument.open(flow_path)
    editor = FlowEditor(document)
    view = editor.view
    bounds: QRectF = view.flow_scene.nodes_bounding_rect().adjusted(-MARGIN, -MARGIN, MARGIN, MARGIN)
    minimap = view.minimap
    editor.resize(int(bounds.width() * zoom) + 2, int(bounds.height() * zoom) + minimap.height() + 24)
    editor.show()
    app.processEvents()
    view.set_zoom(zoom)
    view.centerOn(bounds.center().x(), bounds.center().y() + (minimap.height() + 24) / 2 / zoom)
    if live_demo:
        _show_live_demo(view, document)
    app.processEvents()
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    editor.grab().save(str(target))
    editor.close()
    return target


def _show_live_demo(view: FlowView, document: FlowDocument) -> None:
    flow = document.flow_ref()
    path: list[str] = [flow.nodes[0].id] if flow.nodes else []
    while path:
        following = [e.to for e in flow.edges if e.from_ == path[-1] and e.to not in path]
        if not following or len(path) >= 5:
            break
        path.append(following[0])
    if path:
        view.set_live_counts({path[-1]: (0, 3, "waiting"), path[len(path) // 2]: (2, 0, "")})
        view.set_run_path(path, path[-1], "waiting since 09:12")
        view.flush_live()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m canvas.screenshot")
    parser.add_argument("flow")
    parser.add_argument("out")
    parser.add_argument("--zoom", type=float, default=1.0)
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    parser.add_argument("--live-demo", action="store_true", help="draw sample live-mode counts and a run path")
    args = parser.parse_args(argv)
    print(render_flow_png(args.flow, args.out, args.zoom, args.theme, args.live_demo))
    return 0


if __name__ == "__main__":
    sys.exit(main())
