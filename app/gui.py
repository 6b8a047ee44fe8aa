"""`lockgate` with no arguments: the QApplication, a qasync event loop, the main window, a clean quit."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Sequence

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.bridge import EngineBridge
from app.examples import STARTER_BUDGET
from app.settings import APPLICATION, ORGANIZATION, AppSettings, BudgetSetting
from app.stop_on_signals import WindowCloser
from app.window import MainWindow
from engine.config import EngineConfig
from engine.gc_pauses import freeze_startup_objects
from engine.logs import RecordBuffer
from engine.settings import LockgateSettings, load_settings

_IMPORTED_AT = time.perf_counter()


def engine_config(settings: AppSettings, lockgate: LockgateSettings) -> EngineConfig:
    """The app settings' engine locations; LOCKGATE_DATA_DIR / _REDIS_URL / _DB_URL (e.g. `--data-dir`) win.
    The Redis key namespace and the events journal come from LOCKGATE_KEY_PREFIX / _EVENT_JOURNAL alone."""
    config = settings.engine_config()
    overrides: dict[str, object] = {"key_prefix": lockgate.key_prefix, "event_journal": lockgate.event_journal}
    if lockgate.data_dir is not None:
        overrides["data_dir"] = lockgate.data_dir
    if lockgate.redis_url:
        overrides["redis_url"] = lockgate.redis_url
    if lockgate.db_url:
        overrides["db_url"] = lockgate.db_url
    return dataclasses.replace(config, **overrides)  # type: ignore[arg-type]


def give_starter_budget(settings: AppSettings, config: EngineConfig) -> bool:
    """On a fresh install (no budgets set, a data folder with no store yet), the starter budget the first-start
    example spends from; a data folder already in use keeps the budgets it has. True when it was given."""
    fresh = config.db_url is None and not (config.data_dir / "lockgate.db").exists()
    if settings.budgets() or not fresh:
        return False
    name, limit = STARTER_BUDGET
    settings.set_budgets([BudgetSetting(name, limit, "month")])
    return True


def create_application(argv: Sequence[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    app = QApplication(list(argv) if argv is not None else sys.argv[:1])
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    app.setApplicationDisplayName("Lockgate")
    # Fusion looks the same on every platform and honours the palette the themes set.
    app.setStyle("Fusion")
    return app


def create_main_window(app: QApplication, settings: AppSettings, start_engine: bool = True,
                       log_records: RecordBuffer | None = None,
                       lockgate_settings: LockgateSettings | None = None) -> MainWindow:
    """The themed main window with its engine bridge; opens the example on a first start.

    `log_records`: the process's log records for the Log dock (the engine child's arrive there too).
    `lockgate_settings`: the `LOCKGATE_*` settings (None: the environment's, read here)."""
    from app.theme import apply_app_theme

    lockgate = lockgate_settings if lockgate_settings is not None else load_settings()
    apply_app_theme(app, settings.theme)
    config = engine_config(settings, lockgate)
    if not settings.first_start_done:
        give_starter_budget(settings, config)
    bridge = EngineBridge(config, settings.budgets(), log_records=log_records, settings=lockgate)
    window = MainWindow(settings, bridge, log_records=log_records)
    if not settings.first_start_done:
        window.first_start()
    else:
        window.reopen_last_files()
    if start_engine:
        # After the first paint, so the window is interactive before the engine is up.
        QTimer.singleShot(0, bridge.start)
    bridge.state_changed.connect(lambda state: QTimer.singleShot(0, freeze_startup_objects)
                                 if state == "running" else None)
    return window


def run_app(argv: Sequence[str] | None = None, settings: AppSettings | None = None,
            log_records: RecordBuffer | None = None, lockgate_settings: LockgateSettings | None = None) -> int:
    """Open the app and run until the main window closes; `log_records` feed its Log dock. `lockgate_settings`:
    the `LOCKGATE_*` settings `app.main` read (None: the environment's, read here)."""
    import qasync

    lockgate = lockgate_settings if lockgate_settings is not None else load_settings()
    app = create_application(argv)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = create_main_window(app, settings or AppSettings(), start_engine=not lockgate.no_engine,
                                log_records=log_records, lockgate_settings=lockgate)
    window.show()
    if lockgate.exit_when_ready:
        def report_ready() -> None:
            print(f"ready {time.perf_counter() - _IMPORTED_AT:.3f}", flush=True)
            window.close()

        QTimer.singleShot(0, report_ready)

    closed = asyncio.Event()
    app.lastWindowClosed.connect(closed.set)
    closer = WindowCloser(window).install()
    try:
        with loop:
            loop.run_until_complete(closed.wait())
    finally:
        closer.restore()
    return 0
