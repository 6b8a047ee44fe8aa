"""Engine fixtures: real Redis (the machine's or embedded), real SQLite/PostgreSQL, a real HTTP server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.clock import Clock
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices


def make_flow(flow_id: str, nodes: list[dict[str, Any]], edges: list[tuple[str, str] | tuple[str, str, str]],
              inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    """A flow document from short node and edge lists (edges: (from, to) or (from, port, to))."""
    return {
        "format": "lockgate.flow/1",
        "id": flow_id,
        "name": flow_id,
        "inputs": inputs or {},
        "nodes": [{"config": {}, **node} for node in nodes],
        "edges": [{"from": e[0], "to": e[1]} if len(e) == 2 else {"from": e[0], "port": e[1], "to": e[2]}
                  for e in edges],
    }


class Engine:
    """Started services plus helpers to run a flow document to its end."""

    def __init__(self, services: EngineServices, sleeps: list[float]) -> None:
        self.services = services
        self.sleeps = sleeps

    def run(self, document: dict[str, Any], inputs: dict[str, Any] | None = None,
            timeout: float = 15.0) -> dict[str, Any]:
        self.services.publish_flow(flow_from_data(document))
        created = self.services.create_run(document["id"], inputs or {})
        return self.services.wait_for_run(created.run_id, timeout=timeout)

    def step(self, run: dict[str, Any], step: str) -> dict[str, Any]:
        return next(s for s in run["steps"] if s["step"] == step)


def start_engine(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str, clock: Clock | None = None,
                 workers: int = 2, **options: Any) -> tuple[EngineServices, list[float]]:
    sleeps: list[float] = []
    config = EngineConfig(data_dir=tmp_path / "data", redis_url=redis_url, db_url=db_url, key_prefix=key_prefix)
    options.setdefault("block_ms", 100)
    services = EngineServices(config, clock=clock, workers=workers, sleep=sleeps.append, **options)
    return services.start(), sleeps


def _engine(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> Iterator[Engine]:
    services, sleeps = start_engine(tmp_path, redis_url, db_url, key_prefix)
    try:
        yield Engine(services, sleeps)
    finally:
        services.stop()


@pytest.fixture
def engine(tmp_path: Path, redis_url: str, sqlite_url: str, key_prefix: str) -> Iterator[Engine]:
    """Engine services on the machine's Redis and a fresh SQLite file."""
    yield from _engine(tmp_path, redis_url, sqlite_url, key_prefix)


@pytest.fixture
def any_db_engine(tmp_path: Path, redis_url: str, db_url: str, key_prefix: str) -> Iterator[Engine]:
    """Engine services on SQLite, and again on PostgreSQL where one answers."""
    yield from _engine(tmp_path, redis_url, db_url, key_prefix)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers JSON."""

    def log_message(self, *args: Any) -> None:
        pass

    def send_json(self, status: int, data: Any) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class LocalServer:
    """A real threaded HTTP server on 127.0.0.1 (a free port) serving `handler` until close()."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Site(LocalServer):
    """A real HTTP server on 127.0.0.1 with a few behaviours the tests need."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.release.set()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                path = self.path.split("?")[0]
                with site.lock:
                    site.hits[path] = site.hits.get(path, 0) + 1
                    count = site.hits[path]
                    site.in_flight += 1
                    site.max_in_flight = max(site.max_in_flight, site.in_flight)
                try:
                    length = int(self.headers.get("content-length") or 0)
                    body = self.rfile.read(length).decode() if length else ""
                    if path.startswith("/slow"):
                        time.sleep(0.15)
                    if path.startswith("/hold"):
                        site.release.wait(10)
                    if path == "/fail":
                        self.send_json(503, {"error": "down"})
                    elif path == "/flaky" and count < 3:
                        self.send_json(500, {"error": f"attempt {count}"})
                    else:
                        self.send_json(200, {"path": self.path, "body": body,
                                             "auth": self.headers.get("authorization"), "count": count})
                finally:
                    with site.lock:
                        site.in_flight -= 1

        super().__init__(Handler)

    def close(self) -> None:
        self.release.set()
        super().close()


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site()
    try:
        yield server
    finally:
        server.close()


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
