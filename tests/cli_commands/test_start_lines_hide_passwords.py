"""`lockgate worker` (in one process, or supervising `--processes`) names its Redis and database when it starts,
on stderr and in its log file, with their passwords shown as `***`."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from engine.shown_urls import shown_url
from tests.cli import LOCKGATE, cli_env
from tests.fixtures import PG_ADMIN_URL, own_pg_database

SECRET = "hunter2-" + uuid.uuid4().hex[:8]
START_GUARD_SECONDS = 60


def _with_user(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{parts.netloc.rpartition('@')[2]}"))


@pytest.fixture
def redis_user_url(redis_url: str) -> Iterator[tuple[str, str]]:
    """The tests' Redis through an ACL user of this test alone with password SECRET: (its URL, the user)."""
    client = redis.Redis.from_url(redis_url)
    user = f"lgtest_{uuid.uuid4().hex[:12]}"
    client.acl_setuser(user, enabled=True, passwords=[f"+{SECRET}"], keys=["*"], channels=["*"],
                       commands=["+@all"])
    try:
        yield _with_user(redis_url, user, SECRET), user
    finally:
        client.acl_deluser(user)
        client.close()


def _started_worker(env: dict[str, str], *options: str) -> str:
    """Start `lockgate worker *options`, stop it with SIGTERM once it says it runs; everything it wrote to stderr."""
    process = subprocess.Popen([*LOCKGATE, "worker", "--workers", "1", *options], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen: list[str] = []
    try:
        for line in process.stderr:  # ends at the process's end, so a refusal is not waited on forever
            seen.append(line)
            if "Ctrl-C stops" in line or "stop them with Ctrl-C" in line:
                process.send_signal(signal.SIGTERM)
                break
        seen.append(process.stderr.read())
        assert process.wait(START_GUARD_SECONDS) == 0, "".join(seen)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return "".join(seen)


def _logged(log_dir: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in log_dir.rglob("*") if path.is_file())


def test_the_worker_shows_its_redis_url_without_the_password(tmp_path: Path, redis_user_url: tuple[str, str],
                                                             key_prefix: str) -> None:
    url, user = redis_user_url
    env = cli_env(tmp_path, url, key_prefix, LOCKGATE_LOG_DIR=str(tmp_path / "logs"))
    stderr = _started_worker(env)
    assert SECRET not in stderr and SECRET not in _logged(tmp_path / "logs")
    start = next(line for line in stderr.splitlines() if "Ctrl-C stops" in line)
    assert f"{user}:***@" in start, start
    assert f"{user}:***@" in _logged(tmp_path / "logs")


def test_the_supervisor_shows_its_redis_url_without_the_password(tmp_path: Path, redis_user_url: tuple[str, str],
                                                                 key_prefix: str) -> None:
    url, user = redis_user_url
    env = cli_env(tmp_path, url, key_prefix, LOCKGATE_LOG_DIR=str(tmp_path / "logs"))
    stderr = _started_worker(env, "--processes", "1")
    assert SECRET not in stderr and SECRET not in _logged(tmp_path / "logs")
    start = next(line for line in stderr.splitlines() if "stop them with Ctrl-C" in line)
    assert f"{user}:***@" in start, start


def test_the_worker_shows_its_database_url_without_the_password(tmp_path: Path, redis_url: str,
                                                                key_prefix: str) -> None:
    with own_pg_database() as database_url:
        # The tests' server trusts local connections, so any password is accepted and must not be shown.
        user = urlsplit(PG_ADMIN_URL).username or "postgres"
        db_url = _with_user(database_url, user, SECRET)
        env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=db_url, LOCKGATE_AUTO_MIGRATE="1",
                      LOCKGATE_LOG_DIR=str(tmp_path / "logs"))
        stderr = _started_worker(env)
    assert SECRET not in stderr and SECRET not in _logged(tmp_path / "logs")
    start = next(line for line in stderr.splitlines() if "Ctrl-C stops" in line)
    assert f"SQL {_with_user(database_url, user, '***')}," in start, start


@pytest.mark.parametrize(("url", "shown"), [
    ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
    ("rediss://ada:p@ss%2Fw@h/1?ssl_cert_reqs=none", "rediss://ada:***@h/1?ssl_cert_reqs=none"),
    ("unix://ada@/run/redis.sock?db=0&password=pw", "unix://ada@/run/redis.sock?db=0&password=***"),
    ("postgresql+psycopg://lockgate:pw@db:5432/lockgate", "postgresql+psycopg://lockgate:***@db:5432/lockgate"),
    ("sqlite:////srv/lockgate.db", "sqlite:////srv/lockgate.db"),
    ("redis://ada:pw@[::1/0", "redis://***@[::1/0"),
])
def test_shown_url_hides_every_password_form(url: str, shown: str) -> None:
    assert shown_url(url) == shown
