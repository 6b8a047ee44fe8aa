"""The app's provider simulator: its preferred port when free, a free one when a foreign server holds it,
reused when our own simulator answers there; providers.json's `local` entry says where it is."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from app.engine_process import (
    SIMULATOR_HOST,
    SIMULATOR_PORT,
    SIMULATOR_PORT_VARIABLE,
    SimulatorProcess,
    is_our_simulator,
    preferred_simulator_port,
)
from app.provider_file import SIMULATOR_MANAGER
from engine.providers.config import simulator_provider
from engine.providers.registry import PROVIDERS_FILE, providers_in, save_providers
from engine.providers.simulator import ProviderSimulator


class _Foreign(BaseHTTPRequestHandler):
    """Some other program's HTTP server: it answers every path, with something that is not our simulator."""

    def do_GET(self) -> None:
        body = b'{"data": [{"id": "gpt-x", "owned_by": "someone-else"}]}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def foreign_port() -> Iterator[int]:
    """A foreign server on 8765; on another port when something already holds 8765 (the test's premise holds
    either way: the simulator's preferred port is taken by a server that is not ours)."""
    try:
        server = ThreadingHTTPServer((SIMULATOR_HOST, SIMULATOR_PORT), _Foreign)
    except OSError as exc:
        assert exc.errno == errno.EADDRINUSE, exc
        server = ThreadingHTTPServer((SIMULATOR_HOST, 0), _Foreign)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def local_entry(data_dir: Path) -> tuple[str, str]:
    local = next(p for p in providers_in(data_dir) if p.name == "local")
    return local.connections[0].base_url, local.managed_by


def test_a_foreign_server_on_the_port_is_not_taken_for_the_simulator(tmp_path: Path, foreign_port: int) -> None:
    assert not is_our_simulator(SIMULATOR_HOST, foreign_port)
    simulator = SimulatorProcess(tmp_path, preferred_port=foreign_port).start()
    try:
        assert simulator.wanted and not simulator.reused and simulator.process is not None
        port = port_of(simulator.url)
        assert port != foreign_port
        assert is_our_simulator(SIMULATOR_HOST, port)
        assert local_entry(tmp_path) == (simulator.url, SIMULATOR_MANAGER)
        answer = httpx.post(f"{simulator.url}/chat/completions", timeout=5.0, json={
            "model": "sim-small", "messages": [{"role": "user", "content": "hi"}]})
        assert answer.status_code == 200 and answer.json()["choices"]
        # A later start with the same data folder rewrites the entry it made (a new port each time is fine).
        simulator.stop()
        again = SimulatorProcess(tmp_path, preferred_port=foreign_port).start()
        assert again.wanted and local_entry(tmp_path) == (again.url, SIMULATOR_MANAGER)
        again.stop()
    finally:
        simulator.stop()


def test_our_own_simulator_on_the_port_is_reused(tmp_path: Path) -> None:
    with ProviderSimulator(port=0) as ours:
        simulator = SimulatorProcess(tmp_path, preferred_port=ours.port).start()
        assert simulator.reused and simulator.process is None
        assert local_entry(tmp_path) == (ours.url, SIMULATOR_MANAGER)


def test_a_free_preferred_port_is_used(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind((SIMULATOR_HOST, 0))
        free = int(probe.getsockname()[1])
    simulator = SimulatorProcess(tmp_path, preferred_port=free).start()
    try:
        assert simulator.url == f"http://{SIMULATOR_HOST}:{free}/v1" and is_our_simulator(SIMULATOR_HOST, free)
    finally:
        simulator.stop()


def test_a_local_provider_of_the_users_is_left_alone(tmp_path: Path, foreign_port: int) -> None:
    mine = simulator_provider(f"http://{SIMULATOR_HOST}:{foreign_port}/v1")
    save_providers(tmp_path / PROVIDERS_FILE, [mine])
    before = (tmp_path / PROVIDERS_FILE).read_bytes()
    simulator = SimulatorProcess(tmp_path, preferred_port=foreign_port).start()
    assert not simulator.wanted and simulator.process is None
    assert (tmp_path / PROVIDERS_FILE).read_bytes() == before


def test_the_preferred_port_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SIMULATOR_PORT_VARIABLE)
    assert preferred_simulator_port() == SIMULATOR_PORT == 8765
    monkeypatch.setenv(SIMULATOR_PORT_VARIABLE, "18765")
    assert preferred_simulator_port() == 18765
    assert SimulatorProcess(Path("unused")).preferred_port == 18765
    for bad in ("0", "65536", "port", "-1"):
        monkeypatch.setenv(SIMULATOR_PORT_VARIABLE, bad)
        with pytest.raises(ValueError, match=SIMULATOR_PORT_VARIABLE):
            preferred_simulator_port()
