"""`POST /api/v1/runs` through the server's start lane (`engine.api.start_lane`) and through the application it
passes everything else on to: the same answers either way, bodies read whole however they arrive, and what the
lane has read given back to the application intact."""

from __future__ import annotations

import time

import orjson

from engine.api.runs import start_run, started_json
from engine.api.start_lane import StartLane
from engine.read_models import StartedRun
from tests.api.conftest import HELLO, QUEUED, Api, flow_doc
from tests.api.raw_http import Answer, chunked, connect, exchange, read_answer, request

START = b'{"flow_id": "hello", "inputs": {"name": "Ada"}}'


def _start(api: Api, body: bytes, *, path: str = "/api/v1/runs", extra: dict[str, str] | None = None,
           routed: bool = False) -> Answer:
    """A start; `routed`: with a length of more digits than the lane reads, so the application's route answers it
    (a start with a query does not reach the route either: no route takes a query parameter it does not declare)."""
    headers = {"Authorization": f"Bearer {api.key}", "Content-Type": "application/json", **(extra or {})}
    if routed:
        headers["Content-Length"] = str(len(body)).zfill(12)
    return exchange(api.server.url, request("POST", path, headers=headers, body=body, length=not routed))


def _lane(api: Api) -> StartLane:
    assert api.server.lane is not None
    return api.server.lane


def _counts(api: Api) -> tuple[int, int]:
    return _lane(api).taken, _lane(api).passed_on


def _shape(answer: Answer) -> tuple[int, str, list[str], object]:
    data = answer.json()
    assert isinstance(data, dict)
    return answer.status, answer.headers["content-type"], sorted(data), data.get("result")


def test_a_start_is_answered_alike_by_the_lane_and_by_the_application(api: Api) -> None:
    api.publish(HELLO)
    api.publish(QUEUED)
    before = _counts(api)
    laned = _start(api, START)
    assert _counts(api) == (before[0] + 1, before[1])
    routed = _start(api, START, routed=True)
    assert _counts(api) == (before[0] + 1, before[1] + 1)
    assert _shape(laned) == _shape(routed) == (201, "application/json", _shape(laned)[2], "Hello, Ada!")
    assert int(laned.headers["content-length"]) == len(laned.body)
    parked = [_start(api, b'{"flow_id": "later", "inputs": {}, "wait": 0.2}', routed=routed)
              for routed in (False, True)]
    for answer in parked:
        data = answer.json()
        assert isinstance(data, dict)
        assert answer.status == 202 and data["status"] == "waiting"
        assert answer.headers["retry-after"] == str(data["retry_after_seconds"])
    assert _shape(parked[0])[:3] == _shape(parked[1])[:3]
    refused = [_start(api, b'{"flow_id": "hello", "inputs": {}}', routed=routed) for routed in (False, True)]
    assert [answer.status for answer in refused] == [422, 422]
    assert refused[0].json() == refused[1].json()


def test_a_body_arriving_in_pieces_is_read_whole(api: Api) -> None:
    api.publish(HELLO)
    taken = _lane(api).taken
    framed = chunked(START, size=7)
    head = request("POST", "/api/v1/runs", headers={"Authorization": f"Bearer {api.key}",
                                                    "Content-Type": "application/json",
                                                    "Transfer-Encoding": "chunked"}, length=False)
    with connect(api.server.url) as sock:
        sock.sendall(head)
        for at in range(0, len(framed), 20):
            sock.sendall(framed[at:at + 20])
            time.sleep(0.02)
        answer = read_answer(sock)
    assert answer.status == 201, answer.body
    assert orjson.loads(answer.body)["result"] == "Hello, Ada!"
    assert _lane(api).taken == taken + 1


def test_a_length_with_thousands_of_digits_is_the_applications_to_read(api: Api) -> None:
    api.publish(HELLO)
    passed_on = _lane(api).passed_on
    headers = {"Authorization": f"Bearer {api.key}", "Content-Type": "application/json",
               "Content-Length": "0" * 4400 + str(len(START))}
    answer = exchange(api.server.url, request("POST", "/api/v1/runs", headers=headers, body=START, length=False))
    assert answer.status == 201, answer.body  # the application reads the length as the number it is
    assert _lane(api).passed_on == passed_on + 1


def test_what_the_lane_read_reaches_the_application_intact(api: Api) -> None:
    api.publish(HELLO)
    passed_on = _lane(api).passed_on
    not_json = _start(api, b'{"flow_id": "hello", "inputs": ')
    assert not_json.status == 400 and not_json.error_code() == "bad_json"
    not_a_start = _start(api, b'{"flow_id": 5}')
    assert not_a_start.status == 422 and not_a_start.error_code() == "bad_request"
    assert "flow_id" in not_a_start.json()["error"]["message"]  # type: ignore[index]
    form = _start(api, START, extra={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status == 400 and "application/x-www-form-urlencoded" in form.json()["error"]["message"]  # type: ignore[index]
    assert _lane(api).passed_on == passed_on + 3
    assert api.services.list_runs() == []


def test_a_starts_answer_is_written_as_its_model_would_write_it(api: Api) -> None:
    api.publish(HELLO)
    api.publish(QUEUED)
    api.publish(flow_doc("broken", [{"id": "start", "type": "trigger.manual"},
                                    {"id": "boom", "type": "set", "config": {"values": {"x": "{{ 1 / 0 }}"}}},
                                    {"id": "done", "type": "terminal"}], [("start", "boom"), ("boom", "done")]))
    assert api.server.watch is not None
    bodies: list[dict[str, object]] = [
        {"flow_id": "hello", "inputs": {"name": "Ada"}, "idempotency_key": "once"},
        {"flow_id": "hello", "inputs": {"name": "Ada"}, "idempotency_key": "once"},  # the duplicate: 200
        {"flow_id": "later", "wait": 0.1},
        {"flow_id": "later", "wait": 0},
        {"flow_id": "broken"},
    ]
    statuses = []
    for body in bodies:
        status, answer = start_run(api.services, body, api.server.watch)
        statuses.append(status)
        assert started_json(answer) == StartedRun.model_validate(answer).model_dump_json(exclude_unset=True).encode()
    assert statuses == [201, 200, 202, 202, 201]
    assert "rerun_of" in answer and "rerun_of" not in orjson.loads(started_json(answer))
