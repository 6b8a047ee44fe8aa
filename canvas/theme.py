"""Canvas colours for light and dark, following the system palette unless told otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication


@dataclass(frozen=True)
class CanvasTheme:
    """Every colour the canvas paints with."""

    name: str
    background: QColor
    grid_minor: QColor
    grid_major: QColor
    node_body: QColor
    node_header: QColor
    node_border: QColor
    node_selected: QColor
    text: QColor
    text_muted: QColor
    edge: QColor
    edge_selected: QColor
    port_fill: QColor
    port_border: QColor
    error: QColor
    warning: QColor
    wire_ok: QColor
    wire_refused: QColor
    live_running: QColor
    live_waiting: QColor
    run_path: QColor
    minimap_background: QColor
    window: QColor
    """Panels and toolbars (the palette's Window)."""
    base: QColor
    """Fields and tables (the palette's Base)."""
    disabled_text: QColor
    """Text and icons of controls that cannot be used now: clearly dimmer than `text`."""
    highlight: QColor
    """Selected rows; white text on it."""
    button: QColor
    """Push buttons that can be pressed (a disabled one is flat, the colour of `window`)."""
    header_tint_alpha: int
    """How much of a node's category colour tints its header (0-255)."""
    categories: dict[str, QColor] = field(default_factory=dict)

    def category_color(self, category: str) -> QColor:
        return self.categories.get(category, self.text_muted)

    def header_fill(self, accent: QColor) -> QColor:
        """The opaque colour of a node header tinted with `accent` (what its title and icon sit on)."""
        return blend(accent, self.node_body, self.header_tint_alpha / 255)


INK = QColor("#1d2330")
PAPER = QColor("#ffffff")


def relative_luminance(colour: QColor) -> float:
    """WCAG 2 relative luminance of an opaque colour."""

    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.03928 else ((channel + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(colour.redF()) + 0.7152 * linear(colour.greenF()) + 0.0722 * linear(colour.blueF())


def contrast_ratio(first: QColor, second: QColor) -> float:
    """WCAG 2 contrast ratio (1 to 21); AA asks 4.5 for text."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def blend(top: QColor, bottom: QColor, alpha: float) -> QColor:
    """`top` painted at `alpha` over an opaque `bottom`."""
    return QColor.fromRgbF(*(t * alpha + b * (1 - alpha) for t, b in (
        (top.redF(), bottom.redF()), (top.greenF(), bottom.greenF()), (top.blueF(), bottom.blueF()))))


def readable_on(fill: QColor) -> QColor:
    """White or ink, whichever reads better on `fill` (badge and pill text)."""
    return PAPER if contrast_ratio(PAPER, fill) >= contrast_ratio(INK, fill) else INK


LIGHT = CanvasTheme(
    name="light",
    background=QColor("#f4f5f7"),
    grid_minor=QColor("#e6e8ec"),
    grid_major=QColor("#d5d9df"),
    node_body=QColor("#ffffff"),
    node_header=QColor("#f7f8fa"),
    node_border=QColor("#c3c8d0"),
    node_selected=QColor("#2f6fed"),
    text=QColor("#1d2330"),
    text_muted=QColor("#5d6675"),
    edge=QColor("#8a93a3"),
    edge_selected=QColor("#2f6fed"),
    port_fill=QColor("#ffffff"),
    port_border=QColor("#7b8494"),
    error=QColor("#c5221f"),
    warning=QColor("#e8a200"),
    wire_ok=QColor("#2f9e44"),
    wire_refused=QColor("#c5221f"),
    live_running=QColor("#2f6fed"),
    live_waiting=QColor("#c77700"),
    run_path=QColor("#7b3fe4"),
    minimap_background=QColor(255, 255, 255, 215),
    window=QColor("#f2f3f5"),
    base=QColor("#ffffff"),
    disabled_text=QColor("#8a909b"),
    highlight=QColor("#2f6fed"),
    button=QColor("#fbfbfc"),
    header_tint_alpha=30,
    categories={
        "Triggers": QColor("#237a36"),
        "Waiting": QColor("#a34f00"),
        "Money & AI": QColor("#6c35d0"),
        "Logic": QColor("#1864ab"),
        "Data": QColor("#0b6b7d"),
        "Flows": QColor("#a61e4d"),
    },
)

DARK = CanvasTheme(
    name="dark",
    background=QColor("#1e2127"),
    grid_minor=QColor("#262a31"),
    grid_major=QColor("#2f343c"),
    node_body=QColor("#2b3038"),
    node_header=QColor("#323842"),
    node_border=QColor("#464d59"),
    node_selected=QColor("#5b9bff"),
    text=QColor("#e8eaee"),
    text_muted=QColor("#a3aab6"),
    edge=QColor("#7d8696"),
    edge_selected=QColor("#5b9bff"),
    port_fill=QColor("#2b3038"),
    port_border=QColor("#9aa3b2"),
    error=QColor("#ff6b5e"),
    warning=QColor("#f5c542"),
    wire_ok=QColor("#51cf66"),
    wire_refused=QColor("#ff6b5e"),
    live_running=QColor("#5b9bff"),
    live_waiting=QColor("#ffa94d"),
    run_path=QColor("#b197fc"),
    minimap_background=QColor(30, 33, 39, 215),
    window=QColor("#24272e"),
    base=QColor("#1b1e23"),
    disabled_text=QColor("#6b7280"),
    highlight=QColor("#2d5fb8"),
    button=QColor("#353a44"),
    header_tint_alpha=34,
    categories={
        "Triggers": QColor("#51cf66"),
        "Waiting": QColor("#ffa94d"),
        "Money & AI": QColor("#c3b0ff"),
        "Logic": QColor("#6cbcff"),
        "Data": QColor("#3bc9db"),
        "Flows": QColor("#faa2c1"),
    },
)


class _ThemeNotifier(QObject):
    changed = Signal(object)


_current: CanvasTheme = LIGHT
_notifier: _ThemeNotifier | None = None
_palette_overridden = False
_mode = "system"
_following_system = False
_mode = "system"
_following_system = False


def current_theme() -> CanvasTheme:
    """The theme items paint with now."""
    return _current


def theme_notifier() -> _ThemeNotifier:
    """Emits `changed(theme)` after apply_theme; scenes repaint on it."""
    global _notifier
    if _notifier is None:
        _notifier = _ThemeNotifier()
    return _notifier


def system_prefers_dark() -> bool:
    """True when the platform asks for dark, or the palette's window colour is dark."""
    hints = QGuiApplication.styleHints()
    scheme = hints.colorScheme() if hints is not None else Qt.ColorScheme.Unknown
    if scheme != Qt.ColorScheme.Unknown:
        return scheme == Qt.ColorScheme.Dark
    return QGuiApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128


def _palette_for(theme: CanvasTheme) -> QPalette:
    palette = QPalette()
    window, base = theme.window, theme.base
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: theme.text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: window,
        QPalette.ColorRole.Text: theme.text,
        QPalette.ColorRole.Button: theme.button,
        QPalette.ColorRole.ButtonText: theme.text,
        QPalette.ColorRole.Highlight: theme.highlight,
        QPalette.ColorRole.HighlightedText: QColor("#ffffff"),
        QPalette.ColorRole.ToolTipBase: base,
        QPalette.ColorRole.ToolTipText: theme.text,
        QPalette.ColorRole.PlaceholderText: theme.text_muted,
    }
    for role, color in roles.items():
        palette.setColor(role, color)
    # A control that cannot be used is dim and flat: greyed text, its field the colour of the panel.
    disabled = QPalette.ColorGroup.Disabled
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText,
                 QPalette.ColorRole.PlaceholderText):
        palette.setColor(disabled, role, theme.disabled_text)
    palette.setColor(disabled, QPalette.ColorRole.Base, window)
    palette.setColor(disabled, QPalette.ColorRole.Button, window)
    palette.setColor(disabled, QPalette.ColorRole.Highlight, theme.grid_major)
    palette.setColor(disabled, QPalette.ColorRole.Light, window)
    return palette


def apply_theme(app: QApplication, mode: str = "system") -> CanvasTheme:
    """Switch to "light", "dark" or "system"; sets the app palette for explicit modes and tells scenes."""
    global _current, _palette_overridden, _mode, _following_system
    if mode not in ("light", "dark", "system"):
        raise ValueError(f'theme "{mode}" is not known; use light, dark or system')
    _mode = mode
    hints = QGuiApplication.styleHints()
    if not _following_system and hints is not None:
        hints.colorSchemeChanged.connect(_system_scheme_changed)
        _following_system = True
    if mode == "system":
        _current = DARK if system_prefers_dark() else LIGHT
        style = app.style()
        if _palette_overridden and style is not None:
            app.setPalette(style.standardPalette())
            _palette_overridden = False
    else:
        _current = DARK if mode == "dark" else LIGHT
        app.setPalette(_palette_for(_current))
        _palette_overridden = True
    theme_notifier().changed.emit(_current)
    return _current


def _system_scheme_changed(_scheme: Qt.ColorScheme) -> None:
    app = QApplication.instance()
    if _mode == "system" and isinstance(app, QApplication):
        apply_theme(app, "system")
