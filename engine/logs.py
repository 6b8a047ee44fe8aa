"""The program's logging, configured once per process: a rotating file in the log folder, warnings and
errors on stderr, the run and node a record was logged for, and native crashes written beside the log.

Entry points call `configure_logging` once (`app.main` for the app and every command); engine code
only asks `logging.getLogger(...)` and marks the run it works on with `run_context`.
"""

from __future__ import annotations

import contextvars
import faulthandler
import logging
import logging.config
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

import platformdirs

if TYPE_CHECKING:
    from engine.settings import LockgateSettings

APP_NAME = "lockgate"
LOG_DIR_ENV = "LOCKGATE_LOG_DIR"
LOG_LEVEL_ENV = "LOCKGATE_LOG_LEVEL"
DATA_FOLDER_LOGS = "log"
"""Folder of the logs inside a data folder given explicitly (see `log_folder`)."""
LEVELS: dict[str, int] = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
                          "error": logging.ERROR, "critical": logging.CRITICAL}
DEFAULT_LEVEL = "info"
CONSOLE_LEVEL = logging.WARNING
MAX_BYTES = 5 * 1024 * 1024
BACKUP_COUNT = 5
FILE_FORMAT = "%(asctime)s %(levelname)-8s %(process)d %(threadName)s %(name)s: %(message)s"
LINE_FORMAT = "%(asctime)s  %(levelname)s %(name)s: %(message)s"
"""One line of the app's Log dock (local time of day, like the dock's own lines)."""
QUIET_LIBRARIES: dict[str, str] = {"httpx": "WARNING", "httpcore": "WARNING", "urllib3": "WARNING",
                                   "alembic": "WARNING", "asyncio": "INFO", "qasync": "INFO", "redis": "INFO"}
"""Libraries that log every request or migration step at INFO/DEBUG; their warnings still come through."""


class LogLevelError(ValueError):
    """A log level that is not one of `LEVELS`; the message names the valid ones."""


def parse_level(text: str, source: str = "--log-level") -> str:
    """`"DEBUG"` or `"debug"` -> `"debug"`; anything else raises LogLevelError naming `source` and the levels."""
    level = text.strip().lower()
    if level not in LEVELS:
        raise LogLevelError(f"{source} {text!r} is not a log level; use one of {', '.join(LEVELS)}")
    return level


def chosen_level(flag: str | None, settings: LockgateSettings) -> str:
    """The flag's level, else LOCKGATE_LOG_LEVEL's, else `info`; a bad flag raises LogLevelError."""
    if flag:
        return parse_level(flag)
    return settings.log_level or DEFAULT_LEVEL


def log_folder(settings: LockgateSettings | None = None) -> Path:
    """LOCKGATE_LOG_DIR (of `settings`, else of the environment now); else `log` in the data folder when one is
    given (LOCKGATE_DATA_DIR, `--data-dir`), so processes of different data folders keep their logs apart; else
    the platform's user log folder (e.g. ~/.local/state/lockgate/log)."""
    if settings is None:
        # Here, not at the top: the supervisor's process configures its logging without pydantic-settings.
        from engine.settings import load_settings

        settings = load_settings()
    configured = settings.log_dir
    if configured is not None:
        return configured
    if settings.data_dir is not None:
        return settings.data_dir / DATA_FOLDER_LOGS
    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


# ----- the run and node a record belongs to -------------------------------------------------------------

_where: contextvars.ContextVar[tuple[str | None, str | None]] = contextvars.ContextVar(
    "lockgate_log_where", default=(None, None))


@contextmanager
def run_context(run_id: str, node: str | None = None) -> Iterator[None]:
    """Records logged inside carry `run_id` and `node` (a step, e.g. `fetch` or `each[2]`)."""
    token = _where.set((run_id, node))
    try:
        yield
    finally:
        _where.reset(token)


def current_run() -> tuple[str | None, str | None]:
    """`(run_id, node)` of the enclosing `run_context`, `(None, None)` outside one."""
    return _where.get()


class RunContextFilter(logging.Filter):
    """Puts `run_id` and `node` on every record (None outside a run); a record that has them keeps them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "run_id"):
            record.run_id, record.node = _where.get()
        return True


class RecordFormatter(logging.Formatter):
    """The format's line, then `[run=… node=…]` when the record belongs to a run (before any traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        run_id = getattr(record, "run_id", None)
        if not run_id:
            return text
        node = getattr(record, "node", None)
        where = f" [run={run_id} node={node}]" if node else f" [run={run_id}]"
        first, newline, rest = text.partition("\n")
        return first + where + newline + rest


class StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is at the time (a replaced or captured stream keeps working)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            if stream is not None:
                stream.write(self.format(record) + "\n")
                stream.flush()
        except Exception:
            self.handleError(record)


@dataclass(frozen=True)
class Drained:
    lines: list[str]
    dropped: int
    """Records dropped since the last drain because the reader fell behind (the oldest go first)."""


class RecordBuffer(logging.Handler):
    """Formats records on the thread that logs them and keeps the lines for a reader on another thread
    (the app's Log dock drains it from a GUI timer). Holds at most `capacity` lines."""

    def __init__(self, level: int = logging.WARNING, capacity: int = 2000) -> None:
        super().__init__(level)
        self.capacity = capacity
        self._lines: deque[str] = deque()
        self._dropped = 0
        self._guard = threading.Lock()
        self.setFormatter(RecordFormatter(LINE_FORMAT, datefmt="%H:%M:%S"))
        self.addFilter(RunContextFilter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._guard:
            if len(self._lines) >= self.capacity:
                self._lines.popleft()
                self._dropped += 1
            self._lines.append(line)

    def drain(self, limit: int) -> Drained:
        """Up to `limit` lines, oldest first, and how many were dropped since the last drain."""
        with self._guard:
            lines = [self._lines.popleft() for _ in range(min(limit, len(self._lines)))]
            dropped, self._dropped = self._dropped, 0
        return Drained(lines, dropped)


# ----- configuration ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogSetup:
    level: str
    file: Path | None
    """The rotating log file; None when logging to a file was not asked for or the folder is not writable."""
    faults: Path | None
    """Where faulthandler writes native crashes; None when it was already enabled elsewhere (e.g. stderr)."""


_setup: LogSetup | None = None
_faults_stream: IO[str] | None = None
"""Open for the process's life: faulthandler writes to its file descriptor when the process crashes."""


def configured() -> LogSetup | None:
    """This process's setup, None before `configure_logging`."""
    return _setup


def configure_logging(level: str, log_dir: Path | None, *, console: bool, name: str = APP_NAME,
                      extra_handlers: Sequence[logging.Handler] = ()) -> LogSetup:
    """Configure this process's logging, once: `log_dir/<name>.log` (rotated, 5 MB x 5) at `level`,
    stderr at WARNING when `console`, every `extra_handlers` on the root logger, run ids on records,
    uncaught exceptions logged, native crashes to `log_dir/<name>-faults.log`."""
    global _setup
    if _setup is not None:
        raise RuntimeError("logging is configured once per process, at its entry point; it already was")
    level = parse_level(level)
    file_path, problem = _writable_file(log_dir, f"{name}.log") if log_dir is not None else (None, "")
    handlers: dict[str, dict[str, Any]] = {}
    if file_path is not None:
        handlers["file"] = {"class": "logging.handlers.RotatingFileHandler", "filename": str(file_path),
                            "maxBytes": MAX_BYTES, "backupCount": BACKUP_COUNT, "encoding": "utf-8",
                            "formatter": "file", "filters": ["run"]}
    if console:
        handlers["console"] = {"()": StderrHandler, "level": logging.getLevelName(CONSOLE_LEVEL),
                               "formatter": "console", "filters": ["run"]}
    logging.config.dictConfig({
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"run": {"()": RunContextFilter}},
        "formatters": {"file": {"()": RecordFormatter, "format": FILE_FORMAT},
                       "console": {"()": RecordFormatter, "format": "%(levelname)s %(name)s: %(message)s"}},
        "handlers": handlers,
        "loggers": {library: {"level": quiet} for library, quiet in QUIET_LIBRARIES.items()},
        "root": {"level": level.upper(), "handlers": list(handlers)},
    })
    root = logging.getLogger()
    for handler in extra_handlers:
        handler.addFilter(RunContextFilter())
        root.addHandler(handler)
    logging.captureWarnings(True)
    _log_uncaught_exceptions()
    faults = _enable_faulthandler(log_dir / f"{name}-faults.log") if file_path is not None and log_dir else None
    _setup = LogSetup(level, file_path, faults)
    if problem:
        logging.getLogger("lockgate.logs").warning("no log file: %s", problem)
    return _setup


def _writable_file(folder: Path, file_name: str) -> tuple[Path | None, str]:
    path = folder / file_name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return None, f"cannot write {path} ({exc.strerror or exc}); set {LOG_DIR_ENV} to a writable folder"
    return path, ""


def _enable_faulthandler(path: Path) -> Path | None:
    global _faults_stream
    if faulthandler.is_enabled():
        return None  # PYTHONFAULTHANDLER, -X faulthandler or a test runner chose where crashes go
    try:
        _faults_stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 - kept open until the process ends
    except OSError:
        return None
    faulthandler.enable(_faults_stream, all_threads=True)
    return path


def _log_uncaught_exceptions() -> None:
    crash = logging.getLogger("lockgate.crash")

    def on_uncaught(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, error, trace)
            return
        crash.critical("uncaught %s", kind.__name__, exc_info=(kind, error, trace))

    def on_thread_uncaught(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        thread = args.thread.name if args.thread is not None else "?"
        crash.critical("uncaught %s in thread %s", args.exc_type.__name__, thread,
                       exc_info=(args.exc_type, args.exc_value, args.exc_traceback))

    sys.excepthook = on_uncaught
    threading.excepthook = on_thread_uncaught
