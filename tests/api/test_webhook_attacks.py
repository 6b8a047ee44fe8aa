"""Webhook deliveries an attacker or a careless sender makes: every one refused is a 401 (or 413) that starts
nothing and leaves only its counter; a replay or a burst of duplicates starts one run."""

from __future__ import annotations

import hmac
import json
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from engine.api.server import MAX_BODY_BYTES
from engine.publish import get_version
from engine.triggers.settings import counters, set_enabled
from engine.triggers.webhooks import signature_of
from tests.api.conftest import TICKETS, Api
from tests.api.raw_http import Answer, chunked, connect, exchange, read_answer, request

BODY = json.dumps({"ticket": {"subject": "Refund please"}, "sender": "crm"}).encode()


def _enable(api: Api) -> str:
    assert api.services.sql is not None and api.services.handles is not None
    api.publish(TICKETS)
    _, flow = get_version(api.services.sql, "tickets")
    settings = set_enabled(api.services.handles.client, api.services.keys, flow, "trigger.webhook", True,
                           api.clock.now())
    assert settings[0].token is not None
    return settings[0].token


def _delivery(token: str, body: bytes, signature: str | None, delivery: str = "d-1", *,
              framing: str = "length") -> bytes:
    headers = {"Content-Type": "application/json", "X-Delivery-Id": delivery}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    if framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
        return request("POST", f"/webhooks/{token}", headers=headers, length=False) + chunked(body)
    return request("POST", f"/webhooks/{token}", headers=headers, body=body)


def _counters(api: Api) -> dict[str, int]:
    assert api.services.handles is not None
    return counters(api.services.handles.client, api.services.keys)


def _hex(body: bytes, token: str, algorithm: str = "sha256") -> str:
    return hmac.new(token.encode(), body, algorithm).hexdigest()


@pytest.mark.parametrize(("case", "counter"), [
    ("missing", "webhook_unsigned"),
    ("empty", "webhook_bad_signature"),
    ("sha1", "webhook_bad_signature"),
    ("short", "webhook_bad_signature"),
    ("long", "webhook_bad_signature"),
    ("bare_hex", "webhook_bad_signature"),
    ("reserialised", "webhook_bad_signature"),
    ("one_byte", "webhook_bad_signature"),
    ("other_token", "webhook_bad_signature"),
])
def test_a_delivery_without_the_right_signature_starts_nothing(api: Api, case: str, counter: str) -> None:
    token = _enable(api)
    good = _hex(BODY, token)
    sent, signature = BODY, {
        "missing": None,
        "empty": "",
        "sha1": "sha1=" + _hex(BODY, token, "sha1"),
        "short": "sha256=" + good[:-1],
        "long": "sha256=" + good + "0",
        "bare_hex": good,
        "reserialised": "sha256=" + good,
        "one_byte": "sha256=" + good,
        "other_token": signature_of(BODY, token + "x"),
    }[case]
    if case == "reserialised":
        sent = json.dumps(json.loads(BODY), separators=(",", ":")).encode()
    elif case == "one_byte":
        sent = BODY.replace(b"Refund", b"Refunc")
    answer = exchange(api.server.url, _delivery(token, sent, signature))
    assert answer.status == 401
    assert answer.error_code() == ("unsigned" if case == "missing" else "bad_signature")
    message = orjson.loads(answer.body)["error"]["message"]
    assert message.startswith({  # what is wrong with it, when its shape says so
        "missing": "the request has no X-Hub-Signature-256 header",
        "empty": "X-Hub-Signature-256 must be sha256=<hex digest>", "sha1": "X-Hub-Signature-256 must be sha256=",
        "bare_hex": "X-Hub-Signature-256 must be sha256=",
        "short": "X-Hub-Signature-256's digest must be 64 hex digits; 63 characters came after sha256=",
        "long": "X-Hub-Signature-256's digest must be 64 hex digits; 65 characters came after sha256=",
    }.get(case, "X-Hub-Signature-256 does not match HMAC-SHA256 of the raw body")), message
    assert _counters(api) == {counter: 1}
    assert api.services.list_runs() == []


def test_upper_case_hex_of_the_right_digest_is_accepted(api: Api) -> None:
    token = _enable(api)
    answer = exchange(api.server.url, _delivery(token, BODY, "sha256=" + _hex(BODY, token).upper()))
    assert answer.status == 202, answer.body
    assert api.services.wait_for_run(str(orjson.loads(answer.body)["run_id"]), timeout=10)["status"] == "succeeded"


def test_an_unknown_token_is_refused_and_counted(api: Api) -> None:
    _enable(api)
    answer = exchange(api.server.url, _delivery("whk_guess", BODY, signature_of(BODY, "whk_guess")))
    assert answer.status == 401 and answer.error_code() == "unknown_webhook"
    assert _counters(api) == {"webhook_unknown_token": 1}
    assert api.services.list_runs() == []


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_an_oversize_delivery_is_413(api: Api, framing: str) -> None:
    token = _enable(api)
    big = orjson.dumps({"ticket": {"subject": "x" * (MAX_BODY_BYTES + 1)}})
    answer = exchange(api.server.url, _delivery(token, big, signature_of(big, token), framing=framing))
    assert answer.status == 413 and answer.error_code() == "too_large"
    assert api.services.list_runs() == []


def test_a_length_shorter_than_the_body_signs_nothing(api: Api) -> None:
    token = _enable(api)
    big = orjson.dumps({"ticket": {"subject": "x" * (MAX_BODY_BYTES + 1)}})
    raw = request("POST", f"/webhooks/{token}", headers={"X-Hub-Signature-256": signature_of(big, token),
                                                         "Content-Length": "10"}, length=False) + big[:65536]
    with connect(api.server.url) as sock:
        sock.sendall(raw)
        first = read_answer(sock)
    assert first.status == 401 and first.error_code() == "bad_signature"
    assert api.services.list_runs() == []


def test_a_replayed_delivery_starts_no_second_run(api: Api) -> None:
    token = _enable(api)
    raw = _delivery(token, BODY, signature_of(BODY, token), "d-7")
    first = exchange(api.server.url, raw)
    again = exchange(api.server.url, raw)
    assert (first.status, again.status) == (202, 200)
    assert orjson.loads(again.body) == {**orjson.loads(first.body), "duplicate": True,
                                        "status": orjson.loads(again.body)["status"]}
    assert len(api.services.list_runs(flow_id="tickets")) == 1


def test_twenty_parallel_duplicates_start_one_run(api: Api) -> None:
    token = _enable(api)
    raw = _delivery(token, BODY, signature_of(BODY, token), "d-burst")
    sockets = [connect(api.server.url) for _ in range(20)]

    def deliver(index: int) -> Answer:
        with sockets[index] as sock:
            sock.sendall(raw)
            return read_answer(sock)

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(deliver, range(20)))
    assert sorted(answer.status for answer in answers) == [200] * 19 + [202]
    assert len({orjson.loads(answer.body)["run_id"] for answer in answers}) == 1
    assert len(api.services.list_runs(flow_id="tickets")) == 1
    run_id = str(orjson.loads(answers[0].body)["run_id"])
    assert api.services.wait_for_run(run_id, timeout=10)["result"] == "Refund please"
