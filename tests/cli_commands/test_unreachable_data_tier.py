"""A command whose Redis or database does not answer (nothing listens, a wrong role) or whose LOCKGATE_DB_URL names a
file that is not a SQLite database: one line naming what did not answer, where (no password) and which setting
names it, exit 3 (2 for the file: a refusal), and no traceback."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import cli_env, lockgate


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port bound and never listening: connections to it are refused."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        yield closed.getsockname()[1]


@pytest.fixture
def env(tmp_path: Path, redis_url: str, key_prefix: str) -> dict[str, str]:
    return cli_env(tmp_path, redis_url, key_prefix)


def _one_line(result_stderr: str) -> str:
    lines = [line for line in result_stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result_stderr, result_stderr
    return lines[0]


@pytest.mark.parametrize("command", [("runs", "list"), ("flows", "list"), ("approvals", "list")],
                         ids=lambda args: "-".join(args))
def test_redis_that_does_not_answer(env: dict[str, str], closed_port: int, command: tuple[str, ...]) -> None:
    result = lockgate({**env, "LOCKGATE_REDIS_URL": f"redis://:hunter2@127.0.0.1:{closed_port}/0"}, *command)
    assert result.returncode == 3 and result.stdout == ""
    line = _one_line(result.stderr)
    assert line.startswith(f"lockgate: Redis at redis://:***@127.0.0.1:{closed_port}/0 does not answer ("), line
    assert "Connection refused" in line and "hunter2" not in line
    assert line.endswith("; check that it runs and that LOCKGATE_REDIS_URL names it")


def test_a_database_that_does_not_answer(env: dict[str, str], closed_port: int) -> None:
    url = f"postgresql://lockgate:hunter2@127.0.0.1:{closed_port}/test"
    result = lockgate({**env, "LOCKGATE_DB_URL": url}, "runs", "list")
    assert result.returncode == 3 and result.stdout == ""
    line = _one_line(result.stderr)
    assert line.startswith(f"lockgate: the database at postgresql://lockgate:***@127.0.0.1:{closed_port}/test does "
                           "not answer ("), line
    assert "hunter2" not in line and line.endswith("LOCKGATE_DB_URL names it")


def test_a_db_url_naming_a_file_that_is_not_a_database(env: dict[str, str], tmp_path: Path) -> None:
    junk = tmp_path / "notes.db"
    junk.write_bytes(b"not a database\n")
    result = lockgate({**env, "LOCKGATE_DB_URL": f"sqlite:///{junk}"}, "runs", "list")
    assert result.returncode == 2 and result.stdout == ""
    assert _one_line(result.stderr) == (f"lockgate: LOCKGATE_DB_URL names {junk}, which is not a SQLite database "
                                        "(damaged, or another program's file); move it away or point LOCKGATE_DB_URL "
                                        "at another file")
    assert junk.read_bytes() == b"not a database\n"
