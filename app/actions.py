"""Menus, toolbar and shortcuts declared as data; the window only supplies a handler per action id."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QStyle, QToolBar, QWidget


@dataclass(frozen=True)
class ActionSpec:
    """One user command: where it appears and how to reach it from the keyboard."""

    id: str
    text: str
    menu: str
    shortcuts: tuple[str | QKeySequence.StandardKey, ...] = ()
    tip: str = ""
    toolbar: bool = False
    icon: QStyle.StandardPixmap | None = None
    checkable: bool = False
    separator_before: bool = False
    canvas: bool = False
    """Runs the current canvas's command of the same id; the menu shows the canvas's key for it, which stays the
    canvas's (bound once, where the keys go)."""


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("new", "&New flow", "&File", ("Ctrl+N",), "Start an empty flow in a new tab", True,
               QStyle.StandardPixmap.SP_FileIcon),
    ActionSpec("open", "&Open…", "&File", ("Ctrl+O",), "Open a *.flow.json file", True,
               QStyle.StandardPixmap.SP_DialogOpenButton),
    ActionSpec("save", "&Save", "&File", ("Ctrl+S",), "Save the current flow", True,
               QStyle.StandardPixmap.SP_DialogSaveButton, separator_before=True),
    ActionSpec("save_as", "Save &As…", "&File", ("Ctrl+Shift+S",), "Save the current flow under a new name"),
    ActionSpec("close_tab", "&Close tab", "&File", ("Ctrl+W",), "Close the current flow (asks to save changes)"),
    ActionSpec("settings", "Se&ttings…", "&File", ("Ctrl+,",), "Data folder, Redis, database, providers, budgets, keys",
               separator_before=True),
    ActionSpec("quit", "&Quit", "&File", ("Ctrl+Q",), "Quit Lockgate (parked runs stay parked)", separator_before=True),
    ActionSpec("undo", "&Undo", "&Edit", ("Ctrl+Z",), "Undo the last edit", True, QStyle.StandardPixmap.SP_ArrowBack,
               separator_before=True),
    ActionSpec("redo", "&Redo", "&Edit", ("Ctrl+Shift+Z", "Ctrl+Y"), "Redo the edit just undone", True,
               QStyle.StandardPixmap.SP_ArrowForward),
    ActionSpec("cut", "Cu&t", "&Edit", (), "Copy the selected nodes, then delete them", canvas=True,
               separator_before=True),
    ActionSpec("copy", "&Copy", "&Edit", (), "Copy the selected nodes with the edges between them", canvas=True),
    ActionSpec("paste", "&Paste", "&Edit", (), "Paste copied nodes at the cursor (or the canvas centre)",
               canvas=True),
    ActionSpec("duplicate", "D&uplicate", "&Edit", (), "Duplicate the selected nodes", canvas=True),
    ActionSpec("delete", "&Delete", "&Edit", (), "Delete the selected nodes and edges", canvas=True),
    ActionSpec("rename", "Re&name node", "&Edit", (), "Edit the selected node's title in place", canvas=True),
    ActionSpec("select_all", "Select &all", "&Edit", (), "Select every node", canvas=True, separator_before=True),
    ActionSpec("auto_layout", "Auto-&layout", "&Edit", (), "Arrange the flow left to right (undoable)",
               canvas=True),
    ActionSpec("validate", "&Validate", "&Flow", ("F7",), "Check the flow now and show the Problems", True,
               QStyle.StandardPixmap.SP_DialogApplyButton, separator_before=True),
    ActionSpec("publish", "&Publish", "&Flow", ("Ctrl+Shift+P",), "Validate and store the next version", True,
               QStyle.StandardPixmap.SP_ArrowUp),
    ActionSpec("run", "&Run…", "&Flow", ("F5",), "Start a run of the published flow with inputs", True,
               QStyle.StandardPixmap.SP_MediaPlay),
    ActionSpec("run_tests", "Run t&ests", "&Flow", ("Ctrl+Shift+F5",),
               "Replay the flow's tests (*.flowtest.json beside its file) and list failing ones in Problems"),
    ActionSpec("versions", "&Versions…", "&Flow", (), "The published versions of this flow"),
    ActionSpec("compare", "Co&mpare with version…", "&Flow", ("Ctrl+Shift+D",),
               "Show what the draft changed against a published version: added, removed, changed nodes"),
    ActionSpec("next_change", "Ne&xt change", "&Flow", ("F8",), "Select the next change of the comparison"),
    ActionSpec("previous_change", "Pre&vious change", "&Flow", ("Shift+F8",),
               "Select the previous change of the comparison"),
    ActionSpec("flow_properties", "Pr&operties", "&Flow", ("Alt+Return",),
               "The flow's name, id, description, inputs and limits (shown when no node is selected)"),
    ActionSpec("triggers", "&Triggers", "&Flow", ("Ctrl+Shift+T",),
               "Enable or disable this flow's webhooks and schedules; URLs, next fire, what they started"),
    ActionSpec("live", "&Live", "&Flow", ("Ctrl+Shift+L",), "Show what the engine is doing now on the canvas", True,
               QStyle.StandardPixmap.SP_ComputerIcon, checkable=True),
    ActionSpec("theme_system", "Theme: follow &system", "&View", (), "Light or dark as the system is",
               checkable=True),
    ActionSpec("theme_light", "Theme: &light", "&View", (), "Light theme", checkable=True),
    ActionSpec("theme_dark", "Theme: &dark", "&View", (), "Dark theme", checkable=True),
    ActionSpec("shortcuts", "&Keyboard shortcuts", "&Help", ("F1",), "List every shortcut"),
    ActionSpec("about", "&About Lockgate", "&Help", (), "Version and licence"),
)

MENU_ORDER: tuple[str, ...] = ("&File", "&Edit", "&Flow", "&View", "&Help")


def spec(action_id: str) -> ActionSpec:
    for item in ACTIONS:
        if item.id == action_id:
            return item
    raise KeyError(f"no action {action_id!r}; declare it in app.actions.ACTIONS")


def shortcut_texts(item: ActionSpec) -> list[str]:
    """Shortcuts of an action as this platform writes them (`Ctrl+S`)."""
    texts: list[str] = []
    for shortcut in item.shortcuts:
        sequences = QKeySequence.keyBindings(shortcut) if isinstance(shortcut, QKeySequence.StandardKey) else [
            QKeySequence(shortcut)
        ]
        texts.extend(s.toString(QKeySequence.SequenceFormat.NativeText) for s in sequences if not s.isEmpty())
    return texts


def shortcut_table() -> list[tuple[str, str]]:
    """(command, shortcuts) rows for the Help dialog, in menu order."""
    rows = []
    for item in ACTIONS:
        keys = shortcut_texts(item)
        if keys:
            rows.append((item.text.replace("&", "").rstrip("…"), ", ".join(keys)))
    return rows


def canvas_keys(action_id: str) -> str:
    """The canvas's keys for its command `action_id`, as this platform writes them."""
    from canvas.bindings import BINDINGS

    for binding in BINDINGS:
        if binding.name == action_id:
            return ", ".join(k.toString(QKeySequence.SequenceFormat.NativeText) for k in binding.sequences())
    raise KeyError(f"no canvas command {action_id!r}; declare it in canvas.bindings.BINDINGS")


def build_actions(parent: QWidget, handlers: Mapping[str, Callable[[], object]]) -> dict[str, QAction]:
    """One QAction per spec, connected to `handlers[id]` (actions without a handler start disabled)."""
    actions: dict[str, QAction] = {}
    style = parent.style()
    for item in ACTIONS:
        # Text after a tab is the menu's shortcut column: the canvas's key, shown without binding it twice.
        action = QAction(f"{item.text}\t{canvas_keys(item.id)}" if item.canvas else item.text, parent)
        action.setObjectName(f"action_{item.id}")
        keys: list[QKeySequence] = []
        for shortcut in item.shortcuts:
            if isinstance(shortcut, QKeySequence.StandardKey):
                keys.extend(QKeySequence.keyBindings(shortcut))
            else:
                keys.append(QKeySequence(shortcut))
        action.setShortcuts(keys)
        shown_keys = canvas_keys(item.id) if item.canvas else ", ".join(shortcut_texts(item))
        action.setToolTip(f"{item.tip} ({shown_keys})" if shown_keys else item.tip)
        action.setStatusTip(item.tip)
        action.setCheckable(item.checkable)
        if item.icon is not None:
            action.setIcon(style.standardIcon(item.icon))
        handler = handlers.get(item.id)
        if handler is None:
            action.setEnabled(False)
        else:
            action.triggered.connect(lambda _checked=False, h=handler: h())
        parent.addAction(action)
        actions[item.id] = action
    return actions


def build_menus(menubar: QMenuBar, actions: Mapping[str, QAction]) -> dict[str, QMenu]:
    """Menus in MENU_ORDER holding the declared actions."""
    menus = {title: menubar.addMenu(title) for title in MENU_ORDER}
    for item in ACTIONS:
        menu = menus[item.menu]
        if item.separator_before and not menu.isEmpty():
            menu.addSeparator()
        menu.addAction(actions[item.id])
    return menus


def build_toolbar(toolbar: QToolBar, actions: Mapping[str, QAction]) -> None:
    """The toolbar: the actions marked `toolbar=True`, grouped as in the menus."""
    previous_menu = None
    for item in ACTIONS:
        if not item.toolbar:
            continue
        if previous_menu is not None and item.menu != previous_menu:
            toolbar.addSeparator()
        toolbar.addAction(actions[item.id])
        previous_menu = item.menu
