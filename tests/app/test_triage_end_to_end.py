"""The issue's walk-through on real widgets and the embedded engine: Publish refuses a finance chain with a
park inside, fix it, publish, Run with inputs, live mode follows the run through the model to the approval,
approve in the panel, the run succeeds and the holds table shows the charge."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.panels.field_editors import TemplateEditor
from app.window import MainWindow
from engine.providers.config import simulator_provider
from engine.providers.registry import PROVIDERS_FILE
from engine.providers.simulator import ProviderSimulator
from tests.app.test_engine_wiring import status_of

TICKET = {"id": 42, "body": "I was charged twice, please refund me"}


class _Refunds(BaseHTTPRequestHandler):
    received: list[dict[str, object]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        _Refunds.received.append(json.loads(self.rfile.read(length) or b"null"))
        body = b'{"refunded": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def refunds_server() -> Iterator[str]:
    """A real HTTP endpoint of this test's own for the refund call (the example's points at the app's shared
    simulator port)."""
    _Refunds.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refunds)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/refunds"
    server.shutdown()
    server.server_close()


@pytest.fixture
def own_simulator(tmp_path: Path) -> Iterator[ProviderSimulator]:
    """This test's own provider simulator on a free port, named in the data folder's providers.json.

    The app's default simulator listens on the fixed port 8765, which other test processes on the machine
    start and stop at any time (seen: this run's simulator refused the port, the other one then went away
    and the model call failed with connection refused)."""
    simulator = ProviderSimulator(port=0).start()
    data_dir = tmp_path / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    providers = {"providers": [simulator_provider(simulator.url).model_dump(mode="json")]}
    (data_dir / PROVIDERS_FILE).write_text(json.dumps(providers), encoding="utf-8")
    yield simulator
    simulator.stop()


def test_triage_from_refusal_to_charge(qtbot, refunds_server: str, own_simulator: ProviderSimulator,
                                       open_engine_window: Callable[..., MainWindow]) -> None:
    window = open_engine_window()  # own_simulator has named itself in the data folder's providers.json
    document = window.open_example("ticket-triage.flow.json")
    editor = window.tabs.current_editor()
    assert editor is not None

    # A wait between the reserve and its model: refused, listed, the node marked.
    edits_before = document.undo_stack.index()
    document.disconnect(next(e for e in document.flow_ref().edges if e.from_ == "reserve"))
    document.connect("reserve", None, "followup")
    document.disconnect(next(e for e in document.flow_ref().edges if e.from_ == "followup"))
    document.connect("followup", "default", "classify")
    window.publish()
    assert status_of(window).startswith("Publish refused")
    flagged = [d for d in window.problems.diagnostics if d.code == "park_inside_finance_chain"]
    assert flagged and flagged[0].node == "followup"
    document.validate_now()
    item = editor.view.node_item("followup")
    assert item is not None and item.diagnostics and any(
        d.code == "park_inside_finance_chain" for d in item.diagnostics)

    # Fix it (undo the four edits), point the refund at a live endpoint through the properties panel.
    stack = document.undo_stack
    for _ in range(stack.index() - edits_before):  # bounded: a stack that refills while undoing must fail, not hang
        stack.undo()
    assert stack.index() == edits_before, [stack.text(i) for i in range(stack.count())]
    assert not [d for d in document.validate_now() if d.severity == "error"]
    window.reveal_node("refund")
    url = window.properties.editors["url"]
    assert isinstance(url, TemplateEditor)
    url.text.setPlainText(refunds_server)
    url.commit()
    window.publish()
    qtbot.waitUntil(lambda: status_of(window) == "ticket-triage v1 published", timeout=10_000)

    window.actions_by_id["live"].trigger()
    window.ask_run_inputs = lambda _flow: {"ticket": TICKET}
    window.run_flow()

    def waiting_at_approval() -> bool:
        editor.view.flush_live()
        approve = editor.view.node_item("approve")
        return approve is not None and approve.live.waiting == 1

    qtbot.waitUntil(waiting_at_approval, timeout=30_000)
    # The live overlay and the Runs panel refresh separately: the row may land a moment after the overlay.
    qtbot.waitUntil(lambda: bool(window.runs.rows), timeout=10_000)
    run_id = next(iter(window.runs.rows))
    assert window.engine is not None
    window.engine.select_run(run_id)

    def path_through_model() -> bool:
        editor.view.flush_live()
        classify = editor.view.node_item("classify")
        approve = editor.view.node_item("approve")
        return bool(classify and classify.live.on_path and approve and approve.live.current)

    qtbot.waitUntil(path_through_model, timeout=20_000)
    approve_item = editor.view.node_item("approve")
    assert approve_item is not None and approve_item.live.waiting_text.startswith("approval")
    skipped = editor.view.node_item("followup")
    assert skipped is not None and not skipped.live.on_path, "the branch not taken is not on the run's path"

    qtbot.waitUntil(lambda: len(window.approvals.approvals) == 1, timeout=10_000)
    assert window.approvals.approvals[0].message == "Refund ticket 42?"
    window.approvals.table.selectRow(0)
    window.approvals.approve_button.click()
    qtbot.waitUntil(lambda: window.runs.rows[run_id].status in ("succeeded", "failed"), timeout=30_000)
    assert window.runs.rows[run_id].status == "succeeded"
    assert _Refunds.received == [TICKET]  # the example's body, `{{ inputs.ticket | tojson }}`
    assert own_simulator.counters.completed >= 1  # the model call went to this test's simulator

    qtbot.waitUntil(lambda: any(h.state == "charged" for h in window.holds.holds), timeout=10_000)
    charged = next(h for h in window.holds.holds if h.state == "charged")
    assert charged.node == "reserve" and charged.amount_usd == pytest.approx(0.2)
    assert charged.charged_usd is not None and 0 < charged.charged_usd <= 0.2
    # The Runs panel reads costs with the stored runs, which the projector may write a moment after the hold.
    qtbot.waitUntil(lambda: window.runs.rows[run_id].cost_usd == pytest.approx(charged.charged_usd), timeout=10_000)
