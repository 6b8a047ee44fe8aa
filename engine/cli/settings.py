"""The settings a command runs with: `app.main` reads them once per command and puts them in force
(`in_force`) while its handler runs; the command's pieces ask `command_settings()`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Literal

from engine.config import EngineConfig
from engine.settings import LockgateSettings, load_settings

DataFolderProblem = Literal["not_a_folder", "cannot_create", "not_a_database"]
_NAME_ANOTHER = "pass --data-dir (or LOCKGATE_DATA_DIR) naming a folder"

_in_force: list[LockgateSettings] = []


class DataFolderError(Exception):
    """The data folder cannot be used; `code` says why, the message names the folder and what to do. `app.main`
    prints it and exits 2."""

    def __init__(self, code: DataFolderProblem, message: str) -> None:
        super().__init__(message)
        self.code: DataFolderProblem = code


@contextmanager
def in_force(settings: LockgateSettings) -> Iterator[LockgateSettings]:
    """`command_settings()` is `settings` inside."""
    _in_force.append(settings)
    try:
        yield settings
    finally:
        _in_force.pop()


def command_settings() -> LockgateSettings:
    """The settings in force; a command run without `app.main` (one command's own parser, in a test) reads the
    environment here instead, each time."""
    return _in_force[-1] if _in_force else load_settings()


def command_locations() -> EngineConfig:
    """The engine locations of `command_settings()`, as they are: nothing created or checked."""
    return EngineConfig.from_settings(command_settings())


def command_config() -> EngineConfig:
    """The engine locations of `command_settings()`, the data folder created and its SQLite file (when the store
    is that file) checked before the command starts anything; DataFolderError when the folder cannot be used."""
    config = command_locations()
    make_data_folder(config.data_dir)
    if config.db_url is None:
        check_sqlite_file(config.data_dir / "lockgate.db", f"the data folder {config.data_dir} holds lockgate.db",
                          "move it away or point --data-dir elsewhere")
    else:
        from engine.store.db import sqlite_database  # here: commands that need no store (validate) load no SQL

        database = sqlite_database(config.db_url)
        if database is not None:
            check_sqlite_file(database, f"LOCKGATE_DB_URL names {database}", "move it away or point LOCKGATE_DB_URL "
                              "at another file")
    return config


def make_data_folder(folder: Path) -> None:
    """`folder` and its parents, created if missing."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise DataFolderError("not_a_folder", f"the data folder {folder} is a file, not a folder; "
                                              f"{_NAME_ANOTHER}") from None
    except OSError as exc:
        raise DataFolderError("cannot_create", f"the data folder {folder} cannot be created "
                                               f"({exc.strerror or exc}); {_NAME_ANOTHER} you can write to") from None


def check_sqlite_file(path: Path, named: str, fix: str) -> None:
    """DataFolderError when `path` exists and SQLite refuses it as not a database (`SQLITE_NOTADB`); the message is
    `named` (who names the file), what is wrong, then `fix`."""
    if not path.is_file():
        return
    try:
        # Read-only: the check leaves the file as it is.
        with closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)) as connection:
            connection.execute("PRAGMA schema_version")
    except sqlite3.DatabaseError as exc:  # other refusals (busy, unreadable) are the store's to report
        if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_NOTADB:
            raise DataFolderError("not_a_database", f"{named}, which is not a SQLite database (damaged, or another "
                                  f"program's file); {fix}") from None
