"""The outgoing execution.finished webhook: pushed once, HMAC-signed, to a real HTTP receiver on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from engine.triggers.settings import counters
from engine.triggers.webhooks import signature_ok
from tests.api.conftest import HELLO, QUEUED, Api
from tests.engine.conftest import LocalServer, QuietHandler, wait_until


class Receiver(LocalServer):
    def __init__(self, status: int = 200) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.status = status
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

        super().__init__(Handler)
        self.url += "/done"

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
    bad = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Ada"},
                                              "callback_url": "ftp://x"}, headers=api.headers())
    assert bad.status_code == 422
