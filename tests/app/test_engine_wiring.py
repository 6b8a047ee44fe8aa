"""The window on the real embedded engine (machine Redis, SQLite file): publish, run, runs panel, live mode,
budgets, and a parked run that survives quitting the app."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QTableWidget

from app.engine_process import SIMULATOR_HOST, is_our_simulator
from app.examples import example_bytes
from app.provider_file import SIMULATOR_MANAGER
from app.settings import BudgetSetting
from app.window import MainWindow
from canvas.document import FlowDocument
from canvas.editor import FlowEditor
from engine.flow import load_flow_text
from engine.providers.registry import providers_in
from engine.runtime.queries import get_run
from engine.store.db import make_engine
from tests.app.approval_flows import approval_flow
from tests.app.cells import cell


def status_of(window: MainWindow) -> str:
    return window.statusBar().currentMessage()


def queue_flow(delay: str) -> FlowDocument:
    flow = load_flow_text(example_bytes("hello.flow.json")).model_copy(update={"id": "wait-then-greet"})
    document = FlowDocument.from_flow(flow)
    document.add_node("queue", (240, 120))
    queue_id = next(n.id for n in document.flow_ref().nodes if n.type == "queue")
    document.set_config_field(queue_id, "delay", delay)
    start_edge = next(e for e in document.flow_ref().edges if e.from_ == "start")
    document.disconnect(start_edge)
    document.connect("start", None, queue_id)
    document.connect(queue_id, "default", "greet")
    return document


def test_publish_then_run_with_inputs(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    window.open_example("hello.flow.json")
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "hello v1 published", timeout=10_000)
    assert window.engine is not None
    window.actions_by_id["versions"].trigger()
    qtbot.waitUntil(lambda: window.engine is not None and window.engine.versions_dialog is not None, timeout=20_000)
    dialog = window.engine.versions_dialog
    assert dialog is not None
    versions = dialog.findChild(QTableWidget, "versionsTable")
    assert versions is not None and cell(versions, 0, 0).text() == "v1"
    asked: list[list[str]] = []

    def answer(flow):
        asked.append(list(flow.inputs))
        return {"name": "Ada"}

    window.ask_run_inputs = answer
    window.run_flow()  # the draft is v1 as published: straight to the inputs
    qtbot.waitUntil(lambda: asked == [["name"]], timeout=10_000)
    qtbot.waitUntil(lambda: any(r.status == "succeeded" for r in window.runs.rows.values()), timeout=15_000)
    row = next(iter(window.runs.rows.values()))
    assert (row.flow_id, row.version) == ("hello", 1)
    assert window.runs.cell_text(0, 0) == "● succeeded"
    # Budgets from Settings are in the engine's ledger and on the Holds & budgets panel.
    qtbot.waitUntil(lambda: [b.name for b in window.holds.budgets] == ["default"], timeout=10_000)
    assert window.holds.budgets[0].limit_usd == 10.0
    applied: list[object] = []
    assert window.bridge is not None and window.engine is not None
    window.bridge.apply_budgets([BudgetSetting("ops", 5.0, "day")], lambda count, error: applied.append(error or count))
    qtbot.waitUntil(lambda: applied == [1], timeout=20_000)
    window.engine.refresh_money()
    qtbot.waitUntil(lambda: [b.name for b in window.holds.budgets] == ["default", "ops"], timeout=20_000)
    # The demo's `local` provider (no providers.json in the data folder) has its simulator running, and
    # providers.json says where (8765 when that was free or already ours, else a free port).
    simulator = window.bridge.simulator
    assert simulator is not None and simulator.url
    port = int(simulator.url.rsplit(":", 1)[1].split("/")[0])
    assert is_our_simulator(SIMULATOR_HOST, port)
    local = next(p for p in providers_in(window.bridge.config.data_dir) if p.name == "local")
    assert local.connections[0].base_url == simulator.url and local.managed_by == SIMULATOR_MANAGER


def test_publish_refused_by_the_engine_lists_problems(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    document = window.open_example("ticket-triage.flow.json")
    # A queue between the reserve and its model: publish must refuse and mark the node.
    document.disconnect(next(e for e in document.flow_ref().edges if e.from_ == "reserve"))
    document.connect("reserve", None, "followup")
    document.disconnect(next(e for e in document.flow_ref().edges if e.from_ == "followup"))
    document.connect("followup", "default", "classify")
    window.publish()
    assert status_of(window).startswith("Publish refused")
    codes = {d.code: d.node for d in window.problems.diagnostics}
    assert "park_inside_finance_chain" in codes
    editor = window.tabs.current_editor()
    assert editor is not None
    badge = editor.view.node_item(codes["park_inside_finance_chain"] or "followup")
    assert badge is not None


def test_run_of_an_unpublished_draft_offers_publish_and_run(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    window.add_document(queue_flow("1h"))
    asked: list[int | None] = []
    answers = ["cancel", "publish_and_run"]

    def answer(_document: FlowDocument, version: int | None) -> str:
        asked.append(version)
        return answers.pop(0)

    window.ask_publish_before_run = answer
    inputs_asked: list[str] = []
    window.ask_run_inputs = lambda flow: inputs_asked.append(flow.id) or {"name": "Ada"}
    window.run_flow()
    qtbot.waitUntil(lambda: status_of(window).startswith("Not run: wait-then-greet"), timeout=10_000)
    assert asked == [None] and inputs_asked == []
    window.run_flow()
    qtbot.waitUntil(lambda: status_of(window).startswith("Run ") and "of wait-then-greet v1 started" in
                    status_of(window), timeout=10_000)
    assert asked == [None, None] and inputs_asked == ["wait-then-greet"]
    assert window.published_ids == frozenset({"wait-then-greet"})


def test_live_mode_shows_a_parked_run_that_survives_a_restart(
        qtbot, open_engine_window: Callable[..., MainWindow]) -> None:
    window = open_engine_window()
    bridge = window.bridge
    assert bridge is not None
    document = queue_flow("3s")
    window.add_document(document)
    queue_id = next(n.id for n in document.flow_ref().nodes if n.type == "queue")
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "wait-then-greet v1 published", timeout=10_000)
    window.actions_by_id["live"].trigger()
    assert window.engine is not None and window.engine.live_on
    window.ask_run_inputs = lambda _flow: {"name": "Ada"}
    window.run_flow()
    editor = window.tabs.current_editor()
    assert editor is not None

    def parked_on_queue() -> bool:
        editor.view.flush_live()
        item = editor.view.node_item(queue_id)
        return item is not None and item.live.waiting == 1

    qtbot.waitUntil(parked_on_queue, timeout=15_000)
    item = editor.view.node_item(queue_id)
    assert item is not None and item.live.waiting_text.startswith("delay")
    run_id = next(iter(window.engine.live.runs))
    window.engine.select_run(run_id)
    def current_shown() -> bool:
        editor.view.flush_live()
        return item.live.current

    qtbot.waitUntil(current_shown, timeout=20_000)

    # Quit the engine while the run is parked; it stays parked in the store.
    bridge.stop()
    assert not bridge.engine_thread.running
    window.close()
    sql = make_engine(bridge.config.sql_url)
    stored = get_run(sql, run_id)
    sql.dispose()
    assert stored is not None and stored["status"] == "waiting"
    assert stored["waiting_on"]["node"] == queue_id

    again = open_engine_window(show=False, starts=2)
    second = again.bridge
    assert second is not None
    qtbot.waitUntil(lambda: run_id in again.runs.rows, timeout=10_000)
    qtbot.waitUntil(lambda: again.runs.rows[run_id].status == "succeeded", timeout=15_000)
    second.stop()
    sql = make_engine(second.config.sql_url)
    finished = get_run(sql, run_id)
    sql.dispose()
    assert finished is not None
    assert [step["node"] for step in finished["steps"]].count("greet") == 1


def test_open_a_parked_run_and_cancel_it(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    window.add_document(queue_flow("1h"))
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "wait-then-greet v1 published", timeout=10_000)
    window.ask_run_inputs = lambda _flow: {"name": "Ada"}
    window.run_flow()
    qtbot.waitUntil(lambda: any(r.status == "waiting" for r in window.runs.rows.values()), timeout=15_000)
    run_id = next(iter(window.runs.rows))
    assert window.runs.rows[run_id].where(window.runs.now()).startswith("queue")
    assert window.engine is not None
    window.engine.open_run(run_id)
    qtbot.waitUntil(lambda: window.engine.details is not None and window.engine.details.run is not None,
                    timeout=20_000)
    details = window.engine.details
    assert details is not None
    nodes = [cell(details.steps, r, 0).text() for r in range(details.steps.rowCount())]
    assert nodes[0] == "start"
    assert "waiting" in details.header.text()
    # The timeline: the queue step is a park, labelled by its reason.
    bars = {bar.node: bar for bar in details.timeline.bars}
    assert bars["start"].park_reason is None
    queue_id = next(node for node in nodes if node.startswith("queue"))
    assert bars[queue_id].park_reason == "queue_delay"
    assert not details.timeline.grab().isNull()
    assert details.cancel_button.isEnabled()
    details.cancel_button.click()
    qtbot.waitUntil(lambda: window.runs.rows[run_id].status == "cancelled", timeout=15_000)
    qtbot.waitUntil(lambda: not details.cancel_button.isEnabled(), timeout=20_000)


APPROVAL_FLOW = approval_flow("refund-ok", "Refund OK?",
                              {"timeout": "1h", "message": "Refund ticket {{ inputs.ticket }}?"},
                              inputs={"ticket": {"type": "string", "required": True}})


def test_approve_in_the_panel_and_decisions_made_elsewhere_disappear(qtbot,
                                                                    engine_window: MainWindow) -> None:
    from engine.flow import flow_from_data

    window = engine_window
    window.add_document(FlowDocument.from_flow(flow_from_data(APPROVAL_FLOW)))
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "refund-ok v1 published", timeout=10_000)
    window.ask_run_inputs = lambda _flow: {"ticket": "T-1"}
    window.run_flow()
    window.run_flow()
    qtbot.waitUntil(lambda: len(window.approvals.approvals) == 2, timeout=15_000)
    first, second = window.approvals.approvals
    assert first.message == "Refund ticket T-1?" and first.node == "ask"
    assert window.approvals.table.item(0, 5) is not None

    window.approvals.table.selectRow(0)
    window.approvals.comment.setText("fine")
    window.approvals.approve_button.click()
    qtbot.waitUntil(lambda: window.runs.rows.get(first.run_id) is not None
                    and window.runs.rows[first.run_id].status == "succeeded", timeout=15_000)
    qtbot.waitUntil(lambda: [a.approval_id for a in window.approvals.approvals] == [second.approval_id],
                    timeout=20_000)

    # Decided elsewhere (here: straight through the engine's API): gone from the panel at once.
    from engine.approvals.decide import decide

    services = window.bridge.services if window.bridge is not None else None
    assert services is not None
    result = decide(services.handles, second.approval_id, "reject", "someone-else")
    assert result.accepted
    qtbot.waitUntil(lambda: window.approvals.approvals == [], timeout=20_000)
    qtbot.waitUntil(lambda: window.runs.rows[second.run_id].status == "succeeded", timeout=15_000)
    assert window.runs.rows[second.run_id].current_node in (None, "declined")


def test_a_run_of_an_older_version_is_drawn_on_its_own_graph(qtbot, engine_window: MainWindow) -> None:
    window = engine_window
    document = queue_flow("1h")
    window.add_document(document)
    queue_id = next(n.id for n in document.flow_ref().nodes if n.type == "queue")
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "wait-then-greet v1 published", timeout=10_000)
    window.actions_by_id["live"].trigger()
    window.ask_run_inputs = lambda _flow: {"name": "Ada"}
    window.run_flow()
    qtbot.waitUntil(lambda: any(r.status == "waiting" for r in window.runs.rows.values()), timeout=15_000)
    run_id = next(iter(window.runs.rows))
    assert window.engine is not None

    # Same draft as v1: the run is drawn on the open draft.
    window.engine.select_run(run_id)
    draft_editor = window.tabs.current_editor()
    assert draft_editor is not None

    def path_on(editor: FlowEditor) -> bool:
        editor.view.flush_live()
        item = editor.view.node_item(queue_id)
        return item is not None and item.live.current

    qtbot.waitUntil(lambda: path_on(draft_editor), timeout=20_000)
    assert window.tabs.count() == 1

    # The draft changes: the v1 run now opens on v1's own graph, and a new run says the changes are not in it.
    document.rename_node("greet", "Greet warmly")
    asked: list[int | None] = []
    window.ask_publish_before_run = lambda _document, version: asked.append(version) or "run_published"
    window.run_flow()
    qtbot.waitUntil(lambda: "not published" in status_of(window), timeout=10_000)
    assert asked == [1]
    window.engine.select_run(run_id)
    qtbot.waitUntil(lambda: window.tabs.count() == 2, timeout=20_000)
    assert window.tabs.currentIndex() == 1
    assert window.tabs.tabText(1) == "wait-then-greet v1 (published)"
    version_editor = window.tabs.editor_at(1)
    greet = version_editor.document.node("greet")
    assert greet is not None and greet.title == "Greet"
    qtbot.waitUntil(lambda: path_on(version_editor), timeout=20_000)


def test_approval_keys_are_made_in_the_engine_and_shown_once(qtbot, engine_window: MainWindow) -> None:
    from app.settings import SecretStore, approval_key_secret_name, mask_secret
    from app.settings_dialog import SettingsDialog
    from engine.approvals.keys import ALL_SCOPES, check_key

    window = engine_window
    store = SecretStore(window.settings.data_dir, use_keyring=False)
    dialog = SettingsDialog(window.settings, store=store, bridge=window.bridge)
    qtbot.addWidget(dialog)
    dialog.key_created.disconnect(dialog._show_new_key)  # no modal box in the test; the signal is the "once"
    assert all(button.isEnabled() for button in dialog.key_buttons)
    with qtbot.waitSignal(dialog.key_created, timeout=20_000) as created:
        dialog.create_approval_key("ops-bot")
    name, key, scopes = created.args
    assert (name, scopes) == ("ops-bot", list(ALL_SCOPES))
    qtbot.waitUntil(lambda: dialog.keys_table.rowCount() == 1, timeout=20_000)
    assert [cell(dialog.keys_table, 0, c).text() for c in range(5) if c != 2] == [
        "ops-bot", "read, start, publish, decide", "active", mask_secret(key)]
    assert store.get(approval_key_secret_name("ops-bot")) == key
    services = window.bridge.services if window.bridge is not None else None
    assert services is not None
    assert all(check_key(services.sql, key, scope).name == "ops-bot" for scope in ALL_SCOPES)

    with qtbot.waitSignal(dialog.keys_listed, timeout=20_000):
        dialog.revoke_approval_key("ops-bot")
    assert cell(dialog.keys_table, 0, 3).text() == "revoked"
    assert check_key(services.sql, key, ALL_SCOPES[0]).refusal == "revoked_key"
