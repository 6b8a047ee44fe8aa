"""`lockgate worker --processes N --http HOST:PORT --http-processes K`: the HTTP API in http child processes of
its own, sharing the one listening socket the supervisor bound. Real supervisor, children, Redis and SQLite."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.publish import publish
from engine.runtime.supervisor import layout
from engine.store.db import open_store
from tests.cli import LOCKGATE, cli_env, lockgate
from tests.engine.test_process_layout import FLOW, HANG_GUARD_S, alive, children_of, wait_until

ROLES = ("executor", "projector", "http")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def role_pids(supervisor: int) -> dict[str, list[int]]:
    roles: dict[str, list[int]] = {role: [] for role in ROLES}
    for pid, command in children_of(supervisor).items():
        for role in ROLES:
            if f"--role {role}" in command:
                roles[role].append(pid)
    return roles


@dataclass
class HttpLayout:
    process: subprocess.Popen[bytes]
    base: str
    key: str

    def roles(self) -> dict[str, list[int]]:
        return role_pids(self.process.pid)

    def start_run(self, n: int) -> httpx.Response:
        """POST /api/v1/runs with `wait` on a fresh connection (no keep-alive: each may land on either child)."""
        return httpx.post(f"{self.base}/api/v1/runs", json={"flow_id": "layout", "inputs": {"n": n}, "wait": 30},
                          headers={"Authorization": f"Bearer {self.key}"}, timeout=HANG_GUARD_S)


def published_with_key(tmp_path: Path, redis_url: str, key_prefix: str) -> tuple[dict[str, str], str]:
    """The CLI's environment over a fresh data folder with the layout flow published, and an API key."""
    data = tmp_path / "data"
    data.mkdir()
    sql = open_store(EngineConfig(data_dir=data, redis_url=redis_url, key_prefix=key_prefix))
    publish(sql, flow_from_data(FLOW))
    sql.dispose()
    env = cli_env(tmp_path, redis_url, key_prefix)
    made = lockgate(env, "keys", "create", "layout")
    assert made.returncode == 0, made.stderr
    return env, made.stdout.strip()


@pytest.fixture
def http_layout(tmp_path: Path, redis_url: str, key_prefix: str) -> Iterator[HttpLayout]:
    env, key = published_with_key(tmp_path, redis_url, key_prefix)
    port = free_port()
    process = subprocess.Popen([*LOCKGATE, "worker", "--processes", "1", "--workers", "1",
                                "--http", f"127.0.0.1:{port}", "--http-processes", "2"], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: [len(pids) for pids in role_pids(process.pid).values()] == [1, 1, 2],
                   "the supervisor's children did not all start")
        yield HttpLayout(process, f"http://127.0.0.1:{port}", key)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(HANG_GUARD_S)


def test_layout_gives_each_http_child_one_of_the_supervisors_sockets() -> None:
    specs = layout(2, 3, ("lg",), [7, 8])
    assert [spec.name for spec in specs] == ["executor-0", "executor-1", "projector", "http-0", "http-1"]
    assert specs[2].argv == ("lg", "worker", "--role", "projector")
    assert specs[3].argv == ("lg", "worker", "--role", "http", "--http-fd", "7")
    assert [spec.pass_fds for spec in specs] == [(), (), (), (7,), (8,)]
    assert [spec.name for spec in layout(1, 1, ("lg",))] == ["executor-0", "projector"]


def test_a_sync_start_through_two_http_children_answers_201_with_the_result(http_layout: HttpLayout) -> None:
    answer = http_layout.start_run(21)
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"] == "succeeded" and answer.json()["result"] == 42
    roles = http_layout.roles()
    assert len(roles["http"]) == 2 and all(alive(pid) for pid in roles["http"])
    [projector] = roles["projector"]
    assert "--http" not in Path(f"/proc/{projector}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_a_killed_http_child_is_restarted_and_the_other_answers_meanwhile(http_layout: HttpLayout) -> None:
    assert http_layout.start_run(1).status_code == 201
    victim, survivor = http_layout.roles()["http"]
    os.kill(victim, signal.SIGKILL)
    answered: list[int] = []
    deadline = time.monotonic() + HANG_GUARD_S
    while victim in http_layout.roles()["http"] or len(http_layout.roles()["http"]) < 2 or not answered:
        assert time.monotonic() < deadline, "hang guard: the killed http child was not replaced"
        answer = http_layout.start_run(len(answered))
        assert answer.status_code == 201, answer.text
        answered.append(answer.json()["result"])
    assert answered == [n * 2 for n in range(len(answered))]
    assert alive(survivor) and survivor in http_layout.roles()["http"]
    results = [http_layout.start_run(n) for n in range(10, 16)]
    assert [(r.status_code, r.json()["result"]) for r in results] == [(201, n * 2) for n in range(10, 16)]


def test_sigterm_stops_the_supervisor_and_its_http_children_within_10_s(http_layout: HttpLayout) -> None:
    assert http_layout.start_run(3).status_code == 201
    tree = [pid for pids in http_layout.roles().values() for pid in pids]
    assert len(tree) == 4
    http_layout.process.send_signal(signal.SIGTERM)
    assert http_layout.process.wait(10) == 0
    assert [pid for pid in tree if alive(pid)] == []
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{http_layout.base}/api/v1/runs", timeout=2)


def test_a_taken_port_fails_at_once_with_exit_2(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env = cli_env(tmp_path, redis_url, key_prefix)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = lockgate(env, "worker", "--processes", "1", "--http", f"127.0.0.1:{port}", "--http-processes", "2")
    assert done.returncode == 2, done.stderr
    assert f"cannot serve HTTP on 127.0.0.1:{port}" in done.stderr and "pick a free port" in done.stderr
    assert "Traceback" not in done.stderr and "supervising" not in done.stderr


@pytest.mark.parametrize("args", [["--http-processes", "2"],
                                  ["--processes", "1", "--http-processes", "2"],
                                  ["--processes", "1", "--http", "127.0.0.1:1", "--http-processes", "0"],
                                  ["--http", "127.0.0.1:1", "--http-processes", "0"],
                                  ["--role", "executor", "--http", "127.0.0.1:1", "--http-processes", "1"],
                                  ["--role", "http"]])
def test_http_processes_needs_http_and_at_least_one(tmp_path: Path, redis_url: str, key_prefix: str,
                                                 args: list[str]) -> None:
    done = lockgate(cli_env(tmp_path, redis_url, key_prefix), "worker", *args)
    assert done.returncode == 2, done.stderr
    assert "needs" in done.stderr and "Traceback" not in done.stderr


def test_serve_with_processes_runs_the_same_layout_under_its_own_name(tmp_path: Path, redis_url: str,
                                                                     key_prefix: str) -> None:
    env, key = published_with_key(tmp_path, redis_url, key_prefix)
    port = free_port()
    said = _serve_one_start(env, port, key, "--processes", "1", "--http-processes", "2", roles=[1, 1, 2])
    assert "lockgate serve: supervising 1 executor process(es) of 1 worker thread(s), one projector process, " \
           f"2 http process(es) serving http://127.0.0.1:{port} (pids" in said
    assert "lockgate serve: stopped" in said and "Traceback" not in said


def _serve_one_start(env: dict[str, str], port: int, key: str, *args: str, roles: list[int]) -> str:
    """`lockgate serve --port PORT --workers 1 ARGS`: once its processes per role (executor, projector, http) are
    `roles` and it answers, one sync start (5 → 10), then SIGTERM and a clean exit; returns what it said on stderr."""
    process = subprocess.Popen([*LOCKGATE, "serve", "--port", str(port), "--workers", "1", *args], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: [len(pids) for pids in role_pids(process.pid).values()] == roles,
                   "serve's children did not all start")
        served = HttpLayout(process, f"http://127.0.0.1:{port}", key)
        wait_until(lambda: _answers(served.base), "serve's http children did not answer")
        answer = served.start_run(5)
        assert answer.status_code == 201, answer.text
        assert answer.json()["result"] == 10
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
        assert process.stderr is not None
        return process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(HANG_GUARD_S)


def _answers(base: str) -> bool:
    try:
        httpx.get(f"{base}/api/v1/runs", timeout=2)
    except httpx.TransportError:
        return False
    return True


@pytest.mark.parametrize("args", [["--http-processes", "0"], ["--processes", "1", "--http-processes", "0"],
                                  ["--processes", "0"]])
def test_serve_refuses_fewer_than_one_process(tmp_path: Path, redis_url: str, key_prefix: str,
                                                        args: list[str]) -> None:
    done = lockgate(cli_env(tmp_path, redis_url, key_prefix), "serve", "--port", "0", *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("lockgate serve: --") and "Traceback" not in done.stderr


def test_serve_with_processes_on_a_taken_port_names_its_own_option(tmp_path: Path, redis_url: str,
                                                                  key_prefix: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = lockgate(cli_env(tmp_path, redis_url, key_prefix), "serve", "--port", str(port), "--processes", "1")
    assert done.returncode == 2, done.stderr
    assert f"lockgate serve: cannot serve HTTP on 127.0.0.1:{port}" in done.stderr and "--port" in done.stderr


def _drain(listening: socket.socket) -> int:
    """Accept every connection queued on `listening`; how many there were."""
    listening.setblocking(False)
    count = 0
    while True:
        try:
            conn, _ = listening.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


def test_the_http_childrens_sockets_share_one_port_and_the_kernel_spreads_connections_over_them() -> None:
    from engine.api.listener import listen_sockets

    group = listen_sockets("127.0.0.1", 0, 2)
    try:
        port = group[0].getsockname()[1]
        assert len({sock.fileno() for sock in group}) == 2 and group[1].getsockname()[1] == port
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
        time.sleep(0.2)  # every handshake is done and queued on one of the two backlogs
        accepted = [_drain(sock) for sock in group]
        for client in clients:
            client.close()
        assert sum(accepted) == 40 and min(accepted) > 0, accepted
        with pytest.raises(OSError):  # a second group on the same port is refused, not given half the connections
            listen_sockets("127.0.0.1", port, 2)
    finally:
        for sock in group:
            sock.close()


def test_callback_links_made_by_an_executor_name_the_port_the_http_children_serve(
        http_layout: HttpLayout, tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    flow = tmp_path / "callback.flow.json"
    flow.write_text(json.dumps({
        "format": "lockgate.flow/1", "id": "callback", "name": "callback", "inputs": {},
        "nodes": [{"id": "start", "type": "trigger.manual"},
                  {"id": "announce", "type": "set", "config": {"values": {"resume_at": "{{ callback_url('wait') }}"}}},
                  {"id": "wait", "type": "wait.callback", "config": {"timeout": "1h", "output_key": "reply"}},
                  {"id": "done", "type": "terminal", "config": {"output": "{{ state.reply.status }}"}}],
        "edges": [{"from": "start", "to": "announce"}, {"from": "announce", "to": "wait"},
                  {"from": "wait", "port": "received", "to": "done"}]}))
    env = cli_env(tmp_path, redis_url, key_prefix)
    env.pop("LOCKGATE_PUBLIC_URL", None)
    env.pop("LOCKGATE_HTTP_URL", None)
    assert lockgate(env, "publish", str(flow)).returncode == 0
    headers = {"Authorization": f"Bearer {http_layout.key}"}
    parked = httpx.post(f"{http_layout.base}/api/v1/runs", json={"flow_id": "callback", "wait": 30}, headers=headers,
                        timeout=HANG_GUARD_S)
    assert parked.status_code == 202, parked.text
    run = httpx.get(f"{http_layout.base}/api/v1/runs/{parked.json()['run_id']}", headers=headers, timeout=HANG_GUARD_S)
    link = run.json()["state"]["resume_at"]
    assert link.startswith(f"{http_layout.base}/callbacks/"), link
    resumed = httpx.post(link, json={"status": "shipped"}, timeout=HANG_GUARD_S)
    assert resumed.status_code == 200 and resumed.json()["status"] == "resumed", resumed.text


@pytest.fixture
def engine_with_http_children(tmp_path: Path, redis_url: str, key_prefix: str) -> Iterator[HttpLayout]:
    """`lockgate worker --http HOST:PORT --http-processes 2` without `--processes`: the engine in the worker's
    own process, the API in two http children of it."""
    env, key = published_with_key(tmp_path, redis_url, key_prefix)
    port = free_port()
    process = subprocess.Popen([*LOCKGATE, "worker", "--workers", "1", "--http", f"127.0.0.1:{port}",
                                "--http-processes", "2"], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: [len(pids) for pids in role_pids(process.pid).values()] == [0, 0, 2],
                   "the worker's http children did not start")
        served = HttpLayout(process, f"http://127.0.0.1:{port}", key)
        wait_until(lambda: _answers(served.base), "the worker's http children did not answer")
        yield served
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(HANG_GUARD_S)


def test_an_engine_with_http_children_runs_the_engine_itself_and_answers_through_them(
        engine_with_http_children: HttpLayout) -> None:
    served = engine_with_http_children
    results = [served.start_run(n) for n in range(6)]
    assert [(r.status_code, r.json()["result"]) for r in results] == [(201, n * 2) for n in range(6)]
    command = Path(f"/proc/{served.process.pid}/cmdline").read_bytes().split(b"\0")
    assert b"--role" not in command  # the engine runs in the worker itself, not in a child
    assert all(alive(pid) for pid in served.roles()["http"])


def test_a_killed_http_child_of_an_engine_is_restarted_and_sigterm_stops_them_all(
        engine_with_http_children: HttpLayout) -> None:
    served = engine_with_http_children
    victim, survivor = served.roles()["http"]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in served.roles()["http"] and len(served.roles()["http"]) == 2,
               "the killed http child was not replaced")
    assert served.start_run(4).json()["result"] == 8
    tree = served.roles()["http"]
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(10) == 0
    assert [pid for pid in [*tree, survivor] if alive(pid)] == []


def test_serve_with_http_processes_alone_keeps_the_engine_and_serves_from_children(
        tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    env, key = published_with_key(tmp_path, redis_url, key_prefix)
    port = free_port()
    said = _serve_one_start(env, port, key, "--http-processes", "1", roles=[0, 0, 1])
    assert f"lockgate serve: HTTP API and webhooks on http://127.0.0.1:{port}, served by 1 http process(es)" in said
    assert "lockgate serve: stopped" in said and "Traceback" not in said
