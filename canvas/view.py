"""The canvas view: zoom, pan, keys, drops, quick-add, minimap and the live-mode overlay hook.

`BINDINGS` (the hotkey table) is re-exported here for menus.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QContextMenuEvent,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QResizeEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import QFrame, QGraphicsView, QMenu, QWidget

from canvas.bindings import BINDINGS, NUDGE_KEYS
from canvas.document import FRAGMENT_FORMAT, STARTER_CONFIG, FlowDocument
from canvas.geometry import (
    GRID_SIZE,
    HEADER_HEIGHT,
    NODE_WIDTH,
    PORT_RADIUS,
    has_input,
    input_port_offset,
    node_height,
    output_ports,
)
from canvas.items import DETAIL_ZOOM, OVERLAY_ABOVE, OVERLAY_BELOW, NodeItem
from canvas.layout import FREE_GAP, free_position
from canvas.live import LiveOverlay
from canvas.minimap import Minimap
from canvas.quick_add import QuickAddBox
from canvas.scene import FlowScene
from canvas.theme import CanvasTheme, current_theme, theme_notifier
from canvas.title_editor import TitleEditor, title_rect
from canvas.zoom_bar import ZoomBar
from engine.flow import Node

NODE_TYPE_MIME = "application/x-lockgate-node-type"
MIN_ZOOM = 0.05
MAX_ZOOM = 3.0
FIT_MAX_ZOOM = 1.25
FIT_MIN_ZOOM = 0.5
"""A fit never zooms out below this: nodes keep their titles (they go at DETAIL_ZOOM) and a flow too big for the
view shows its start, the rest a scroll away; fitting again shows it whole."""
GRID_MIN_ZOOM = 0.5
CORNER_MARGIN = 12
FIT_MARGIN = 40.0
PASTE_STEP = 40.0
SCROLL_MARGIN = 8.0


class FlowView(QGraphicsView):
    """Shows one FlowDocument.

    Signals: `selection_changed(list[str])`, `node_activated(str)`, `status(str)`, `zoom_changed(float)`.
    """

    selection_changed = Signal(list)
    node_activated = Signal(str)
    zoom_changed = Signal(float)
    status = Signal(str)

    def __init__(self, document: FlowDocument, parent: QWidget | None = None) -> None:
        self.document = document
        self.flow_scene = FlowScene(document)
        super().__init__(self.flow_scene, parent)
        self.flow_scene.setParent(self)
        self.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setCacheMode(QGraphicsView.CacheModeFlag.CacheBackground)
        self.setOptimizationFlag(QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing, True)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setResizeAnchor(QGraphicsView.ViewportAnchor.AnchorViewCenter)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setDragMode(QGraphicsView.DragMode.RubberBandDrag)
        self.setRubberBandSelectionMode(Qt.ItemSelectionMode.IntersectsItemShape)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAcceptDrops(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setToolTip("")
        self.setAccessibleName("Flow canvas")
        self._space_held = False
        self._cursor_over_port = False
        self._panning_from: QPoint | None = None
        self._paste_count = 0
        self._last_paste_at: QPointF | None = None
        self._hover_point: QPoint | None = None
        self._readable_fit: tuple[float, int, int, tuple[str, ...]] | None = None
        """(zoom, scroll x, scroll y, selection) right after a fit that stopped at FIT_MIN_ZOOM: fitting again
        from there shows the whole flow."""
        self.context_menu: QMenu | None = None
        self.node_menu_hook: Callable[[QMenu, str], object] | None = None
        """Adds the app's entries to a node's menu (e.g. Rerun from here); the canvas knows nothing of them."""
        self._pending_wire: tuple[str, str | None] | None = None
        self._quick_add_point = QPointF()
        self.quick_add = QuickAddBox(self)
        self.quick_add.chosen.connect(self._quick_add_chosen)
        self.quick_add.dismissed.connect(self._quick_add_dismissed)
        self.minimap = Minimap(self)
        self.title_editor = TitleEditor(self.viewport())
        self.title_editor.renamed.connect(self._rename_from_editor)
        self.title_editor.finished.connect(self.setFocus)
        self.zoom_bar = ZoomBar(self)
        self.actions_by_name: dict[str, QAction] = {}
        self._handlers: dict[str, Callable[[], object]] = {
            "delete": self.delete_selection,
            "cut": self.cut_selection,
            "copy": self.copy_selection,
            "paste": self.paste,
            "duplicate": self.duplicate_selection,
            "rename": self.rename_selected,
            "select_all": self.select_all,
            "fit": lambda: self.fit_selection_or_all(announce=True),
            "quick_add": self.open_quick_add,
            "auto_layout": document.auto_layout,
            "zoom_in": lambda: self.zoom_by(1.25),
            "zoom_out": lambda: self.zoom_by(0.8),
            "reset_zoom": lambda: self.set_zoom(1.0),
            "toggle_snap": lambda: self.set_snap_to_grid(not self.flow_scene.snap_to_grid),
            "toggle_minimap": lambda: self.set_minimap_shown(not self.minimap_shown()),
        }
        for binding in BINDINGS:
            action = QAction(binding.text, self)
            action.setShortcuts(binding.sequences())
            # Keys reach keyPressEvent (which also works when the window is not active); the action is for menus.
            action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
            action.setToolTip(binding.tip)
            action.triggered.connect(self._handlers[binding.name])
            if binding.name in ("toggle_snap", "toggle_minimap"):
                action.setCheckable(True)
            self.actions_by_name[binding.name] = action
        self.actions_by_name["toggle_minimap"].setChecked(True)
        self.zoom_bar.zoom_out.clicked.connect(self._handlers["zoom_out"])
        self.zoom_bar.zoom_in.clicked.connect(self._handlers["zoom_in"])
        self.zoom_bar.percent.clicked.connect(self._handlers["reset_zoom"])
        self.zoom_bar.fit.clicked.connect(self._handlers["fit"])
        self.zoom_bar.fit.setToolTip("Frame the selection, or the whole flow, where titles stay readable; "
                                     "press again to see all of a big flow (F)")
        self.zoom_bar.minimap.toggled.connect(self.set_minimap_shown)
        self.zoom_changed.connect(self.zoom_bar.show_zoom)
        self.live = LiveOverlay(self.flow_scene, self)
        self._last_selection: list[str] = []
        self._selection_timer = QTimer(self)
        self._selection_timer.setSingleShot(True)
        self._selection_timer.setInterval(0)
        self._selection_timer.timeout.connect(self._flush_selection)
        self.flow_scene.selectionChanged.connect(self._emit_selection)
        self.flow_scene.selection_settled.connect(self._flush_selection)
        self.flow_scene.wire_dropped.connect(self._wire_dropped)
        self.flow_scene.wire_hint.connect(self.status)
        theme_notifier().changed.connect(self._on_theme)

    # ----- public API ----------------------------------------------------------------

    def run_command(self, name: str) -> None:
        """Run the canvas command `name` of `BINDINGS` (what its key does), e.g. from a window menu."""
        self._handlers[name]()

    def zoom(self) -> float:
        return self.transform().m11()

    def set_zoom(self, level: float) -> None:
        level = max(MIN_ZOOM, min(MAX_ZOOM, level))
        self.zoom_by(level / self.zoom())

    def zoom_by(self, factor: float, anchor: QPointF | None = None) -> None:
        """Scale by `factor`, keeping the scene point under `anchor` (viewport coords) still."""
        target = max(MIN_ZOOM, min(MAX_ZOOM, self.zoom() * factor))
        factor = target / self.zoom()
        if abs(factor - 1) < 1e-9:
            return
        if anchor is None:
            self.scale(factor, factor)
            self._after_zoom()
        else:
            before = self.mapToScene(anchor.toPoint())
            old_anchor = self.transformationAnchor()
            self.setTransformationAnchor(QGraphicsView.ViewportAnchor.NoAnchor)
            self.scale(factor, factor)
            after = self.mapToScene(anchor.toPoint())
            self.translate(after.x() - before.x(), after.y() - before.y())
            self.setTransformationAnchor(old_anchor)
            self._after_zoom()
        self.minimap.update()

    def _after_zoom(self) -> None:
        # Antialiased curves cost most when zoomed out, where nobody can see the difference.
        self.setRenderHint(QPainter.RenderHint.Antialiasing, self.zoom() >= DETAIL_ZOOM)
        self.zoom_changed.emit(self.zoom())
        self._follow_title_editor()

    def fit_selection_or_all(self, whole: bool | None = None, announce: bool = False) -> None:
        """F: frame the selected nodes, or every node when none is selected, in the part of the view the
        corner controls leave free (`free_area`).

        The fit stops at FIT_MIN_ZOOM, where nodes still show their titles; a flow too big for that shows its start
        (its triggers, else its leftmost nodes) with the rest a scroll away. Fitting again right after shows all of
        it however small; `whole` forces either. `announce` says so in `status` (the F key, the Fit button)."""
        selected = self.flow_scene.selected_node_ids()
        rect = self.flow_scene.nodes_bounding_rect(selected or None)
        if rect.isNull():
            return
        rect = rect.adjusted(-FIT_MARGIN, -FIT_MARGIN, FIT_MARGIN, FIT_MARGIN)
        if whole is None:
            whole = self._readable_fit is not None and self._readable_fit == self._fit_state(selected)
        self._readable_fit = None
        area = self.free_area(rect)
        level = min(area.width() / rect.width(), area.height() / rect.height(), FIT_MAX_ZOOM)
        if whole or level >= FIT_MIN_ZOOM:
            self.set_zoom(level)
            self._show_in_area(rect.center(), area)
            if whole and announce:
                self.status.emit("Showing the whole flow; press F again to zoom in to where titles show.")
            self.minimap.update()
            return
        level = FIT_MIN_ZOOM
        area = self._area_showing_most(rect, level)
        self.set_zoom(level)
        # What the free area holds at this zoom, in scene units, over the flow's start.
        width, height = area.width() / level, area.height() / level
        start = self._start_rect(selected or None)

        def centre(low: float, high: float, room: float, wanted: float) -> float:
            return (low + high) / 2 if high - low <= room else min(max(wanted, low + room / 2), high - room / 2)

        self._show_in_area(QPointF(centre(rect.left(), rect.right(), width, start.center().x()),
                                   centre(rect.top(), rect.bottom(), height, start.center().y())), area)
        self._readable_fit = self._fit_state(selected)
        if announce:
            self.status.emit(f"Zoomed to {round(level * 100)}%, where titles show: scroll for the rest, "
                             "or press F again to see the whole flow.")
        self.minimap.update()

    def _fit_state(self, selected: list[str]) -> tuple[float, int, int, tuple[str, ...]]:
        return (round(self.zoom(), 6), self.horizontalScrollBar().value(), self.verticalScrollBar().value(),
                tuple(selected))

    def _show_in_area(self, scene_point: QPointF, area: QRectF) -> None:
        """Scroll so `scene_point` sits at the centre of `area` (viewport pixels)."""
        offset = QPointF(self.viewport().rect().center()) - area.center()
        self.centerOn(scene_point + offset / self.zoom())

    def _start_rect(self, node_ids: list[str] | None) -> QRectF:
        """Where a flow (or the nodes `node_ids`) starts: its triggers, else its leftmost nodes (scene units)."""
        items = [item for node_id, item in self.flow_scene.node_items.items()
                 if node_ids is None or node_id in node_ids]
        starts = [item for item in items if not has_input(item.node)]
        if not starts:
            left = min(item.pos().x() for item in items)
            starts = [item for item in items if item.pos().x() < left + NODE_WIDTH]
        rect = QRectF()
        for item in starts:
            rect = rect.united(item.sceneBoundingRect())
        return rect

    def free_area(self, rect: QRectF | None = None) -> QRectF:
        """The viewport rectangle no corner control covers: beside the minimap or above it, whichever holds
        `rect` (scene units) larger; the zoom bar's row is kept clear either way."""
        areas = self._free_areas()
        if rect is None or rect.isEmpty() or len(areas) == 1:
            return areas[-1]

        def scale(area: QRectF) -> float:
            return min(area.width() / rect.width(), area.height() / rect.height())

        beside, above = areas
        return beside if scale(beside) > scale(above) else above

    def _free_areas(self) -> list[QRectF]:
        """[beside the minimap, above it] when it shows, else [above the zoom bar] (viewport pixels)."""
        view = QRectF(self.viewport().rect())
        bar_top = self.zoom_bar.geometry().top() - CORNER_MARGIN / 2
        above_bar = QRectF(view.left(), view.top(), view.width(), max(1.0, bar_top - view.top()))
        if not self.minimap_shown():
            return [above_bar]
        map_rect = QRectF(self.minimap.geometry())
        beside = QRectF(view.left(), view.top(), max(1.0, map_rect.left() - CORNER_MARGIN), above_bar.height())
        above = QRectF(view.left(), view.top(), view.width(),
                       max(1.0, min(map_rect.top(), bar_top) - CORNER_MARGIN / 2 - view.top()))
        return [beside, above]

    def _area_showing_most(self, rect: QRectF, level: float) -> QRectF:
        """The free area that shows the largest share of `rect` (scene units) at zoom `level`."""
        def share(area: QRectF) -> float:
            return (min(1.0, area.width() / (rect.width() * level))
                    * min(1.0, area.height() / (rect.height() * level)))

        return max(reversed(self._free_areas()), key=share)

    def scroll_into_free_area(self, scene_rect: QRectF, centre: bool = False) -> None:
        """Scroll (no zoom) so `scene_rect` lies in `free_area`: the least way, or with `centre` as near the
        viewport's centre as the area allows; nothing moves when it is there already and `centre` is off."""
        area = self.free_area(QRectF(0, 0, scene_rect.width(), scene_rect.height()))
        box = QRectF(self.mapFromScene(scene_rect).boundingRect())
        if not centre and area.contains(box):
            return
        # A few pixels clear of the edges, when there is room, so rounding never leaves it a pixel under a control.
        margin_x = max(0.0, min(SCROLL_MARGIN, (area.width() - box.width()) / 2))
        margin_y = max(0.0, min(SCROLL_MARGIN, (area.height() - box.height()) / 2))
        area = area.adjusted(margin_x, margin_y, -margin_x, -margin_y)
        target = QRectF(box)
        if centre:
            target.moveCenter(QPointF(self.viewport().rect().center()))

        def inside(low: float, size: float, area_low: float, area_size: float) -> float:
            # Keep the start (left, top) in view when the box is bigger than the area.
            return max(area_low, min(low, area_low + area_size - size)) if size <= area_size else area_low

        target.moveTo(inside(target.left(), target.width(), area.left(), area.width()),
                      inside(target.top(), target.height(), area.top(), area.height()))
        shift = (target.center() - box.center()) / self.zoom()
        self.centerOn(self.mapToScene(self.viewport().rect().center()) - shift)
        self.minimap.update()

    def minimap_shown(self) -> bool:
        return not self.minimap.isHidden()

    def set_minimap_shown(self, shown: bool) -> None:
        self.minimap.setVisible(shown)
        self.actions_by_name["toggle_minimap"].setChecked(shown)
        if self.zoom_bar.minimap.isChecked() != shown:
            self.zoom_bar.minimap.setChecked(shown)

    def select_node(self, node_id: str) -> None:
        """Select only `node_id` and bring it into view (e.g. from a diagnostic): centred when it is not wholly in
        the free area, else left where it is."""
        self.flow_scene.select_nodes([node_id])
        item = self.flow_scene.node_items.get(node_id)
        if item is not None and not self._in_free_area(item):
            self.center_on_node(node_id)

    def center_on_node(self, node_id: str) -> None:
        """Scroll `node_id` to the viewport's centre, or as near it as keeps it clear of the corner controls."""
        item = self.flow_scene.node_items.get(node_id)
        if item is not None:
            self.scroll_into_free_area(item.mapRectToScene(item.node_rect()), centre=True)

    def _in_free_area(self, item: NodeItem) -> bool:
        box = item.mapRectToScene(item.node_rect())
        return self.free_area(QRectF(0, 0, box.width(), box.height())).contains(
            QRectF(self.mapFromScene(box).boundingRect()))

    def selected_node_ids(self) -> list[str]:
        return self.flow_scene.selected_node_ids()

    def set_snap_to_grid(self, on: bool) -> None:
        self.flow_scene.snap_to_grid = on
        self.actions_by_name["toggle_snap"].setChecked(on)

    def select_all(self) -> None:
        self.flow_scene.select_nodes(list(self.flow_scene.node_items))

    def delete_selection(self) -> None:
        """Delete selected nodes (with their edges) and selected edges, as one step."""
        node_ids = self.flow_scene.selected_node_ids()
        edges = [e for e in self.flow_scene.selected_edges() if e.from_ not in node_ids and e.to not in node_ids]
        if not node_ids and not edges:
            return
        stack = self.document.undo_stack
        stack.beginMacro("Delete selection")
        for edge in edges:
            self.document.disconnect(edge)
        self.document.delete_nodes(node_ids)
        stack.endMacro()

    def copy_selection(self) -> dict[str, object] | None:
        node_ids = self.flow_scene.selected_node_ids()
        if not node_ids:
            return None
        fragment = self.document.copy_fragment(node_ids)
        # Plain JSON text (its "format" key marks it): it pastes into another window, a chat or a diff,
        # and a Python-made QMimeData handed to the clipboard crashed PySide at exit.
        QGuiApplication.clipboard().setText(json.dumps(fragment, indent=2))
        self._paste_count = 0
        self._last_paste_at = None
        return fragment

    def cut_selection(self) -> list[str]:
        """Copy the selected nodes, then delete them and selected edges as one undo step."""
        node_ids = self.flow_scene.selected_node_ids()
        if self.copy_selection() is None:
            return []
        self.document.undo_stack.beginMacro("Cut")
        self.delete_selection()
        self.document.undo_stack.endMacro()
        return node_ids

    def clipboard_fragment(self) -> dict[str, object] | None:
        """The copied nodes on the clipboard, if it holds some."""
        try:
            fragment = json.loads(QGuiApplication.clipboard().text())
        except (ValueError, TypeError):
            return None
        if not isinstance(fragment, dict) or fragment.get("format") != FRAGMENT_FORMAT or not fragment.get("nodes"):
            return None
        return fragment

    def paste(self, at: QPointF | None = None) -> list[str]:
        """Paste the clipboard's nodes with their top-left at `at` (default: the cursor), and select them."""
        fragment = self.clipboard_fragment()
        if fragment is None:
            return []
        new_ids = self.document.paste(fragment, at=self._landing_point(at))
        self.flow_scene.select_nodes(new_ids)
        return new_ids

    def duplicate_selection(self, at: QPointF | None = None) -> list[str]:
        """Copies of the selected nodes (with the edges between them) at `at` (default: the cursor)."""
        node_ids = self.flow_scene.selected_node_ids()
        if not node_ids:
            return []
        fragment = self.document.copy_fragment(node_ids)
        new_ids = self.document.paste(fragment, at=self._landing_point(at), text="Duplicate")
        self.flow_scene.select_nodes(new_ids)
        return new_ids

    def _landing_point(self, at: QPointF | None) -> tuple[float, float]:
        # A second paste at the same spot steps aside, so copies never hide each other.
        point = QPointF(at) if at is not None else self.cursor_scene_point()
        if self._last_paste_at is not None and (point - self._last_paste_at).manhattanLength() < 1:
            self._paste_count += 1
        else:
            self._paste_count = 0
        self._last_paste_at = QPointF(point)
        step = PASTE_STEP * self._paste_count
        x, y = point.x() + step, point.y() + step
        if self.flow_scene.snap_to_grid:
            x, y = round(x / GRID_SIZE) * GRID_SIZE, round(y / GRID_SIZE) * GRID_SIZE
        return (x, y)

    def cursor_scene_point(self) -> QPointF:
        """Where the mouse is on the canvas, or the view centre when it is elsewhere (say, on a menu)."""
        local = self._hover_point
        if local is None or not self.viewport().rect().contains(local):
            local = self.viewport().rect().center()
        return self.mapToScene(local)

    def rename_selected(self) -> bool:
        """F2: edit the title of the one selected node in place."""
        selected = self.flow_scene.selected_node_ids()
        return len(selected) == 1 and self.start_rename(selected[0])

    def start_rename(self, node_id: str) -> bool:
        """Lay the title editor over `node_id`'s header; Enter renames it (one undo step), Esc leaves it."""
        item = self.flow_scene.node_items.get(node_id)
        if item is None:
            return False
        if not self._in_free_area(item):
            self.center_on_node(node_id)
        self.title_editor.start(node_id, item.node.title or item.node_id, self._title_area(item), self.zoom())
        return True

    def _title_area(self, item: NodeItem) -> QRectF:
        return QRectF(self.mapFromScene(item.mapToScene(title_rect())).boundingRect())

    def _follow_title_editor(self) -> None:
        # Zooming or panning while a title is edited keeps the editor on its node.
        node_id = self.title_editor.node_id
        item = self.flow_scene.node_items.get(node_id) if node_id is not None else None
        if item is not None:
            self.title_editor.place(self._title_area(item), self.zoom())

    def _rename_from_editor(self, node_id: str, title: str) -> None:
        if self.document.node(node_id) is not None:  # an undo while typing may have taken the node away
            self.document.rename_node(node_id, title)

    def add_node_where_free(self, type_name: str, near: QPointF | None = None) -> str:
        """Add a node as close to `near` (default: the centre of `free_area`) as it goes without overlapping
        another, inside the free area when there is room there; the view scrolls to it when there is not."""
        # The new node's whole paint area (ports, badges above and labels below) must keep clear of the others.
        height = node_height(len(output_ports(Node(id="new", type=type_name, title="", position=(0, 0),
                                                   config=dict(STARTER_CONFIG.get(type_name, {}))))))
        paint = QRectF(-PORT_RADIUS - 2, -OVERLAY_ABOVE, NODE_WIDTH + 2 * PORT_RADIUS + 4,
                       height + OVERLAY_ABOVE + OVERLAY_BELOW)
        size = (paint.width(), paint.height())
        area = self.mapToScene(self.free_area(QRectF(0, 0, *size)).toRect()).boundingRect()
        centre = near if near is not None else area.center()
        occupied = []
        for item in self.flow_scene.node_items.values():
            box = item.sceneBoundingRect()
            occupied.append((box.x(), box.y(), box.width(), box.height()))
        # The world outside the free area counts as taken, so the search keeps to what the user sees.
        far = 1e7
        walls = [(area.left() - far, area.top() - far, far, 3 * far), (area.right(), area.top() - far, far, 3 * far),
                 (area.left() - far, area.top() - far, 3 * far, far), (area.left() - far, area.bottom(), 3 * far, far)]
        x, y = free_position(occupied + walls, size, (centre.x(), centre.y()), GRID_SIZE)
        if not _clear(occupied + walls, (x, y, *size)):
            x, y = free_position(occupied, size, (centre.x(), centre.y()), GRID_SIZE)
        x, y = x - paint.left(), y - paint.top()
        node_id = self.add_node_at(type_name, QPointF(x + NODE_WIDTH / 2, y + HEADER_HEIGHT / 2))
        added = self.flow_scene.node_items.get(node_id)
        if added is not None:
            self.scroll_into_free_area(added.mapRectToScene(added.node_rect()))
        return node_id

    def open_quick_add(
        self, scene_point: QPointF | None = None, wire: tuple[str, str | None] | None = None
    ) -> QuickAddBox:
        """Open the node search at `scene_point` (default: the cursor); with `wire`, the new node gets connected."""
        point = scene_point if scene_point is not None else self.cursor_scene_point()
        self._quick_add_point = QPointF(point)
        self._pending_wire = wire
        self.quick_add.open_at(self.viewport().mapToGlobal(self.mapFromScene(point)), inputs_only=wire is not None)
        return self.quick_add

    def add_node_at(self, type_name: str, scene_point: QPointF, wire: tuple[str, str | None] | None = None) -> str:
        """Create a node whose header is centred on `scene_point`, wired from `wire` if given, as one step."""
        if wire is not None:
            # A node made from a dragged wire puts its input port where the wire ended.
            offset_y = input_port_offset(node_height(1))[1]
            top_left = (scene_point.x(), scene_point.y() - offset_y)
        else:
            top_left = (scene_point.x() - NODE_WIDTH / 2, scene_point.y() - HEADER_HEIGHT / 2)
        if self.flow_scene.snap_to_grid:
            top_left = (round(top_left[0] / GRID_SIZE) * GRID_SIZE, round(top_left[1] / GRID_SIZE) * GRID_SIZE)
        stack = self.document.undo_stack
        stack.beginMacro(f"Add {type_name}")
        node_id = self.document.add_node(type_name, top_left)
        refusal = None
        if wire is not None:
            refusal = self.document.connect(wire[0], wire[1], node_id)
        else:
            edge = self.flow_scene.edge_at(scene_point, exclude_node=node_id)
            if edge is not None:
                self.document.insert_on_edge(node_id, edge.edge)
        stack.endMacro()
        if refusal:
            self.status.emit(refusal)
        self.flow_scene.select_nodes([node_id])
        return node_id

    def _quick_add_chosen(self, type_name: str) -> None:
        wire, self._pending_wire = self._pending_wire, None
        self.add_node_at(type_name, self._quick_add_point, wire)
        self.setFocus()

    def _quick_add_dismissed(self) -> None:
        self._pending_wire = None
        self.setFocus()

    def _wire_dropped(self, node_id: str, port: str | None, point: QPointF) -> None:
        self.open_quick_add(point, (node_id, port))

    # ----- live mode (drawn by canvas.live.LiveOverlay) ---------------------------------------

    def set_live_counts(self, counts: dict[str, tuple[int, int, str]]) -> None:
        """Per node: (runs running there, runs waiting there, why they wait). Repaints at most once per frame."""
        self.live.set_counts(counts)

    def set_run_path(self, nodes_in_order: list[str], current_node: str | None, waiting_text: str = "",
                     marks: dict[str, tuple[str, str]] | None = None) -> None:
        """Highlight one run: the nodes it passed, the edges between them, and where it is now; `marks` flag
        nodes on it as ("failed", error) or ("timed_out", text)."""
        self.live.set_run_path(nodes_in_order, current_node, waiting_text, marks)

    def set_node_notices(self, notices: dict[str, tuple[str, str]]) -> None:
        """Per node: (short label drawn above it, tooltip line), e.g. a disabled trigger; others lose theirs."""
        for node_id, item in self.flow_scene.node_items.items():
            item.set_notice(*notices.get(node_id, ("", "")))

    def set_quorum_badges(self, badges: dict[str, tuple[str, str]]) -> None:
        """Per approval node: (badge text such as "2 of 3 approved", tooltip line); others lose theirs."""
        for node_id, item in self.flow_scene.node_items.items():
            item.set_quorum(*badges.get(node_id, ("", "")))

    def node_notice(self, node_id: str) -> tuple[str, str]:
        item = self.flow_scene.node_items.get(node_id)
        return item.notice if item is not None else ("", "")

    def clear_live(self) -> None:
        self.live.clear()

    def flush_live(self) -> None:
        """Apply pending live state now (tests and screenshots)."""
        self.live.flush()

    @property
    def live_flushes(self) -> int:
        """How many times live state was applied (at most once per frame however often it is set)."""
        return self.live.flushes

    # ----- events ------------------------------------------------------------------------

    def _emit_selection(self) -> None:
        # Deleting 1,000 selected nodes changes the selection 1,000 times: report it once, next loop turn.
        if not self.flow_scene.bulk_selecting:
            self._selection_timer.start()

    def _flush_selection(self) -> None:
        self._selection_timer.stop()
        selected = self.flow_scene.selected_node_ids()
        if selected != self._last_selection:
            self._last_selection = selected
            self.selection_changed.emit(selected)

    def _on_theme(self, _theme: CanvasTheme) -> None:
        self.resetCachedContent()
        self.minimap.rebuild()
        self.viewport().update()

    def drawBackground(self, painter: QPainter, rect: QRectF | QRect) -> None:
        rect = QRectF(rect)
        theme = current_theme()
        painter.fillRect(rect, theme.background)
        if self.zoom() < GRID_MIN_ZOOM:
            return
        step = GRID_SIZE
        left = int(rect.left() // step) * step
        top = int(rect.top() // step) * step
        minor: list[QPointF] = []
        x = left
        while x < rect.right():
            y = top
            while y < rect.bottom():
                minor.append(QPointF(x, y))
                y += step
            x += step
        painter.setPen(theme.grid_major)
        painter.drawPoints(minor)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_minimap()

    def _place_minimap(self) -> None:
        self.minimap.move(self.width() - self.minimap.width() - CORNER_MARGIN,
                          self.height() - self.minimap.height() - CORNER_MARGIN)
        self.zoom_bar.adjustSize()
        self.zoom_bar.move(CORNER_MARGIN, self.height() - self.zoom_bar.height() - CORNER_MARGIN)

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Leave:
            self._hover_point = None
        return super().viewportEvent(event)

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        super().scrollContentsBy(dx, dy)
        self.minimap.update()
        self._follow_title_editor()

    def wheelEvent(self, event: QWheelEvent) -> None:
        delta = event.angleDelta().y() or event.angleDelta().x()
        if delta:
            self.zoom_by(1.0015**delta, event.position())
        event.accept()

    def event(self, event: QEvent) -> bool:
        # Tab opens quick-add here (node editors use it), so it must not move keyboard focus.
        if event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent) and event.key() in (Qt.Key.Key_Tab,):
            self.keyPressEvent(event)
            return True
        return super().event(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape and self.flow_scene.wiring():
            self.flow_scene.cancel_wire()
            event.accept()
            return
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space_held = True
            self.viewport().setCursor(Qt.CursorShape.OpenHandCursor)
            event.accept()
            return
        if self._keyboard_edit(event):
            event.accept()
            return
        pressed = QKeySequence(event.keyCombination())
        for binding in BINDINGS:
            if any(pressed.matches(key) == QKeySequence.SequenceMatch.ExactMatch for key in binding.sequences()):
                self._handlers[binding.name]()
                event.accept()
                return
        super().keyPressEvent(event)

    def _keyboard_edit(self, event: QKeyEvent) -> bool:
        """Arrows nudge the selection (one grid step, 1 unit with Shift); Enter opens the node; Esc deselects."""
        selected = self.flow_scene.selected_node_ids()
        key = Qt.Key(event.key())
        modifiers = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        if (
            key in NUDGE_KEYS
            and selected
            and modifiers in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.ShiftModifier)
        ):
            step = 1.0 if modifiers == Qt.KeyboardModifier.ShiftModifier else GRID_SIZE
            dx, dy = NUDGE_KEYS[key]
            positions = self.document.positions(selected)
            self.document.move_nodes({i: (x + dx * step, y + dy * step) for i, (x, y) in positions.items()})
            return True
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and len(selected) == 1:
            self.node_activated.emit(selected[0])
            return True
        if key == Qt.Key.Key_Escape and selected:
            self.flow_scene.clearSelection()
            return True
        return False

    def keyReleaseEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Space and not event.isAutoRepeat():
            self._space_held = False
            self.viewport().unsetCursor()
        super().keyReleaseEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.MiddleButton or (
            event.button() == Qt.MouseButton.LeftButton and self._space_held
        ):
            self._panning_from = event.position().toPoint()
            self.viewport().setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return
        event = _shift_as_ctrl(event)
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._panning_from is not None:
            now = event.position().toPoint()
            delta = now - self._panning_from
            self._panning_from = now
            self.horizontalScrollBar().setValue(self.horizontalScrollBar().value() - delta.x())
            self.verticalScrollBar().setValue(self.verticalScrollBar().value() - delta.y())
            event.accept()
            return
        self._hover_point = event.position().toPoint()
        if event.buttons() == Qt.MouseButton.NoButton and not self._space_held:
            self._hover_cursor(self.mapToScene(event.position().toPoint()))
        super().mouseMoveEvent(event)

    def _hover_cursor(self, point: QPointF) -> None:
        # One cursor on the viewport, chosen here, instead of per-item cursors (those cost a hit test per item).
        over_port = self.flow_scene.output_port_at(point) is not None
        if over_port != self._cursor_over_port:
            self._cursor_over_port = over_port
            if over_port:
                self.viewport().setCursor(Qt.CursorShape.CrossCursor)
            else:
                self.viewport().unsetCursor()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._panning_from is not None and event.button() in (
            Qt.MouseButton.MiddleButton,
            Qt.MouseButton.LeftButton,
        ):
            self._panning_from = None
            if self._space_held:
                self.viewport().setCursor(Qt.CursorShape.OpenHandCursor)
            else:
                self.viewport().unsetCursor()
            event.accept()
            return
        super().mouseReleaseEvent(_shift_as_ctrl(event))

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        """On a node's header: rename it in place; elsewhere on a node: open it (`node_activated`)."""
        point = self.mapToScene(event.position().toPoint())
        node = self.flow_scene.node_at(point)
        if node is not None:
            if node.mapFromScene(point).y() <= HEADER_HEIGHT:
                self.start_rename(node.node_id)
            else:
                self.node_activated.emit(node.node_id)
            event.accept()
            return
        super().mouseDoubleClickEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        """A node's menu (cut, copy, duplicate here, rename, delete, fit) or the empty canvas's (paste here,
        add node, fit, auto-layout); it acts where the click was."""
        point = self.mapToScene(event.pos())
        node = self.flow_scene.node_at(point)
        menu = QMenu(self)
        menu.setObjectName("canvasMenu")
        if node is None:
            paste = self._menu_entry(menu, "paste", lambda: self.paste(point), "Paste here")
            paste.setEnabled(self.clipboard_fragment() is not None)
            self._menu_entry(menu, "quick_add", lambda: self.open_quick_add(point))
            menu.addSeparator()
            self._menu_entry(menu, "fit", self.fit_selection_or_all, "Fit")
            self._menu_entry(menu, "auto_layout", self.document.auto_layout)
        else:
            if not node.isSelected():
                self.flow_scene.select_nodes([node.node_id])
            self._menu_entry(menu, "cut", self.cut_selection)
            self._menu_entry(menu, "copy", self.copy_selection)
            self._menu_entry(menu, "duplicate", lambda: self.duplicate_selection(point), "Duplicate here")
            self._menu_entry(menu, "rename", lambda: self.start_rename(node.node_id), "Rename…")
            self._menu_entry(menu, "delete", self.delete_selection)
            menu.addSeparator()
            self._menu_entry(menu, "fit", self.fit_selection_or_all, "Fit selection")
            if self.node_menu_hook is not None:
                self.node_menu_hook(menu, node.node_id)
        if self.context_menu is not None:
            self.context_menu.deleteLater()
        self.context_menu = menu
        menu.popup(event.globalPos())
        event.accept()

    def _menu_entry(self, menu: QMenu, name: str, handler: Callable[[], object], text: str = "") -> QAction:
        # The key shows after a tab, as on any menu entry, without binding it a second time.
        action = self.actions_by_name[name]
        keys = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        label = text or action.text()
        entry = menu.addAction(f"{label}\t{keys}" if keys else label)
        entry.setObjectName(f"menu_{name}")
        entry.setToolTip(action.toolTip())
        entry.triggered.connect(lambda _checked=False: handler())
        return entry

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasFormat(NODE_TYPE_MIME):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if event.mimeData().hasFormat(NODE_TYPE_MIME):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        data = event.mimeData()
        if not data.hasFormat(NODE_TYPE_MIME):
            super().dropEvent(event)
            return
        type_name = bytes(data.data(NODE_TYPE_MIME).data()).decode("utf-8")
        self._hover_point = event.position().toPoint()
        self.add_node_at(type_name, self.mapToScene(event.position().toPoint()))
        event.acceptProposedAction()
        self.setFocus()

    def node_item(self, node_id: str) -> NodeItem | None:
        return self.flow_scene.node_items.get(node_id)


def _clear(occupied: list[tuple[float, float, float, float]], box: tuple[float, float, float, float]) -> bool:
    """Whether `box` keeps FREE_GAP from every box of `occupied` (as `free_position` requires)."""
    x, y, width, height = box
    return all(x + width + FREE_GAP <= ox or ox + ow + FREE_GAP <= x or y + height + FREE_GAP <= oy
               or oy + oh + FREE_GAP <= y for ox, oy, ow, oh in occupied)


def _shift_as_ctrl(event: QMouseEvent) -> QMouseEvent:
    """Shift-click adds to the selection as in most editors; Qt's scene does that for Ctrl."""
    if not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
        return event
    modifiers = (event.modifiers() & ~Qt.KeyboardModifier.ShiftModifier) | Qt.KeyboardModifier.ControlModifier
    return QMouseEvent(
        event.type(), event.position(), event.globalPosition(), event.button(), event.buttons(), modifiers
    )
