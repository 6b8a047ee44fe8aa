"""Text and icons meet WCAG AA (4.5:1) in both themes: the palettes, the node colours and what real widgets
paint; controls that cannot be used look it (dimmer text, flat field)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from PySide6.QtGui import QColor, QIcon, QImage, QPalette
from PySide6.QtWidgets import QApplication, QLineEdit, QPushButton, QTableWidget, QWidget

from app.panels.code_editor import CODE_COLOURS
from app.panels.rows import RUN_STATUSES, status_colours
from app.settings import ThemeMode
from app.theme import apply_app_theme
from app.toolbar_icons import TOOLBAR_ICONS, toolbar_icon
from canvas.items import MIN_TEXT_PX, MIN_TITLE_PX, PORT_FONT, SUMMARY_FONT, TITLE_FONT, readable_font
from canvas.theme import DARK, LIGHT, CanvasTheme, contrast_ratio, readable_on

AA = 4.5
THEMES = (LIGHT, DARK)


def _pairs(theme: CanvasTheme) -> Iterator[tuple[str, QColor, QColor]]:
    """(what, foreground, background) for everything drawn as text or icon on the canvas and in panels."""
    yield "canvas text on node", theme.text, theme.node_body
    yield "node summary and port labels", theme.text_muted, theme.node_body
    yield "edge labels on the canvas", theme.text_muted, theme.background
    yield "waiting text under a node", theme.run_path, theme.background
    yield "failed label under a node", theme.error, theme.background
    for category, accent in theme.categories.items():
        header = theme.header_fill(accent)
        yield f"title on {category} header", theme.text, header
        yield f"{category} icon on its header", accent, header
        yield f"{category} icon in the palette", accent, theme.base
    for name in ("error", "warning", "live_running", "live_waiting"):
        fill = getattr(theme, name)
        yield f"badge text on {name}", readable_on(fill), fill
    yield "panel text", theme.text, theme.window
    yield "field text", theme.text, theme.base
    yield "button text", theme.text, theme.button
    yield "hints and field notes", theme.text_muted, theme.window
    yield "placeholder in a field", theme.text_muted, theme.base
    yield "selected row", QColor("#ffffff"), theme.highlight
    for name, colour in CODE_COLOURS[theme.name].items():
        yield f"code {name} in a script field", QColor(colour), theme.base
    for status, colour in status_colours(theme.name == "dark").items():
        yield f"status {status} in a table", QColor(colour), theme.base
        yield f"status {status} on an alternate row", QColor(colour), theme.window


@pytest.mark.parametrize("theme", THEMES, ids=lambda t: t.name)
def test_every_text_and_icon_colour_meets_aa(theme: CanvasTheme) -> None:
    failing = [f"{what}: {contrast_ratio(fg, bg):.2f} ({fg.name()} on {bg.name()})"
               for what, fg, bg in _pairs(theme) if contrast_ratio(fg, bg) < AA]
    assert failing == []
    assert set(status_colours(theme.name == "dark")) == set(RUN_STATUSES)


def test_contrast_ratio_is_wcags() -> None:
    assert contrast_ratio(QColor("#000000"), QColor("#ffffff")) == pytest.approx(21.0)
    assert contrast_ratio(QColor("#777777"), QColor("#ffffff")) == pytest.approx(4.48, abs=0.01)
    assert contrast_ratio(QColor("#ffffff"), QColor("#ffffff")) == pytest.approx(1.0)


def _background_and_ink(image: QImage) -> tuple[QColor, QColor]:
    """The image's most common colour and the pixel contrasting most with it (the text's or icon's colour)."""
    counts: Counter[int] = Counter()
    for y in range(image.height()):
        for x in range(image.width()):
            counts[image.pixel(x, y)] += 1
    background = QColor.fromRgb(counts.most_common(1)[0][0])
    ink = max((QColor.fromRgb(rgb) for rgb in counts), key=lambda c: contrast_ratio(c, background))
    return background, ink


def _ink_contrast(widget: QWidget) -> float:
    background, ink = _background_and_ink(widget.grab().toImage())
    return contrast_ratio(ink, background)


@pytest.fixture(params=["light", "dark"])
def themed(request: pytest.FixtureRequest, qapp: QApplication) -> Iterator[ThemeMode]:
    mode: ThemeMode = request.param
    apply_app_theme(qapp, mode)
    yield mode
    apply_app_theme(qapp, "light")


def test_toolbar_icons_read_on_the_toolbar_and_dim_when_disabled(themed: ThemeMode, qapp: QApplication) -> None:
    palette = qapp.palette()
    toolbar = palette.color(QPalette.ColorRole.Window)
    for action_id in TOOLBAR_ICONS:
        icon = toolbar_icon(action_id, palette)
        normal = icon.pixmap(20, 20, QIcon.Mode.Normal).toImage()
        disabled = icon.pixmap(20, 20, QIcon.Mode.Disabled).toImage()
        ink = _opaque_ink(normal)
        dim = _opaque_ink(disabled)
        assert contrast_ratio(ink, toolbar) >= AA, (themed, action_id, ink.name())
        assert contrast_ratio(dim, toolbar) < contrast_ratio(ink, toolbar) - 1.5, (themed, action_id)


def _opaque_ink(image: QImage) -> QColor:
    best = max(((image.pixelColor(x, y)) for y in range(image.height()) for x in range(image.width())),
               key=lambda c: c.alpha())
    assert best.alpha() == 255, "the icon has no solid stroke"
    return best


def test_disabled_controls_look_disabled(qtbot, themed: ThemeMode) -> None:
    enabled, disabled = QPushButton("Approve"), QPushButton("Approve")
    disabled.setEnabled(False)
    field, dead_field = QLineEdit("3"), QLineEdit("3")
    dead_field.setEnabled(False)
    for widget in (enabled, disabled, field, dead_field):
        qtbot.addWidget(widget)
        widget.resize(120, 30)
        widget.show()
    assert _ink_contrast(enabled) >= AA
    assert _ink_contrast(field) >= AA
    # Dimmed, yet still legible, and clearly apart from the live control.
    for live, dead in ((enabled, disabled), (field, dead_field)):
        assert 1.8 <= _ink_contrast(dead) <= _ink_contrast(live) - 2.0, themed
    field_fill = _background_and_ink(field.grab().toImage())[0]
    dead_fill = _background_and_ink(dead_field.grab().toImage())[0]
    assert field_fill != dead_fill  # a disabled field is flat, the colour of the panel


def test_table_headers_and_rows_read(qtbot, themed: ThemeMode) -> None:
    table = QTableWidget(1, 1)
    table.setHorizontalHeaderLabels(["Started"])
    qtbot.addWidget(table)
    table.resize(200, 100)
    table.show()
    header = table.horizontalHeader()
    assert _ink_contrast(header) >= AA, themed


def test_node_text_stays_readable_when_zoomed_out() -> None:
    for zoom in (0.45, 0.55, 0.65, 0.8, 1.0, 1.5):
        for font, largest in ((SUMMARY_FONT, 16.0), (PORT_FONT, 16.0), (TITLE_FONT, 20.0)):
            shown = readable_font(font, zoom, largest)
            assert shown.pixelSize() * zoom >= min(MIN_TEXT_PX, largest * zoom) - 0.5
            assert shown.pixelSize() >= font.pixelSize()
            assert shown.pixelSize() <= max(largest, font.pixelSize())
        title = readable_font(TITLE_FONT, zoom, 20.0, MIN_TITLE_PX)
        assert title.pixelSize() * zoom >= min(MIN_TITLE_PX, 20 * zoom) - 0.5


def test_the_windows_toolbar_uses_them_and_follows_a_theme_switch(qtbot, app_settings, no_engine_env) -> None:
    from app.gui import create_application, create_main_window

    app_settings.first_start_done = True
    app_settings.theme = "light"
    window = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(window)
    window.set_theme("dark")
    try:
        toolbar = QApplication.palette().color(QPalette.ColorRole.Window)
        assert toolbar.lightness() < 80
        for action_id in ("undo", "publish", "run", "live"):
            ink = _opaque_ink(window.actions_by_id[action_id].icon().pixmap(20, 20).toImage())
            assert contrast_ratio(ink, toolbar) >= AA, action_id
    finally:
        window.set_theme("light")
