"""The first-start example succeeds offline on its happy path: its "Issue refund" posts to the refund desk of the
provider simulator the app starts itself, so publish, run, approve ends `succeeded` (real embedded engine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.engine_process import SIMULATOR_HOST, SIMULATOR_PORT, SIMULATOR_PORT_VARIABLE
from app.examples import FIRST_START_EXAMPLE, example_bytes
from app.window import MainWindow
from engine.flow import load_flow_text
from engine.providers.simulator import DEMO_REFUNDS_PATH
from engine.read_models import Run

TICKET = {"id": 42, "body": "I was charged twice, please refund me"}


def test_the_opened_example_calls_the_apps_own_simulator(qtbot, app_settings, no_engine_env, monkeypatch) -> None:
    monkeypatch.delenv(SIMULATOR_PORT_VARIABLE)
    shipped = load_flow_text(example_bytes(FIRST_START_EXAMPLE)).node("refund")
    assert shipped is not None and shipped.config["url"] == "http://127.0.0.1:9/refunds"  # the spec's, untouched
    window = MainWindow(app_settings, None)
    qtbot.addWidget(window)
    document = window.open_example(FIRST_START_EXAMPLE)
    refund = document.node("refund")
    assert refund is not None
    assert refund.config["url"] == f"http://{SIMULATOR_HOST}:{SIMULATOR_PORT}{DEMO_REFUNDS_PATH}"
    assert refund.config["body"] == shipped.config["body"]


def test_the_first_start_example_runs_through_its_approval_to_succeeded(
        qtbot, open_engine_window: Callable[..., MainWindow]) -> None:
    window = open_engine_window()
    assert window.bridge is not None and window.bridge.simulator is not None
    window.first_start()
    document = window.document
    assert document is not None and document.flow_ref().id == "ticket-triage"
    refund_node = document.node("refund")
    assert refund_node is not None
    assert refund_node.config["url"] == window.simulator_root() + DEMO_REFUNDS_PATH
    assert window.simulator_root() == window.bridge.simulator.url.removesuffix("/v1")
    window.publish()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage() == "ticket-triage v1 published", timeout=10_000)
    window.ask_run_inputs = lambda _flow: {"ticket": TICKET}
    window.run_flow()
    qtbot.waitUntil(lambda: len(window.approvals.approvals) == 1, timeout=30_000)
    approval = window.approvals.approvals[0]
    assert approval.message == "Refund ticket 42?"
    window.approvals.table.selectRow(0)
    window.approvals.approve_button.click()
    qtbot.waitUntil(lambda: window.runs.rows.get(approval.run_id) is not None
                    and window.runs.rows[approval.run_id].status in ("succeeded", "failed"), timeout=30_000)

    found: list[Any] = []
    window.bridge.get_run(approval.run_id, lambda run, error: found.append(run if error is None else error))
    qtbot.waitUntil(lambda: bool(found), timeout=10_000)
    run = found[0]
    assert isinstance(run, Run), run
    assert window.runs.rows[approval.run_id].status == "succeeded", run.error
    refund = run.state["refund"]  # type: ignore[index]
    assert refund["status"] == 201 and refund["body"]["status"] == "issued" and refund["body"]["ticket"] == 42
