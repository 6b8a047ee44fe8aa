"""The Log dock shows warnings from every thread of the app and from the engine's child process."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
import redis
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

from app.bridge import EngineBridge
from app.settings import AppSettings
from app.window import MainWindow
from engine.config import EngineConfig
from engine.logs import RecordBuffer, run_context
from tests.app.conftest import ENGINE_START_MS, wait_for_workers
from tests.engine.test_process_layout import children_of

WAIT_MS = 30_000


def test_warnings_of_the_app_and_its_engine_child_reach_the_log_dock(
        qtbot, tmp_path: Path, redis_url: str, key_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    logs = tmp_path / "logs"
    monkeypatch.setenv("LOCKGATE_LOG_DIR", str(logs))  # the engine child inherits it
    records = RecordBuffer()
    root = logging.getLogger()
    root.addHandler(records)  # what app.main's configure_logging does for the app's process
    config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, key_prefix=key_prefix)
    bridge = EngineBridge(config, workers=1, log_records=records)
    app_settings = AppSettings(QSettings(str(tmp_path / "lockgate-settings.ini"), QSettings.Format.IniFormat))
    app_settings.first_start_done = True
    window = MainWindow(app_settings, bridge, log_records=records)
    qtbot.addWidget(window)
    window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    try:
        bridge.start()
        qtbot.waitUntil(lambda: bridge.state in ("running", "failed"), timeout=ENGINE_START_MS)
        assert bridge.state == "running", bridge.unavailable_reason
        wait_for_workers(qtbot, bridge)

        def warn_off_the_gui_thread() -> None:
            with run_context("run-in-app", "fetch"):
                logging.getLogger("lockgate.test").warning("a warning from a thread of the app")

        thread = threading.Thread(target=warn_off_the_gui_thread)
        thread.start()
        thread.join(10)
        # A job no worker can read: the child's worker logs an error and moves it to the dead stream.
        client = redis.Redis.from_url(redis_url)
        client.xadd(bridge.services.keys.jobs, {b"nonsense": b"1"})

        def shown(text: str) -> bool:
            return any(text in line for line in window.log.lines())

        qtbot.waitUntil(lambda: shown("a warning from a thread of the app [run=run-in-app node=fetch]"),
                        timeout=WAIT_MS)
        dead = bridge.services.keys.jobs_dead
        qtbot.waitUntil(lambda: shown(f"moved to {dead}"), timeout=WAIT_MS)
        line = next(line for line in window.log.lines() if f"moved to {dead}" in line)
        assert "ERROR lockgate.worker: worker " in line
        child_pid = bridge.engine_process.process.pid if bridge.engine_process and bridge.engine_process.process \
            else None
        assert child_pid is not None
        # The engine child (or an executor process under it, where it is a supervisor) wrote it to its own log
        # file too; the app's process did not write the child's record.
        engine_pids = {child_pid, *children_of(child_pid)}
        [written] = [line for line in (logs / "worker.log").read_text().splitlines() if f"moved to {dead}" in line]
        assert any(f" {pid} " in written for pid in engine_pids)
    finally:
        bridge.stop()
        root.removeHandler(records)


def test_the_app_hands_its_records_to_the_dock_and_the_bridge(qtbot, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from app.gui import create_application, create_main_window

    monkeypatch.setenv("LOCKGATE_DATA_DIR", str(tmp_path / "data"))
    settings = AppSettings(QSettings(str(tmp_path / "lockgate-settings.ini"), QSettings.Format.IniFormat))
    settings.first_start_done = True
    records = RecordBuffer()
    window = create_main_window(create_application(), settings, start_engine=False, log_records=records)
    qtbot.addWidget(window)
    assert window.bridge is not None and window.bridge.log_records is records
    assert window.log_feed is not None and window.log_feed.records is records
    logger = logging.getLogger("lockgate.test.feed")
    logger.propagate = False
    logger.addHandler(records)
    try:
        for index in range(250):
            logger.warning("burst %d", index)
    finally:
        logger.removeHandler(records)
    assert window.log_feed.drain() == 200  # one tick's worth; the timer brings the rest
    qtbot.waitUntil(lambda: any(line.endswith("burst 249") for line in window.log.lines()), timeout=WAIT_MS)
    bursts = [line for line in window.log.lines() if "WARNING lockgate.test.feed: burst " in line]
    assert [line.rsplit(" ", 1)[1] for line in bursts] == [str(index) for index in range(250)]
