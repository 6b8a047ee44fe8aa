"""Light and dark for the whole app: the canvas theme sets the palette, our QSS styles docks, tables and notes."""

from __future__ import annotations

from importlib import resources

from PySide6.QtWidgets import QApplication

from app.settings import ThemeMode

THEMES_PACKAGE = "resources.themes"


def _stylesheet(name: str) -> str:
    folder = resources.files(THEMES_PACKAGE)
    return folder.joinpath("common.qss").read_text("utf-8") + "\n" + folder.joinpath(f"{name}.qss").read_text("utf-8")


def apply_app_theme(app: QApplication, mode: ThemeMode) -> str:
    """Apply "system", "light" or "dark"; returns the theme in force ("light" or "dark")."""
    from canvas.theme import apply_theme

    theme = apply_theme(app, mode)
    app.setStyleSheet(_stylesheet(theme.name))
    return theme.name


def status_colour(status: str) -> str:
    """The colour of a run or step status in the theme in force (legible on its fields and panels)."""
    from app.panels.rows import status_colours
    from canvas.theme import current_theme

    return status_colours(current_theme().name == "dark").get(status, current_theme().text_muted.name())
