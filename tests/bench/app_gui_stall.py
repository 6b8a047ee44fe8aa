"""Longest GUI event-loop stall while 200 runs execute and park, with live mode on; prints JSON.

The window runs on the real embedded engine (the machine's Redis when it answers, else the
embedded server; a SQLite file in a temp folder). A 1 ms timer on the GUI thread records the gap
between its ticks; the longest gap is the longest time the GUI could not react.

Two ways the 200 runs are started: by another process (as webhooks, the API or `lockgate run` do),
and from inside the app (the app's engine thread calls create_run 200 times in a row).
The figures depend on the machine's load: the report includes the load average.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.facade import EngineApi

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

RUNS = int(os.environ.get("LOCKGATE_BENCH_RUNS", "200"))
ROUNDS = int(os.environ.get("LOCKGATE_BENCH_ROUNDS", "3"))
TARGET_MS = 50.0
TIMEOUT_S = 120.0


def redis_url() -> str | None:
    import redis

    url = os.environ.get("LOCKGATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    try:
        redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1).ping()
        return url
    except redis.RedisError:
        return None


CREATE_SCRIPT = """
import os, sys
from engine.config import EngineConfig
from engine.host import EngineServices
services = EngineServices(EngineConfig.from_env(), workers=0, projector=False, due_waker=False).start()
for index in range(int(sys.argv[1])):
    services.create_run("stall-bench", {"name": f"n{index}"})
services.stop()
"""


def measure(create_in_app: bool) -> dict[str, object]:
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QMessageBox

    from app.bridge import EngineBridge
    from app.examples import example_bytes
    from app.gui import create_application, freeze_startup_objects
    from app.settings import AppSettings
    from app.window import MainWindow
    from canvas.document import FlowDocument
    from engine.config import EngineConfig
    from engine.flow import load_flow_text

    app = create_application([])
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        prefix = f"lgbench-{uuid.uuid4().hex[:8]}"
        config = EngineConfig(data_dir=folder / "data", redis_url=redis_url(), key_prefix=prefix)
        settings = AppSettings(QSettings(str(folder / "s.ini"), QSettings.Format.IniFormat))
        settings.first_start_done = True
        bridge = EngineBridge(config, workers=2)
        window = MainWindow(settings, bridge)
        window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
        window.resize(1600, 1000)
        window.show()
        bridge.start()
        deadline = time.monotonic() + 60
        while bridge.state not in ("running", "failed") and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.01)
        if bridge.state != "running":
            raise SystemExit(f"engine did not start: {bridge.unavailable_reason}")
        freeze_startup_objects()  # as the app does once its engine is running (app.gui.create_main_window)
        # Measure runs executing, not the worker process booting: wait for its start line.
        assert bridge.engine_process is not None
        log = bridge.engine_process.log_path
        while "Ctrl-C stops" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.01)

        flow = load_flow_text(example_bytes("hello.flow.json")).model_copy(update={"id": "stall-bench"})
        document = FlowDocument.from_flow(flow)
        document.add_node("queue", (240, 120))
        queue_id = next(n.id for n in document.flow_ref().nodes if n.type == "queue")
        document.set_config_field(queue_id, "delay", "1h")
        document.disconnect(next(e for e in document.flow_ref().edges if e.from_ == "start"))
        document.connect("start", None, queue_id)
        document.connect(queue_id, "default", "greet")
        window.add_document(document)
        published: list[object] = []
        bridge.publish(document.flow(), lambda version, error: published.append(error or version))
        while not published:
            app.processEvents()
            time.sleep(0.005)
        window.actions_by_id["live"].trigger()

        gaps: list[float] = []
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            gaps.append((now - last[0]) * 1000)
            last[0] = now

        ticker = QTimer()
        ticker.setInterval(1)
        ticker.timeout.connect(tick)
        ticker.start()
        created: list[object] = []

        def create_all(api: EngineApi) -> int:
            for index in range(RUNS):
                api.create_run("stall-bench", {"name": f"n{index}"})
            return RUNS

        started = time.perf_counter()
        last[0] = started
        creator: subprocess.Popen[bytes] | None = None
        if create_in_app:
            bridge.request(create_all, lambda result, error: created.append(error or result))
        else:
            assert bridge.services is not None
            env = dict(os.environ, LOCKGATE_DATA_DIR=str(config.data_dir), LOCKGATE_REDIS_URL=bridge.services.redis.url,
                       LOCKGATE_KEY_PREFIX=prefix)
            creator = subprocess.Popen([sys.executable, "-c", CREATE_SCRIPT, str(RUNS)], env=env)
        editor = window.tabs.current_editor()
        assert editor is not None
        parked = 0
        end = time.monotonic() + TIMEOUT_S
        while time.monotonic() < end:
            app.processEvents()
            counts = window.engine.live.node_counts("stall-bench", time.time()) if window.engine else {}
            parked = counts.get(queue_id, (0, 0, ""))[1]
            if creator is not None and creator.poll() is not None:
                created.append(creator.returncode)
                creator = None
            if parked >= RUNS and created:
                break
            time.sleep(0.001)
        elapsed = time.perf_counter() - started
        # Let the coalesced refreshes that follow the last batch land inside the measurement too.
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle:
            app.processEvents()
            time.sleep(0.001)
        ticker.stop()
        live_flushes = editor.view.live_flushes
        rows = len(window.runs.rows)
        bridge.stop()
        window.close()
        if config.redis_url:
            import redis

            client = redis.Redis.from_url(config.redis_url, socket_timeout=5)
            keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
            if keys:
                client.delete(*keys)
        app.processEvents()

    gaps_sorted = sorted(gaps)
    return {
        "runs_parked_seen_live": parked,
        "runs_in_panel": rows,
        "seconds_to_all_parked": round(elapsed, 3),
        "gui_ticks": len(gaps),
        "max_stall_ms": round(max(gaps), 1),
        "p99_gap_ms": round(gaps_sorted[int(len(gaps_sorted) * 0.99) - 1], 1),
        "median_gap_ms": round(statistics.median(gaps), 2),
        "live_repaints": live_flushes,
        "redis": "machine" if config.redis_url else "embedded",
        "meets_target": max(gaps) < TARGET_MS,
    }


def main() -> None:
    load_before = os.getloadavg()[0]
    results: dict[str, list[dict[str, object]]] = {"another_process": [], "the_app": []}
    for _round in range(ROUNDS):
        results["another_process"].append(measure(create_in_app=False))
        results["the_app"].append(measure(create_in_app=True))
    summary = {}
    for mode, rounds in results.items():
        stalls = [float(r["max_stall_ms"]) for r in rounds]  # type: ignore[arg-type]
        summary[f"runs_created_by_{mode}"] = {
            "max_stall_ms_per_round": stalls,
            "median_of_max_stall_ms": round(statistics.median(stalls), 1),
            "p99_gap_ms_per_round": [r["p99_gap_ms"] for r in rounds],
            "seconds_to_all_parked_per_round": [r["seconds_to_all_parked"] for r in rounds],
            "runs_parked_seen_live": [r["runs_parked_seen_live"] for r in rounds],
        }
    print(json.dumps({
        "benchmark": "app_gui_stall",
        "runs": RUNS,
        "rounds": ROUNDS,
        "target_ms": TARGET_MS,
        "load_average_before": round(load_before, 2),
        "load_average_after": round(os.getloadavg()[0], 2),
        "redis": results["the_app"][0]["redis"],
        **summary,
        "meets_target_in_every_round": all(
            float(r["max_stall_ms"]) < TARGET_MS for rounds in results.values() for r in rounds  # type: ignore[arg-type]
        ),
    }, indent=2))


if __name__ == "__main__":
    main()
