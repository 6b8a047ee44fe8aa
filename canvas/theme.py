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
    categories: dict[str, QColor] = field(default_factory=dict)

    def category_color(self, category: str) -> QColor:
        return self.categories.get(category, self.text_muted)


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
    error=QColor("#d93025"),
    warning=QColor("#e8a200"),
    wire_ok=QColor("#2f9e44"),
    wire_refused=QColor("#d93025"),
    live_running=QColor("#2f6fed"),
    live_waiting=QColor("#c77700"),
    run_path=QColor("#7b3fe4"),
    minimap_background=QColor(255, 255, 255, 215),
    categories={
        "Triggers": QColor("#2f9e44"),
        "Waiting": QColor("#d9822b"),
        "Money & AI": QColor("#7b3fe4"),
        "Logic": QColor("#1c7ed6"),
        "Data": QColor("#0c8599"),
        "Flows": QColor("#c2255c"),
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
    categories={
        "Triggers": QColor("#51cf66"),
        "Waiting": QColor("#ffa94d"),
        "Money & AI": QColor("#b197fc"),
        "Logic": QColor("#4dabf7"),
        "Data": QColor("#3bc9db"),
        "Flows": QColor("#f783ac"),
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
    dark = theme.name == "dark"
    window = QColor("#24272e") if dark else QColor("#f2f3f5")
    base = QColor("#1b1e23") if dark else QColor("#ffffff")
    roles = {
        QPalette.ColorRole.Window: window,
        QPalette.ColorRole.WindowText: theme.text,
        QPalette.ColorRole.Base: base,
        QPalette.ColorRole.AlternateBase: window,
        QPalette.ColorRole.Text: theme.text,
        QPalette.ColorRole.Button: window,
        QPalette.ColorRole.ButtonText: theme.text,
        QPalette.ColorRole.Highlight: theme.node_selected,
        QPalette.ColorRole.HighlightedText: QColor("#ffffff"),
        QPalette.ColorRole.ToolTipBase: base,
        QPalette.ColorRole.ToolTipText: theme.text,
        QPalette.ColorRole.PlaceholderText: theme.text_muted,
    }
    for role, color in roles.items():
        palette.setColor(role, color)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, theme.text_muted)
    palette.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText, theme.text_muted)
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
