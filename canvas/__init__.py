"""The Lockgate canvas: a node-graph editor over the engine's flow model.

Public API (the app embeds these):

- `canvas.document.FlowDocument(QObject)` — observable document over an
  `engine.flow.Flow`. Signals: `node_added(str)`, `node_removed(str)`,
  `node_changed(str)`, `nodes_moved(list)`, `edge_added(Edge)`,
  `edge_removed(Edge)`, `flow_changed()`, `diagnostics_changed(list[Diagnostic])`
  (validation debounced 150 ms), `dirty_changed(bool)`, `path_changed(Path)`.
  `undo_stack`, `flow()`, `path`, `is_dirty()`, `diagnostics()`,
  `validate_now()`, `open(path)` (classmethod), `save(path=None)`,
  `from_flow(flow)`; edits, each one undo step: `add_node(type, pos) -> id`,
  `delete_nodes(ids)`, `move_nodes({id: (x, y)})`, `connect(src, port, dst)
  -> refusal | None`, `connection_refusal(...)`, `disconnect(edge)`,
  `rename_node(id, title)`, `set_config_field(id, key, value|None)`,
  `set_node_field(id, "retry"|"continue_on_fail"|"idempotent", value)`,
  `copy_fragment(ids)`, `paste(fragment, at=None) -> ids`, `duplicate(ids)`,
  `insert_on_edge(id, edge)`, `auto_layout()`; the flow's own properties
  (signal `header_changed()`, `header()`, `id_follows_name`, `history_id`):
  `rename_flow(name, taken)`, `set_flow_id(id)`, `set_description(text)`,
  `set_enabled(bool)`, `set_setting(key, value|None)`, `add_input(name, spec)`,
  `remove_input(name)`, `rename_input(old, new)`, `move_input(name, offset)`,
  `set_input(name, spec)`; `extra_checks` (diagnostics needing outside
  knowledge, run after the validator).
- `canvas.flow_header` — `FlowHeader` (the flow less its nodes and edges),
  `slug(name)`, `unique_id`, `flow_id_problem`, `input_name_problem`, `input_spec`.
- `canvas.commands` — the QUndoCommands behind those edits.
- `canvas.scene.FlowScene`, `canvas.items` (NodeItem, PortItem, EdgeItem,
  WireItem) and `canvas.view.FlowView(document)`: signals
  `selection_changed(list[str])`, `node_activated(str)` (Enter, or a double-click on a node's body),
  `status(str)` (hints such as why a connection is refused), `zoom_changed(float)`; methods
  `select_node(id)`, `center_on_node(id)`, `fit_selection_or_all()`,
  `set_zoom(level)`, `set_snap_to_grid(bool)`, `open_quick_add()`,
  `add_node_at(type, scene_point)`, `add_node_where_free(type)`, `paste(at=None)`,
  `duplicate_selection(at=None)`, `cut_selection()`, `start_rename(id)`, `set_minimap_shown(bool)`,
  `run_command(name)` (a `BINDINGS` command, for window menus), `actions_by_name` (QActions for menus);
  live mode: `set_live_counts({id: (running, waiting, reason)})`,
  `set_run_path(nodes_in_order, current_node, waiting_text)`, `clear_live()`;
  notices (e.g. a disabled trigger): `set_node_notices({id: (label, tooltip)})`, `node_notice(id)`.
- `canvas.bindings.BINDINGS` — the hotkey table (also importable from
  `canvas.view`); `canvas.live.LiveOverlay` draws the live-mode state.
- `canvas.palette.NodePalette(QWidget)` — signal `activated(type_name)`;
  drags carry `application/x-lockgate-node-type`.
- `canvas.editor.FlowEditor(document)` — `.view`, `.document`.
- `canvas.theme` — `apply_theme(app, "light"|"dark"|"system")`,
  `current_theme()`, `theme_notifier().changed`.
- `python -m canvas [FILE]` shows the canvas in a plain window.
"""
