"""Settings every test shares. Area fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Every process a test starts logs here, never in the user's log folder (tests of logging use their own).
_TEST_LOGS = tempfile.mkdtemp(prefix="lockgate-test-logs-")
os.environ["LOCKGATE_LOG_DIR"] = _TEST_LOGS

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
# The spec's examples beside the repository when present; a clean checkout elsewhere uses the byte-identical
# copies shipped in resources/examples (tests/foundation checks they match).
EXAMPLES = SHARED / "examples" if (SHARED / "examples").is_dir() else ROOT / "resources" / "examples"

pytest_plugins = ["tests.fixtures"]


@pytest.fixture(autouse=True)
def own_app_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ports of this test alone for what the app's engine starts (its HTTP server, the provider simulator).

    With the app's fixed defaults, tests running side by side would reuse or stop each other's simulator and
    race for the HTTP port; tests of those defaults delete the variables."""
    from app.engine_process import SIMULATOR_HOST, SIMULATOR_PORT_VARIABLE, free_port

    monkeypatch.setenv(SIMULATOR_PORT_VARIABLE, str(free_port(SIMULATOR_HOST)))
    monkeypatch.setenv("LOCKGATE_HTTP_URL", f"http://127.0.0.1:{free_port(SIMULATOR_HOST)}")


def _release_qt_objects() -> None:
    """Delete every widget and collect Qt wrappers while the QApplication and the interpreter are whole.

    Left to interpreter exit, widgets still referenced (from cycles, failed tests' frames, caches) are destroyed
    after the QApplication or midway through finalization, which can crash the process (exit code 139) after
    every test passed."""
    if "PySide6.QtWidgets" not in sys.modules:
        return
    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    gc.collect()
    for widget in QApplication.topLevelWidgets():
        widget.close()
        widget.deleteLater()
    clipboard = QApplication.clipboard()
    if clipboard is not None:
        clipboard.clear()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    app.processEvents()
    gc.collect()


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    yield
    if "qapp" in getattr(item, "fixturenames", ()):
        # Collected here, on the GUI thread: left for later, a Qt test's garbage can be collected by whichever
        # thread next allocates (an engine or Redis thread of a later test), and Qt objects must not die there.
        from PySide6.QtCore import QCoreApplication, QEvent

        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        gc.collect()
        # What survives is alive: kept out of later collections, which then look only at newer objects
        # instead of walking the whole heap of every module the suite imported.
        gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _release_qt_objects()
    shutil.rmtree(_TEST_LOGS, ignore_errors=True)
