"""Protocol faults against the real server on 127.0.0.1, over raw sockets: every refusal is a JSON error with a
4xx status, never a reset, a hang, a 5xx or an HTML page, and nothing reaches the engine."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from engine.api.server import MAX_BODY_BYTES, ApiServer, ServerLimits
from tests.api.conftest import APPROVAL, HELLO, Api, flow_doc
from tests.api.raw_http import Answer, chunked, closed_by_server, connect, exchange, read_answer, request
from tests.engine.conftest import Site, wait_until

BURST = 300


def _post_runs(api: Api, body: bytes, extra: dict[str, str] | None = None, length: bool = True) -> bytes:
    headers = {"Authorization": f"Bearer {api.key}", "Content-Type": "application/json", **(extra or {})}
    return request("POST", "/api/v1/runs", headers=headers, body=body, length=length)


@pytest.fixture
def impatient(api: Api) -> Iterator[ApiServer]:
    """A second server on the same engine whose requests must arrive whole within 0.3 s."""
    server = ApiServer(api.services, "127.0.0.1", 0, limits=ServerLimits(read_timeout=0.3, keep_alive_timeout=1))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_burst_of_concurrent_decisions_is_answered_without_resets(api: Api) -> None:
    api.publish(APPROVAL)
    run_id = api.services.create_run("ask", {}).run_id
    pending = wait_until(lambda: api.http.get("/api/v1/approvals", headers=api.headers()).json()["approvals"],
                         what="the approval")
    approval_id = pending[0]["id"]
    sockets = [connect(api.server.url) for _ in range(BURST)]  # all connected before any request is sent
    raw = request("POST", f"/api/v1/approvals/{approval_id}/decision",
                  headers={"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"},
                  body=b'{"decision": "approve"}')

    def decide(sock: socket.socket) -> Answer:
        with sock:
            sock.sendall(raw)
            return read_answer(sock)

    with ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(decide, sockets))
    statuses = sorted(answer.status for answer in answers)
    assert statuses == [200] + [409] * (BURST - 1)
    assert {answer.error_code() for answer in answers if answer.status == 409} == {"already_decided"}
    assert api.services.wait_for_run(run_id, timeout=20)["result"] == "approved"


def test_a_half_sent_request_line_is_cut_off_with_408(impatient: ApiServer) -> None:
    with connect(impatient.url) as sock:
        sock.sendall(b"GET /api/v1/ru")
        answer = closed_by_server(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert b'"code":"read_timeout"' in answer


def test_a_silent_connection_and_a_stalled_body_are_closed(impatient: ApiServer, api: Api) -> None:
    with connect(impatient.url) as sock:
        assert closed_by_server(sock).startswith(b"HTTP/1.1 408 ")
    api.publish(HELLO)
    with connect(impatient.url) as sock:
        sock.sendall(_post_runs(api, b"", {"Content-Length": "100"}, length=False) + b'{"flow_id": "hel')
        answer = closed_by_server(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert api.services.list_runs() == []


def test_an_idle_keep_alive_connection_is_closed(impatient: ApiServer, api: Api) -> None:
    with connect(impatient.url) as sock:
        sock.sendall(request("GET", "/api/v1/runs", headers={"Authorization": f"Bearer {api.key}"}))
        assert read_answer(sock).status == 200
        assert closed_by_server(sock) == b""


@pytest.mark.parametrize("length", ["-1", "abc", "1e3", "18446744073709551617"])
def test_a_bad_content_length_is_a_400(api: Api, length: str) -> None:
    api.publish(HELLO)
    body = orjson.dumps({"flow_id": "hello", "inputs": {"name": "x" * (MAX_BODY_BYTES + 10)}})
    answer = exchange(api.server.url, _post_runs(api, b"", {"Content-Length": length}, length=False) + body)
    assert answer.status == 400 and answer.error_code() == "bad_request"
    assert api.services.list_runs() == []


def test_content_length_with_chunked_and_two_lengths_are_refused(api: Api) -> None:
    api.publish(HELLO)
    body = b'{"flow_id": "hello", "inputs": {"name": "Ada"}}'
    both = exchange(api.server.url, _post_runs(api, b"", {"Content-Length": str(len(body)),
                                                           "Transfer-Encoding": "chunked"}, length=False)
                    + chunked(body))
    assert both.status == 400 and both.error_code() == "bad_request"
    two = exchange(api.server.url, _post_runs(api, b"", {"Content-Length": str(len(body)),
                                                          "content-length": "5"}, length=False) + body)
    assert two.status == 400 and two.error_code() == "bad_request"
    assert api.services.list_runs() == []


def test_bodies_over_the_limit_are_413_whatever_the_framing(api: Api) -> None:
    api.publish(HELLO)
    body = orjson.dumps({"flow_id": "hello", "inputs": {"name": "x" * (MAX_BODY_BYTES + 10)}})
    declared = exchange(api.server.url, _post_runs(api, body))
    assert declared.status == 413 and declared.error_code() == "too_large"
    streamed = exchange(api.server.url, _post_runs(api, b"", {"Transfer-Encoding": "chunked"}, length=False)
                        + chunked(body))
    assert streamed.status == 413 and streamed.error_code() == "too_large"
    # A length shorter than what follows: the body is the declared bytes, the rest is no request.
    with connect(api.server.url) as sock:
        sock.sendall(_post_runs(api, b"", {"Content-Length": "16"}, length=False) + body[:4096])
        answered = closed_by_server(sock)
    # The request's own answer first, then the refusal of what followed it, and the connection closes.
    assert answered.startswith(b"HTTP/1.1 400 ")
    first, second = answered.split(b"\r\n\r\n{")[1:]
    assert first.startswith(b'"error":{"code":"bad_json"') and b"}}HTTP/1.1 400 Bad Request\r\n" in first
    assert second.startswith(b'"error":{"code":"bad_request"')
    assert api.services.list_runs() == []


def test_out_of_range_numbers_and_deep_bodies_are_4xx(api: Api) -> None:
    api.publish(HELLO)
    api.publish(flow_doc("echo", [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}],
                         [("start", "done")], {"data": {"type": "any"}}))
    huge = exchange(api.server.url, _post_runs(api, b'{"flow_id": "hello", "inputs": {"name": "x"}, '
                                                    b'"version": 9223372036854775808}'))
    assert huge.status == 422 and huge.error_code() == "bad_request"
    assert "version" in orjson.loads(huge.body)["error"]["message"]
    deep_inputs = exchange(api.server.url, _post_runs(api, b'{"flow_id": "echo", "inputs": {"data": '
                                                           + b"[" * 300 + b"]" * 300 + b"}}"))
    assert deep_inputs.status == 422 and deep_inputs.error_code() == "refused_inputs"
    for depth in (300, 100_000):
        deep = exchange(api.server.url, _post_runs(api, b"[" * depth + b"]" * depth))
        assert deep.status == 400 and deep.error_code() == "bad_json"
    nan = exchange(api.server.url, _post_runs(api, b'{"flow_id": "hello", "inputs": {"name": "x"}, "wait": NaN}'))
    assert 400 <= nan.status < 500 and nan.error_code() in ("bad_json", "bad_request")
    assert api.services.list_runs() == []


@pytest.mark.parametrize(("method", "status"), [("PATCH", 405), ("OPTIONS", 405), ("PUT", 405), ("DELETE", 405),
                                                ("BREW", 400), ("GETT", 400)])
def test_other_methods_get_json_errors(api: Api, method: str, status: int) -> None:
    answer = exchange(api.server.url, request(method, "/api/v1/runs", headers={"Authorization": f"Bearer {api.key}"}))
    assert answer.status == status
    assert answer.error_code() == ("method_not_allowed" if status == 405 else "bad_request")


def test_head_is_a_json_405_naming_the_methods(api: Api) -> None:
    answer = exchange(api.server.url, request("HEAD", "/api/v1/runs", headers={"Authorization": f"Bearer {api.key}"}),
                      head=True)
    assert answer.status == 405
    assert answer.headers["content-type"] == "application/json"
    assert "POST" in answer.headers["allow"]


def test_a_long_url_is_414_and_many_headers_431(api: Api) -> None:
    long_url = exchange(api.server.url, request("GET", "/api/v1/runs?flow_id=" + "a" * 20_000))
    assert long_url.status == 414 and long_url.error_code() == "uri_too_long"
    many = exchange(api.server.url, request("GET", "/api/v1/runs", headers={f"X-H{i}": "v" for i in range(150)}))
    assert many.status == 431 and many.error_code() == "headers_too_large"
    one_big = exchange(api.server.url, request("GET", "/api/v1/runs", headers={"X-Big": "v" * 200_000}))
    assert one_big.status == 431 and one_big.error_code() == "headers_too_large"


@pytest.mark.parametrize("line", [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", b"hello\r\n\r\n",
                                  b"GET / HTTP/9.9\r\n\r\n", b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
                                  b"GET / HTTP/1.1\r\nbad header\r\n\r\n"])
def test_garbage_is_a_json_400(api: Api, line: bytes) -> None:
    answer = exchange(api.server.url, line)
    assert answer.status == 400 and answer.error_code() == "bad_request"


def test_unknown_routes_and_methods_are_json_404_and_405(api: Api) -> None:
    missing = exchange(api.server.url, request("GET", "/nowhere"))
    assert missing.status == 404 and missing.error_code() == "not_found"
    webhook_get = exchange(api.server.url, request("GET", "/webhooks/whk_x"))
    assert webhook_get.status == 405 and webhook_get.error_code() == "method_not_allowed"
    assert webhook_get.headers["allow"] == "POST"


def test_a_waiting_request_does_not_hold_up_the_others(api: Api, site: Site) -> None:
    site.release.clear()
    api.publish(flow_doc("held", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/hold"}},
        {"id": "done", "type": "terminal"},
    ], [("start", "call"), ("call", "done")]))
    answers: list[Answer] = []
    waiting = threading.Thread(target=lambda: answers.append(exchange(api.server.url, _post_runs(
        api, b'{"flow_id": "held", "wait": 30}'))))
    waiting.start()
    try:
        wait_until(lambda: site.hits.get("/hold") == 1, what="the run to be inside its call")
        for _ in range(20):  # answered while the first request is still open
            assert exchange(api.server.url, request("GET", "/api/v1/runs",
                                                    headers={"Authorization": f"Bearer {api.key}"})).status == 200
        assert answers == []
    finally:
        site.release.set()
        waiting.join(30)
    assert [answer.status for answer in answers] == [201]
