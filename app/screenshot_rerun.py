"""Render Rerun from here: `python -m app.screenshot_rerun docs/screenshots` writes rerun-confirm.png (the
confirmation, with the current version refused upstream and a repeated effect named) and rerun-details.png
(the rerun's details, linked to the run it reruns).

The embedded engine runs in a temp data folder; the flow's two POSTs go to a small local HTTP server."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from app.screenshots import _pause, _wait_for, open_published


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _flow(url: str, tone: str) -> dict[str, Any]:
    def node(node_id: str, kind: str, title: str, x: int, config: dict[str, Any]) -> dict[str, Any]:
        return {"id": node_id, "type": kind, "title": title, "position": [x, 0], "config": config}

    return {"format": "lockgate.flow/1", "id": "refund", "name": "Refund", "nodes": [
        node("start", "trigger.manual", "Start", 0, {}),
        node("charge", "http.request", "Refund the card", 220, {"method": "POST", "url": url + "/refund",
                                                                 "output_key": "refund"}),
        node("draft", "set", "Draft the reply", 440, {"values": {"reply": tone + ", your refund is on its way"}}),
        node("notify", "http.request", "Email the customer", 660, {"method": "POST", "url": url + "/email",
                                                                   "body": "{{ state.reply }}"}),
        node("done", "terminal", "Done", 880, {"output": "{{ state.reply }}"}),
    ], "edges": [{"from": a, "to": b} for a, b in
                 (("start", "charge"), ("charge", "draft"), ("draft", "notify"), ("notify", "done"))]}


def render_rerun(folder: Path) -> list[Path]:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from app.gui import create_application
    from canvas.document import FlowDocument
    from engine.flow import flow_from_data

    folder.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as scratch:
        app = create_application([])
        window = open_published(app, Path(scratch), "light")
        engine = window.engine
        assert engine is not None
        window.add_document(FlowDocument.from_flow(flow_from_data(_flow(url, "Hello"))))
        window.publish()
        _wait_for(lambda: "refund v1 published" in window.statusBar().currentMessage())
        window.ask_run_inputs = lambda _flow: {}
        window.run_flow()
        _wait_for(lambda: any(r.flow_id == "refund" and r.status == "succeeded" for r in window.runs.rows.values()))
        run_id = next(r.run_id for r in window.runs.rows.values() if r.flow_id == "refund")
        published: list[object] = []
        engine.bridge.request(lambda api: api.publish(flow_from_data(_flow(url, "Hi"))),
                              lambda result, _error: published.append(result))
        _wait_for(lambda: bool(published))
        engine.reruns.ask(run_id, "notify")
        _wait_for(lambda: engine.reruns.dialog is not None and engine.reruns.dialog.isVisible())
        dialog = engine.reruns.dialog
        assert dialog is not None
        _pause(0.3)
        dialog.grab().save(str(folder / "rerun-confirm.png"))
        written.append(folder / "rerun-confirm.png")
        dialog.accept()
        _wait_for(lambda: sum(r.flow_id == "refund" and r.status == "succeeded"
                              for r in window.runs.rows.values()) == 2)
        _wait_for(partial(_rerun_shown, window, run_id))
        details = engine.details
        assert details is not None
        details.resize(1100, 640)
        for _ in range(5):
            QApplication.processEvents()
        details.grab().save(str(folder / "rerun-details.png"))
        written.append(folder / "rerun-details.png")
        details.hide()
        window.close()
        assert window.bridge is not None
        window.bridge.stop()
    server.shutdown()
    return written


def _rerun_shown(window: Any, run_id: str) -> bool:
    details = window.engine.details if window.engine is not None else None
    run = details.run if details is not None else None
    return run is not None and run.rerun_of == run_id and run.status == "succeeded"


if __name__ == "__main__":
    for path in render_rerun(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")):
        print(path)
