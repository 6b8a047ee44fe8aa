"""App test fixtures: settings in a temp INI file (never the user's), the bundled triage example, the main
window on the real embedded engine (machine Redis, SQLite file)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.exceptions import TimeoutError as WaitTimeout

from app.bridge import EngineBridge
from app.examples import example_bytes
from app.gui import create_application, create_main_window
from app.settings import AppSettings, BudgetSetting
from app.window import MainWindow, RunChoice
from canvas.document import FlowDocument
from engine.clock import Clock
from engine.config import EngineConfig

ENGINE_START_MS = 30_000
# Where the pointer rests between tests: off every screen, so under no window.
POINTER_PARKED = (-10_000, -10_000)


def park_pointer() -> None:
    """Move the (offscreen) pointer off every window and deliver the leave events."""
    app = QApplication.instance()
    if app is None:
        return
    QCursor.setPos(*POINTER_PARKED)
    app.processEvents()


@pytest.fixture(autouse=True)
def pointer_under_no_window(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test starts and ends with the pointer under no window.

    Tests with real mouse moves (the Edit menu's, the bottom docks' separator drag) leave the process's one
    pointer where they moved it, e.g. over the toolbar's Undo button. A later test's window is shown in the same
    place, so whenever Qt re-enters the widget under that pointer (the window shown, a menu or completion list
    closed) the button's status tip replaces the status bar's message, and a test waiting for "... published"
    sees "Undo the last edit" instead."""
    if "qapp" in request.fixturenames:
        request.getfixturevalue("qapp")  # the test's QApplication, made now rather than a moment later
    park_pointer()
    yield
    park_pointer()


@pytest.fixture
def app_settings(tmp_path: Path) -> AppSettings:
    qsettings = QSettings(str(tmp_path / "lockgate-settings.ini"), QSettings.Format.IniFormat)
    settings = AppSettings(qsettings)
    settings.data_dir = tmp_path / "data"
    return settings


@pytest.fixture
def triage_path(tmp_path: Path) -> Path:
    path = tmp_path / "ticket-triage.flow.json"
    path.write_bytes(example_bytes("ticket-triage.flow.json"))
    return path


@pytest.fixture
def no_engine_env(tmp_path: Path) -> Iterator[None]:
    """Point the app's engine locations at the test's temp folder."""
    saved = {k: os.environ.get(k) for k in ("LOCKGATE_DATA_DIR",)}
    os.environ["LOCKGATE_DATA_DIR"] = str(tmp_path / "data")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def window(qtbot, app_settings: AppSettings, no_engine_env: None) -> MainWindow:
    """The main window without an engine (tests that need one use `engine_window`), shown and exposed."""
    app_settings.first_start_done = True
    made = create_main_window(create_application(), app_settings, start_engine=False)
    qtbot.addWidget(made)
    made.show()
    qtbot.waitExposed(made)
    made.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
    return made


def make_bridge(tmp_path: Path, redis_url: str, key_prefix: str, clock: Clock | None = None) -> EngineBridge:
    """The app's engine bridge on the machine's Redis; with `clock`, the engine runs in this process on that
    clock (a worker child process would keep its own time)."""
    config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, key_prefix=key_prefix)
    return EngineBridge(config, [BudgetSetting("default", 10.0, "month")], workers=1,
                        out_of_process=clock is None, clock=clock)


def wait_for_workers(qtbot, bridge: EngineBridge, starts: int = 1) -> None:
    """Wait until the bridge's worker process has said it serves (`starts` times in this data folder's log).

    The bridge reports "running" once the worker process is spawned; on a loaded machine its imports alone can
    take seconds, which would otherwise eat into every later wait for a run to move."""
    assert bridge.engine_process is not None
    log = bridge.engine_process.log_path

    executors = bridge.engine_process.processes
    line, count = ("role executor; Ctrl-C stops", starts * executors) if executors else ("Ctrl-C stops", starts)

    def served() -> bool:  # the child, or every executor process under it (a supervisor), has said it serves
        return log.exists() and log.read_text(errors="replace").count(line) >= count

    try:
        qtbot.waitUntil(served, timeout=ENGINE_START_MS)
    except WaitTimeout as exc:
        said = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log written)"
        code = bridge.engine_process.exit_code()
        raise AssertionError(f"the worker process did not serve in {ENGINE_START_MS} ms (exit code {code}); "
                             f"its log ends:\n{said}") from exc


def unexpected_publish_question(document: FlowDocument, versions: int) -> bool:
    """The default answer in tests: a modal question nobody expected fails the test instead of hanging it."""
    raise AssertionError(f"unexpected question: publish {document.flow_ref().id} onto its {versions} version(s)?")


def unexpected_run_question(document: FlowDocument, version: int | None) -> RunChoice:
    """The default answer in tests: Run on a draft that is not published fails the test instead of hanging it."""
    raise AssertionError(f"unexpected question: publish {document.flow_ref().id} before running (v{version})?")


@pytest.fixture
def open_engine_window(qtbot, tmp_path: Path, redis_url: str, key_prefix: str,
                       app_settings: AppSettings) -> Iterator[Callable[..., MainWindow]]:
    """Opens a main window on a freshly started embedded engine (data in the test's temp folder); every engine
    it started is stopped at teardown (stopping twice is harmless).

    `serve_workers` also waits for the worker process to serve (`starts` times in the data folder's log);
    `show=False` leaves the window hidden; `clock` runs the engine in this process on that clock (its workers
    serve once it is running)."""
    bridges: list[EngineBridge] = []

    def open_window(*, serve_workers: bool = True, starts: int = 1, show: bool = True,
                    clock: Clock | None = None) -> MainWindow:
        app_settings.first_start_done = True
        bridge = make_bridge(tmp_path, redis_url, key_prefix, clock)
        bridges.append(bridge)
        window = MainWindow(app_settings, bridge)
        qtbot.addWidget(window)
        window.ask_to_save = lambda _document: QMessageBox.StandardButton.Discard
        window.ask_publish_onto_history = unexpected_publish_question
        window.ask_publish_before_run = unexpected_run_question
        if show:
            window.show()
        bridge.start()
        qtbot.waitUntil(lambda: bridge.state in ("running", "failed"), timeout=ENGINE_START_MS)
        assert bridge.state == "running", bridge.unavailable_reason
        if serve_workers and clock is None:
            wait_for_workers(qtbot, bridge, starts)
        return window

    yield open_window
    for bridge in bridges:
        bridge.stop()


@pytest.fixture
def engine_window(open_engine_window: Callable[..., MainWindow]) -> MainWindow:
    """The main window on a running embedded engine whose worker serves."""
    return open_engine_window()
