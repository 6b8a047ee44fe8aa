"""The app's engine serves the HTTP API and webhooks, so a webhook URL shown in the Triggers dock answers."""

from __future__ import annotations

import socket
from collections.abc import Callable

import httpx
import pytest

from app.examples import example_bytes
from app.window import MainWindow
from engine.flow import load_flow_text
from engine.triggers.webhooks import signature_of
from tests.app.test_triggers import WAIT_MS, click_toggle, publish_open, wait_for_row


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def window(open_engine_window: Callable[..., MainWindow], monkeypatch: pytest.MonkeyPatch) -> MainWindow:
    monkeypatch.setenv("LOCKGATE_HTTP_URL", f"http://127.0.0.1:{free_port()}")
    return open_engine_window(serve_workers=False)


def test_a_signed_post_to_the_shown_webhook_url_starts_a_run(qtbot, window: MainWindow) -> None:
    bridge = window.bridge
    assert bridge is not None and bridge.http_url is not None
    announced = f"HTTP API and webhooks on {bridge.http_url}"
    qtbot.waitUntil(lambda: any(line.endswith(announced) for line in window.log.lines()), timeout=WAIT_MS)
    assert bridge.http_listening
    publish_open(qtbot, window, load_flow_text(example_bytes("ticket-triage.flow.json")))
    wait_for_row(qtbot, window, "hook", lambda row: row.state == "disabled")
    click_toggle(qtbot, window, "hook", "Enable")
    wait_for_row(qtbot, window, "hook", lambda row: row.state == "enabled" and row.token.startswith("whk_"))
    row = window.triggers.row_of("hook")
    assert row is not None and row.url.startswith(window.bridge.http_url)

    body = b'{"ticket": {"id": 9, "body": "where is my order?"}}'
    headers = {"X-Hub-Signature-256": signature_of(body, row.token), "X-Delivery-Id": "app-1",
               "content-type": "application/json"}
    answer = httpx.post(row.url, content=body, headers=headers, timeout=10)
    assert answer.status_code in (200, 201, 202), answer.text
    run_id = answer.json()["run_id"]
    api = window.bridge.api
    assert api is not None
    qtbot.waitUntil(lambda: api.get_run(run_id) is not None, timeout=WAIT_MS)
    stored = api.get_run(run_id)
    assert stored is not None and stored.trigger == "hook"

    unsigned = httpx.post(row.url, content=body, timeout=10)
    assert unsigned.status_code == 401
