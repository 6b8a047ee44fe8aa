"""The document and its commands, without a view: every edit undoes and redoes exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from canvas.document import FlowDocument, empty_flow
from engine.flow import FlowLoadError, dump_flow, load_flow
from engine.validation import Diagnostic

from .conftest import TRIAGE, node_of


def _undo_all_redo_all(document: FlowDocument, original: str) -> None:
    edited = document.text()
    steps = document.undo_stack.index()
    for _ in range(steps):
        document.undo_stack.undo()
    assert document.text() == original
    for _ in range(steps):
        document.undo_stack.redo()
    assert document.text() == edited


EDITS = {
    "add": lambda d: d.add_node("queue", (300, 400)),
    "delete with edges": lambda d: d.delete_nodes(["route"]),
    "move many": lambda d: d.move_nodes({"hook": (5, 5), "done": (1500, 300), "note": (1100, 260)}),
    "connect": lambda d: d.connect("refund", None, "note"),
    "disconnect": lambda d: d.disconnect(d.flow_ref().edges[4]),
    "rename": lambda d: d.rename_node("classify", "Classify ticket"),
    "change config": lambda d: d.set_config_field("followup", "delay", "2h"),
    "remove config key": lambda d: d.set_config_field("classify", "pool_wait", None),
    "retry": lambda d: d.set_node_field("refund", "retry", {"max_attempts": 5, "backoff": "linear"}),
    "continue_on_fail": lambda d: d.set_node_field("refund", "continue_on_fail", True),
    "idempotent": lambda d: d.set_node_field("refund", "idempotent", False),
    "paste": lambda d: d.paste(d.copy_fragment(["approve", "refund"]), at=(0, 500)),
    "duplicate": lambda d: d.duplicate(["followup", "note"]),
    "insert on edge": lambda d: (d.add_node("set", (500, 500)), d.insert_on_edge("set", d.flow_ref().edges[0])),
    "auto-layout": lambda d: d.auto_layout(),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_each_command_undoes_and_redoes_exactly(triage: FlowDocument, name: str) -> None:
    original = triage.text()
    EDITS[name](triage)
    assert triage.text() != original, f"{name} changed nothing"
    _undo_all_redo_all(triage, original)


def test_delete_node_takes_its_edges_in_one_step(triage: FlowDocument) -> None:
    triage.delete_nodes(["route"])
    flow = triage.flow()
    assert flow.node("route") is None
    assert all("route" not in (e.from_, e.to) for e in flow.edges)
    assert len(flow.edges) == 7
    assert triage.undo_stack.count() == 1
    triage.undo_stack.undo()
    assert triage.text() == TRIAGE.read_text(encoding="utf-8")


def test_flow_snapshot_does_not_follow_later_edits(triage: FlowDocument) -> None:
    before = triage.flow()
    triage.add_node("queue", (0, 0))
    triage.move_nodes({"hook": (50, 50)})
    assert len(before.nodes) == 10
    assert node_of(before, "hook").position == (0, 120)


@pytest.mark.parametrize(
    ("source", "port", "target", "reason"),
    [
        ("classify", None, "hook", "is a trigger and takes no input"),
        ("classify", None, "classify", "cannot connect to itself"),
        ("note", None, "reserve", "would close a cycle"),
        ("approve", "approved", "refund", "already connected"),
        ("refund", None, "done", "already connected"),
        ("done", None, "note", "has no output"),
        ("approve", "maybe", "note", 'has no output "maybe"'),
        ("approve", None, "note", "several outputs"),
    ],
)
def test_refused_connections_say_why(
    triage: FlowDocument, source: str, port: str | None, target: str, reason: str
) -> None:
    before = triage.text()
    refusal = triage.connect(source, port, target)
    assert refusal is not None and reason in refusal
    assert triage.text() == before
    assert triage.undo_stack.count() == 0


def test_connect_stores_port_only_for_multi_output_nodes(triage: FlowDocument) -> None:
    assert triage.connect("refund", "out", "note") is None
    assert triage.connect("approve", "rejected", "note") is None
    edges = triage.flow().edges[-2:]
    assert (edges[0].port, edges[1].port) == (None, "rejected")


def test_save_and_open_round_trip_is_byte_stable(triage: FlowDocument, tmp_path: Path) -> None:
    target = tmp_path / "copy.flow.json"
    triage.save(target)
    assert target.read_bytes() == TRIAGE.read_bytes()
    assert not triage.is_dirty()
    reopened = FlowDocument.open(target)
    reopened.move_nodes({"hook": (10, 130)})
    assert reopened.is_dirty()
    reopened.save()
    assert node_of(load_flow(target), "hook").position == (10, 130)
    reopened.undo_stack.undo()
    reopened.save()
    assert target.read_bytes() == TRIAGE.read_bytes()


def test_dirty_and_path_signals(qapp: QApplication, triage: FlowDocument, tmp_path: Path) -> None:
    dirty: list[bool] = []
    paths: list[object] = []
    triage.dirty_changed.connect(dirty.append)
    triage.path_changed.connect(paths.append)
    triage.rename_node("hook", "Incoming ticket")
    triage.save(tmp_path / "renamed.flow.json")
    triage.undo_stack.undo()
    assert dirty == [True, False, True]
    assert paths == [tmp_path / "renamed.flow.json"]


def test_a_flow_with_problems_opens_and_shows_them(qapp: QApplication, tmp_path: Path) -> None:
    data = json.loads(TRIAGE.read_text())
    data["nodes"][6]["config"]["delay"] = "80h"
    data["nodes"][2]["config"]["temprature"] = 0.2
    data["edges"].append({"from": "done", "to": "hook"})
    path = tmp_path / "broken.flow.json"
    path.write_text(json.dumps(data))
    document = FlowDocument.open(path)
    codes = {(d.code, d.node) for d in document.diagnostics()}
    assert ("delay_too_long", "followup") in codes
    assert ("unknown_config_key", "classify") in codes
    assert any(code == "edge_unknown_port" for code, _ in codes)


def test_a_file_that_is_not_a_flow_raises(qapp: QApplication, tmp_path: Path) -> None:
    path = tmp_path / "notes.flow.json"
    path.write_text('{"hello": "world"}')
    with pytest.raises(FlowLoadError, match="format"):
        FlowDocument.open(path)


def test_save_without_a_path_names_the_fix(qapp: QApplication) -> None:
    with pytest.raises(ValueError, match="pass a path"):
        FlowDocument.from_flow(empty_flow()).save()


def test_paste_gives_fresh_ids_and_keeps_inner_edges_only(triage: FlowDocument) -> None:
    fragment = triage.copy_fragment(["reserve", "classify", "route"])
    assert [e["to"] for e in fragment["edges"]] == ["classify", "route"]
    first = triage.paste(fragment)
    second = triage.paste(fragment)
    flow = triage.flow()
    ids = [n.id for n in flow.nodes]
    assert len(ids) == len(set(ids)) == 16
    assert first == ["reserve_2", "classify_2", "route_2"]
    assert second == ["reserve_3", "classify_3", "route_3"]
    new_edges = [(e.from_, e.to) for e in flow.edges[10:]]
    assert new_edges == [
        ("reserve_2", "classify_2"),
        ("classify_2", "route_2"),
        ("reserve_3", "classify_3"),
        ("classify_3", "route_3"),
    ]
    # A pasted reserve points at its own pasted model, not the original.
    assert node_of(flow, "reserve_2").config["for"] == "classify_2"
    assert node_of(flow, "classify_2").position == (480, 160)


def test_duplicate_is_one_undo_step(triage: FlowDocument) -> None:
    new = triage.duplicate(["approve", "refund", "declined"])
    assert new == ["approve_2", "refund_2", "declined_2"]
    assert triage.undo_stack.count() == 1
    edges = [(e.from_, e.port, e.to) for e in triage.flow().edges[10:]]
    assert edges == [("approve_2", "approved", "refund_2"), ("approve_2", "rejected", "declined_2")]


def test_insert_on_edge_splices_the_node(triage: FlowDocument) -> None:
    node_id = triage.add_node("queue", (300, 300))
    edge = next(e for e in triage.flow_ref().edges if e.from_ == "route" and e.to == "followup")
    assert triage.insert_on_edge(node_id, edge)
    routes = {(e.from_, e.port, e.to) for e in triage.flow().edges}
    assert ("route", "default", node_id) in routes
    assert (node_id, None, "followup") in routes
    assert ("route", "default", "followup") not in routes
    assert triage.undo_stack.count() == 2


def test_insert_refuses_triggers(triage: FlowDocument) -> None:
    node_id = triage.add_node("trigger.manual", (300, 300))
    assert not triage.insert_on_edge(node_id, triage.flow_ref().edges[1])
    assert triage.undo_stack.count() == 1


def test_an_insert_refused_midway_leaves_nothing_to_redo(triage: FlowDocument) -> None:
    before = triage.text()
    hook_to_reserve = triage.flow_ref().edges[0]
    assert not triage.insert_on_edge("classify", hook_to_reserve)  # classify → reserve would close a cycle
    assert triage.text() == before
    assert (triage.undo_stack.count(), triage.undo_stack.canRedo()) == (0, False)
    triage.undo_stack.redo()
    assert triage.text() == before


def test_auto_layout_orders_columns_by_generation_and_undoes(triage: FlowDocument) -> None:
    original = triage.text()
    triage.auto_layout()
    flow = triage.flow()
    x = {n.id: n.position[0] for n in flow.nodes}
    assert x["hook"] < x["reserve"] < x["classify"] < x["route"] < x["approve"] < x["refund"] < x["done"]
    assert x["approve"] == x["followup"]
    assert triage.undo_stack.count() == 1
    triage.undo_stack.undo()
    assert triage.text() == original


def test_diagnostics_are_debounced_and_follow_fixes(qtbot: QtBot, triage: FlowDocument) -> None:
    assert triage.diagnostics() == []
    with qtbot.waitSignal(triage.diagnostics_changed, timeout=10_000) as blocker:
        triage.set_config_field("followup", "delay", "80h")
        triage.set_config_field("followup", "delay", "90h")
    assert [(d.code, d.node) for d in blocker.args[0]] == [("delay_too_long", "followup")]
    with qtbot.waitSignal(triage.diagnostics_changed, timeout=10_000) as blocker:
        triage.set_config_field("followup", "delay", "2h")
    assert blocker.args[0] == []


def test_add_node_starts_with_usable_config(qapp: QApplication) -> None:
    document = FlowDocument()
    trigger = document.add_node("trigger.manual", (0, 0))
    queue = document.add_node("queue", (220, 0))
    end = document.add_node("terminal", (440, 0))
    assert document.connect(trigger, None, queue) is None
    assert document.connect(queue, None, end) is None
    assert document.validate_now() == []
    assert dump_flow(document.flow()).count('"delay": "1h"') == 1


def test_moves_do_not_revalidate_and_superseded_results_are_dropped(qtbot: QtBot, triage: FlowDocument) -> None:
    triage.validate_now()
    seen: list[list[Diagnostic]] = []
    triage.diagnostics_changed.connect(seen.append)
    triage.move_nodes({"hook": (0, 300)})
    assert triage.diagnostics() == [] and seen == []  # nothing stale to validate: the move changed no content
    triage.set_config_field("followup", "delay", "80h")
    qtbot.waitUntil(lambda: len(seen) == 1, timeout=10_000)
    assert [d.code for d in seen[-1]] == ["delay_too_long"]
    for hours in range(1, 30):  # one burst, no event handled in between: one validation after it
        triage.set_config_field("followup", "delay", f"{hours}h")
    assert len(seen) == 1  # nothing validated synchronously
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=10_000)
    assert seen[-1] == []
    assert triage.diagnostics() == [] and len(seen) == 2  # already up to date: no later result is coming


def test_an_edge_to_a_missing_node_appears_once_the_node_exists(qapp: QApplication, tmp_path: Path) -> None:
    from canvas.scene import FlowScene

    data = json.loads(TRIAGE.read_text())
    data["edges"].append({"from": "done", "to": "ghost"})
    data["edges"].append({"from": "note", "to": "ghost"})
    path = tmp_path / "ghost.flow.json"
    path.write_text(json.dumps(data))
    document = FlowDocument.open(path)
    scene = FlowScene(document)
    assert any(d.code == "edge_unknown_node" for d in document.diagnostics())
    assert len(scene.edge_items) == 10
    fragment = document.copy_fragment(["followup"])
    fragment["nodes"][0]["id"] = "ghost"
    assert document.paste(fragment) == ["ghost"]
    assert len(scene.edge_items) == 12
    document.undo_stack.undo()
    assert len(scene.edge_items) == 10


def test_node_field_edits_touch_only_that_field(triage: FlowDocument) -> None:
    triage.set_node_field("refund", "retry", {"max_attempts": 2})
    triage.set_node_field("refund", "continue_on_fail", True)
    saved = json.loads(triage.text())
    refund = next(n for n in saved["nodes"] if n["id"] == "refund")
    assert refund["retry"] == {"max_attempts": 2}
    assert refund["continue_on_fail"] is True
    with pytest.raises(ValueError):
        triage.set_node_field("refund", "retry", {"max_attempts": 0})
    with pytest.raises(ValueError, match="not editable here"):
        triage.set_node_field("refund", "title", "x")
    assert triage.undo_stack.count() == 2


def test_config_values_are_copied_so_callers_cannot_edit_behind_the_stack(triage: FlowDocument) -> None:
    branches = [{"port": "refund", "when": "{{ state.label == 'refund' }}"}, {"port": "bug", "when": "{{ true }}"}]
    triage.set_config_field("route", "branches", branches)
    branches.append({"port": "sneaky", "when": "{{ true }}"})
    assert [b["port"] for b in node_of(triage, "route").config["branches"]] == ["refund", "bug"]


def test_flow_properties_are_undoable_steps_that_save_byte_stably(triage: FlowDocument, triage_path: Path) -> None:
    from canvas.flow_header import input_spec

    original = triage.text()
    seen: list[str] = []
    triage.header_changed.connect(lambda: seen.append(triage.flow_ref().id))
    triage.rename_flow("Refunds")
    assert triage.flow_ref().id == "ticket-triage"  # an opened flow keeps its id on rename
    with pytest.raises(ValueError, match="not a flow id"):
        triage.set_flow_id("Refunds!")
    triage.set_flow_id("refunds")
    triage.set_description("Refunds, asked first")
    triage.set_enabled(False)
    triage.set_setting("max_wait", "48h")
    triage.add_input("amount", input_spec("number", True, False, "USD", 10, True))
    triage.move_input("amount", -2)
    assert list(triage.flow_ref().inputs) == ["amount", "ticket", "crm_token"]
    triage.rename_input("amount", "refund_usd")
    with pytest.raises(ValueError, match="exists already"):
        triage.rename_input("refund_usd", "ticket")
    triage.remove_input("crm_token")
    assert triage.undo_stack.count() == 9 and seen[-1] == "refunds"
    data = json.loads(triage.text())
    assert data["inputs"]["refund_usd"] == {"type": "number", "required": True, "description": "USD", "default": 10}
    assert list(data)[:6] == ["format", "id", "name", "description", "enabled", "inputs"]
    triage.save()
    assert FlowDocument.open(triage_path).text() == triage.text()
    _undo_all_redo_all(triage, original)


def test_a_new_flows_id_follows_its_name_until_set(qapp: QApplication) -> None:
    document = FlowDocument.from_flow(empty_flow())
    document.id_follows_name = True
    document.rename_flow("Refund approvals!", taken={"refund-approvals"})
    assert document.flow_ref().id == "refund-approvals-2"
    document.set_flow_id("refunds")
    document.rename_flow("Something else")
    assert document.flow_ref().id == "refunds" and not document.id_follows_name
    document.undo_stack.undo()
    document.undo_stack.undo()
    assert document.flow_ref().id == "refund-approvals-2" and document.id_follows_name
