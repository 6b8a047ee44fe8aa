"""The offscreen screenshot renders the triage flow legibly at 100%."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from canvas.screenshot import render_flow_png
from canvas.theme import apply_theme

from .conftest import TRIAGE


def test_triage_screenshot_at_100_percent_shows_every_node(qapp: QApplication, tmp_path: Path) -> None:
    try:
        out = render_flow_png(TRIAGE, tmp_path / "triage.png", zoom=1.0, live_demo=True)
    finally:
        apply_theme(qapp, "light")
    image = QImage(str(out))
    # 10 nodes spanning 1,496 scene units must fit side by side at 1:1, plus margins.
    assert image.width() >= 1496 and image.height() >= 260
    # Dark pixels are title and summary text (background and grid are light): every column of nodes has some.
    text_pixels = [
        (x, y)
        for y in range(0, image.height(), 2)
        for x in range(0, image.width(), 2)
        if image.pixelColor(x, y).lightness() < 90
    ]
    assert len(text_pixels) > 300, "titles are missing from the screenshot"
    assert len({x // 220 for x, _ in text_pixels}) >= 7, "some node columns have no readable text"
