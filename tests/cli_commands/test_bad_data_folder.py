"""A data folder the engine cannot use (a file, one that cannot be created, one holding a `lockgate.db` that is not
a SQLite database): every command that needs it says so in one line and exits 2 before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import cli_env, lockgate
from tests.conftest import EXAMPLES

NAME_ANOTHER = "pass --data-dir (or LOCKGATE_DATA_DIR) naming a folder"
JUNK = b"junk\n"
COMMANDS = [("runs", "list"), ("publish", str(EXAMPLES / "hello.flow.json")), ("serve", "--port", "0")]


def _refused(env: dict[str, str], *args: str) -> str:
    """The stderr of `lockgate *args`, which must refuse the data folder: exit 2, nothing on stdout, no traceback."""
    result = lockgate(env, *args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr and "HTTP API" not in result.stderr, result.stderr
    return result.stderr


@pytest.fixture
def env(tmp_path: Path, redis_url: str, key_prefix: str) -> dict[str, str]:
    """`lockgate`'s environment with the data folder tmp_path/data."""
    return cli_env(tmp_path, redis_url, key_prefix)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda args: args[0])
def test_a_file_as_data_folder(tmp_path: Path, env: dict[str, str], command: tuple[str, ...]) -> None:
    folder = tmp_path / "data"
    folder.write_bytes(JUNK)
    stderr = _refused(env, *command)
    assert stderr == f"lockgate: the data folder {folder} is a file, not a folder; {NAME_ANOTHER}\n"
    assert folder.read_bytes() == JUNK


@pytest.mark.parametrize("command", COMMANDS, ids=lambda args: args[0])
def test_a_data_folder_that_cannot_be_created(tmp_path: Path, env: dict[str, str], command: tuple[str, ...]) -> None:
    (tmp_path / "afile").write_bytes(JUNK)
    folder = tmp_path / "afile" / "data"
    stderr = _refused(env, "--data-dir", str(folder), *command)
    assert stderr == (f"lockgate: the data folder {folder} cannot be created (Not a directory); {NAME_ANOTHER} "
                      "you can write to\n")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda args: args[0])
def test_a_lockgate_db_that_is_not_a_database(tmp_path: Path, env: dict[str, str], command: tuple[str, ...]) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "lockgate.db").write_bytes(JUNK)
    stderr = _refused(env, *command)
    assert stderr == (f"lockgate: the data folder {folder} holds lockgate.db, which is not a SQLite database "
                      "(damaged, or another program's file); move it away or point --data-dir elsewhere\n")
    assert [path.name for path in folder.iterdir()] == ["lockgate.db"]  # nothing started, not even a WAL file
    assert (folder / "lockgate.db").read_bytes() == JUNK
