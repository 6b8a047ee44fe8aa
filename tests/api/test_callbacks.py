"""The outgoing execution.finished webhook: pushed once, HMAC-signed, to a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis

from engine.api.callbacks import CallbackSender
from engine.api.server import ApiServer
from engine.approvals.keys import create_key
from engine.config import EngineConfig
from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.transport.keys import Keyspace
from engine.triggers.settings import counters
from engine.triggers.webhooks import signature_ok
from tests.api.conftest import HELLO, QUEUED, Api, flow_doc
from tests.cli import LOCKGATE, cli_env
from tests.engine.conftest import LocalServer, QuietHandler, wait_until


class Receiver(LocalServer):
    """Records each POST; a request to a path in `gates` is answered once that gate is set (10 s at most)."""

    def __init__(self, status: int = 200) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.answered: list[tuple[str, bytes]] = []
        """(path, body) of each POST answered."""
        self.arrived: list[str] = []
        """Paths of the POSTs as they arrived, before any gate let them through."""
        self.lock = threading.Lock()
        self.gates: dict[str, threading.Event] = {}
        self.status = status
        receiver = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._gate()
                self.send_json(200, {"gate": self.path})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.arrived.append(self.path)
                self._gate()
                with receiver.lock:
                    receiver.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    receiver.answered.append((self.path, body))
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def _gate(self) -> None:
                gate = receiver.gates.get(self.path)
                if gate is not None:
                    gate.wait(10)

        super().__init__(Handler)
        self.base = self.url
        self.url += "/done"

    def gate(self, path: str) -> str:
        """A closed gate at `path`; returns its URL."""
        self.gates[path] = threading.Event()
        return self.base + path

    def wait_posts(self, api: Api, count: int) -> list[tuple[dict[str, str], bytes]]:
        """The posts once `count` came and the engine is idle (no delivery still under way)."""
        wait_until(lambda: len(self.posts) >= count, what=f"{count} posts")
        api.idle.wait()
        return list(self.posts)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def test_a_parked_run_pushes_its_end_once_signed(api: Api, receiver: Receiver) -> None:
    api.publish(QUEUED)
    answer = api.http.post("/api/v1/runs", json={"flow_id": "later", "wait": 10, "callback_url": receiver.url},
                           headers=api.headers())
    assert answer.status_code == 202
    secret = answer.json()["callback"]["secret"]
    assert receiver.posts == []
    api.clock.advance(3600)
    assert api.services.waker is not None
    api.services.waker.due.nudge()
    posts = receiver.wait_posts(api, 1)
    assert len(posts) == 1
    headers, body = posts[0]
    assert headers["x-lockgate-event"] == "execution.finished"
    assert signature_ok(body, secret, headers["x-hub-signature-256"])
    assert not signature_ok(body, secret + "x", headers["x-hub-signature-256"])
    data = orjson.loads(body)
    assert (data["event"], data["run_id"], data["status"]) == ("execution.finished", answer.json()["run_id"],
                                                               "succeeded")


def test_a_run_ending_within_the_request_pushes_once_too(api: Api, receiver: Receiver) -> None:
    api.publish(HELLO)
    for _ in range(3):
        answer = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Ada"},
                                                     "callback_url": receiver.url}, headers=api.headers())
        assert answer.status_code == 201
    posts = receiver.wait_posts(api, 3)
    assert sorted(orjson.loads(body)["run_id"] for _, body in posts) == sorted(
        run["id"] for run in api.services.list_runs(flow_id="hello"))


def test_a_refused_callback_is_retried_then_counted(api: Api, receiver: Receiver) -> None:
    receiver.status = 500
    assert api.services.triggers is not None
    api.services.triggers.callbacks.retry_delays = (0.05,)
    api.publish(HELLO)
    answer = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Ada"},
                                                 "callback_url": receiver.url}, headers=api.headers())
    assert answer.status_code == 201
    handles = api.services.handles
    assert handles is not None
    wait_until(lambda: counters(handles.client, handles.keys), what="the failed callback to be counted")
    api.idle.wait()
    assert len(receiver.posts) == 2
    assert counters(api.services.handles.client, api.services.keys) == {"callback_failed": 1}
    assert handles.client.zcard(handles.keys.run_callbacks) == 0, "a refused callback stays listed"
    assert not handles.client.exists(handles.keys.run_callback(answer.json()["run_id"]))
    bad = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Ada"},
                                              "callback_url": "ftp://x"}, headers=api.headers())
    assert bad.status_code == 422


def test_a_sender_stopped_between_attempts_leaves_the_callback_to_the_next(api: Api, receiver: Receiver) -> None:
    receiver.status = 500
    handles = api.services.require_handles()
    api.publish(QUEUED)
    run_id = api.http.post("/api/v1/runs", json={"flow_id": "later", "wait": 0, "callback_url": receiver.url},
                           headers=api.headers()).json()["run_id"]
    sender = CallbackSender(handles, retry_delays=(30.0,))
    stop = threading.Event()
    delivering = threading.Thread(target=lambda: sender.deliver(run_id, stop))
    delivering.start()
    wait_until(lambda: receiver.posts, what="the first attempt")
    stop.set()
    delivering.join(5)
    assert not delivering.is_alive()
    assert handles.client.exists(handles.keys.run_callback(run_id))
    assert not handles.client.exists(handles.keys.run_callback_claim(run_id)), "the stopped sender kept its claim"
    assert counters(handles.client, handles.keys) == {}

    receiver.status = 200
    assert sender.deliver(run_id)
    assert handles.client.zcard(handles.keys.run_callbacks) == 0


def test_the_sweep_forgets_expired_callbacks_and_waits_for_running_runs(api: Api, receiver: Receiver) -> None:
    handles = api.services.require_handles()
    api.publish(QUEUED)
    run_ids = [api.http.post("/api/v1/runs", json={"flow_id": "later", "wait": 0, "callback_url": receiver.url},
                             headers=api.headers()).json()["run_id"] for _ in range(2)]
    handles.client.delete(handles.keys.run_callback(run_ids[0]))  # as its TTL would
    sender = CallbackSender(handles)
    assert sender.sweep() == 0, "a run still waiting was queued for its callback"
    assert [member.decode() for member in handles.client.zrange(handles.keys.run_callbacks, 0, -1)] == run_ids[1:]


def _gated(flow_id: str, url: str) -> dict[str, Any]:
    return flow_doc(flow_id, [
        {"id": "start", "type": "trigger.manual"},
        {"id": "call", "type": "http.request", "config": {"method": "GET", "url": url}},
        {"id": "done", "type": "terminal"},
    ], [("start", "call"), ("call", "done")])


def _lockgate_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    worker = subprocess.Popen([*LOCKGATE, "worker", "--workers", "2"], env=env, stderr=subprocess.PIPE, text=True)
    assert worker.stderr is not None
    stream = worker.stderr
    started = threading.Event()

    def read() -> None:
        for line in stream:
            if "Ctrl-C stops" in line:
                started.set()

    threading.Thread(target=read, name="worker-stderr", daemon=True).start()
    assert started.wait(30), "lockgate worker did not start"
    return worker


def test_across_engine_processes_each_end_is_pushed_once(tmp_path: Path, redis_url: str, key_prefix: str,
                                                         receiver: Receiver) -> None:
    """The API in this process, the projector (and its sender) in a `lockgate worker`, a second one standing by.

    The projector's sender is held inside its first delivery while runs end and their callbacks are stored,
    so the API process pushes those that ended before their callback was stored and the projector's process
    comes to every run afterwards: only the Redis claim keeps either from pushing a run the other did."""
    env = cli_env(tmp_path, redis_url, key_prefix)
    client: Any = redis.Redis.from_url(redis_url)
    workers = [_lockgate_worker(env)]
    try:
        wait_until(lambda: client.get(Keyspace(key_prefix).projector_lease), what="the first engine's projector")
        workers.append(_lockgate_worker(env))
        config = EngineConfig(data_dir=tmp_path / "api", redis_url=redis_url,
                              db_url=f"sqlite:///{tmp_path / 'data' / 'lockgate.db'}", key_prefix=key_prefix)
        services = EngineServices(config, workers=0, projector=False, due_waker=False, scheduler=False,
                                  reaper=False).start()
        server = ApiServer(services, "127.0.0.1", 0).start()
        try:
            assert services.sql is not None
            headers = {"Authorization": f"Bearer {create_key(services.sql, 'tests', services.clock)}"}
            with httpx.Client(base_url=server.url, timeout=20) as http:
                api_runs = _push_through_two_processes(services, http, headers, receiver)
        finally:
            server.stop()
            services.stop()
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
            worker.wait(20)
    plug, ended, barrier = api_runs
    pushed = sorted(orjson.loads(body)["run_id"] for _, body in receiver.answered)
    assert pushed == sorted([plug, barrier, *ended])  # each run's end once, from one process or the other
    assert {path for path, _ in receiver.answered} == {"/plug", "/done", "/barrier"}


def _push_through_two_processes(services: EngineServices, http: httpx.Client, headers: dict[str, str],
                                receiver: Receiver) -> tuple[str, list[str], str]:
    """Returns the plug run, the runs ended meanwhile and the barrier run, once every push is done."""
    services.publish_flow(flow_from_data(HELLO))
    services.publish_flow(flow_from_data(_gated("plug", receiver.gate("/plug-gate"))))
    services.publish_flow(flow_from_data(_gated("barrier", receiver.gate("/barrier-gate"))))
    receiver.gate("/plug")

    def start(flow_id: str, path: str, **body: Any) -> str:
        answer = http.post("/api/v1/runs", json={"flow_id": flow_id, "callback_url": receiver.base + path, **body},
                           headers=headers)
        assert answer.status_code in (201, 202), answer.text
        return str(answer.json()["run_id"])

    plug = start("plug", "/plug", wait=0)  # stored while the run is held: the projector's process pushes it
    receiver.gates["/plug-gate"].set()
    wait_until(lambda: "/plug" in receiver.arrived, what="the projector's sender to be inside the plug push")
    with ThreadPoolExecutor(max_workers=8) as pool:  # at once, so some end before their callback is stored
        ended = list(pool.map(lambda _: start("hello", "/done", inputs={"name": "Ada"}), range(16)))
    for run_id in ended:
        assert services.wait_for_run(run_id, timeout=15)["status"] == "succeeded"
    for thread in threading.enumerate():
        if thread.name == "lockgate-callback-late":
            thread.join(15)
    assert services.triggers is not None
    pushed_here = services.triggers.callbacks.delivered
    assert receiver.arrived.count("/done") == len(pushed_here) == len(set(pushed_here))  # the standby pushed none
    print("pushed by the API process:", len(pushed_here))
    receiver.gates["/plug"].set()  # the projector's sender goes on through every run that ended meanwhile
    barrier = start("barrier", "/barrier", wait=0)
    receiver.gates["/barrier-gate"].set()
    wait_until(lambda: "/barrier" in receiver.arrived, what="the barrier run's push, the last in the sender's queue")
    wait_until(lambda: any(path == "/barrier" for path, _ in receiver.answered), what="the barrier push answered")
    return plug, ended, barrier
