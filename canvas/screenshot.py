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

MARGIN = 48


def render_flow_png(flow_path: str | Path, out: str | Path, zoom: float = 1.0, theme: str = "light") -> Path:
    """Open `flow_path` in an editor sized to fit it at `zoom`, and save what the view shows."""
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
    app.processEvents()
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    editor.grab().save(str(target))
    editor.close()
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m canvas.screenshot")
    parser.add_argument("flow")
    parser.add_argument("out")
    parser.add_argument("--zoom", type=float, default=1.0)
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    args = parser.parse_args(argv)
    print(render_flow_png(args.flow, args.out, args.zoom, args.theme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
