"""POST /webhooks/<token>: HMAC good/bad/missing, dedupe, inputs from the body, disabled flows and triggers."""

from __future__ import annotations

import json

import pytest

from engine.publish import get_version
from engine.triggers.settings import counters, set_enabled, settings_of
from engine.triggers.webhooks import signature_of
from tests.api.conftest import TICKETS, Api, flow_doc


def _enable(api: Api, flow_id: str = "tickets") -> str:
    assert api.services.sql is not None and api.services.handles is not None
    _, flow = get_version(api.services.sql, flow_id)
    settings = set_enabled(api.services.handles.client, api.services.keys, flow, "trigger.webhook", True,
                           api.clock.now())
    assert settings[0].token is not None
    return settings[0].token


def _post(api: Api, token: str, body: bytes, delivery: str | None = "d-1", signature: str | None = "good",
          ) -> tuple[int, dict[str, object]]:
    headers = {"content-type": "application/json"}
    if delivery is not None:
        headers["X-Delivery-Id"] = delivery
    if signature == "good":
        headers["X-Hub-Signature-256"] = signature_of(body, token)
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    answer = api.http.post(f"/webhooks/{token}", content=body, headers=headers)
    return answer.status_code, answer.json()


BODY = json.dumps({"ticket": {"subject": "Refund please"}, "sender": "crm"}).encode()


def test_a_signed_delivery_starts_one_run_and_a_duplicate_none(api: Api) -> None:
    api.publish(TICKETS)
    token = _enable(api)
    status, data = _post(api, token, BODY)
    assert status == 202, data
    run = api.services.wait_for_run(str(data["run_id"]), timeout=10)
    assert run["status"] == "succeeded"
    assert run["result"] == "Refund please"
    assert run["inputs"] == {"ticket": {"subject": "Refund please"}}
    assert run["trigger"] == "hook"

    status, again = _post(api, token, BODY)
    assert (status, again["run_id"], again["duplicate"]) == (200, data["run_id"], True)
    status, other = _post(api, token, BODY, delivery="d-2")
    assert status == 202 and other["run_id"] != data["run_id"]
    assert len(api.services.list_runs(flow_id="tickets")) == 2


@pytest.mark.parametrize(("signature", "counter"), [
    (None, "webhook_unsigned"),
    ("sha256=" + "0" * 64, "webhook_bad_signature"),
    ("sha1=abc", "webhook_bad_signature"),
])
def test_unsigned_or_mis_signed_requests_get_401_and_leave_only_a_counter(api: Api, signature: str | None,
                                                                        counter: str) -> None:
    api.publish(TICKETS)
    token = _enable(api)
    assert api.services.handles is not None
    status, data = _post(api, token, BODY, signature=signature)
    assert status == 401
    assert "X-Hub-Signature-256" in str(data["error"])
    assert counters(api.services.handles.client, api.services.keys) == {counter: 1}
    assert api.services.list_runs() == []
    # Signed with another token: refused too.
    status, _ = _post(api, token, BODY, signature=signature_of(BODY, token + "x"))
    assert status == 401
    assert api.services.list_runs() == []


def test_an_unknown_token_is_refused(api: Api) -> None:
    status, data = _post(api, "whk_unknown", BODY, signature=signature_of(BODY, "whk_unknown"))
    assert status == 401
    assert data["error"]["code"] == "unknown_webhook"  # type: ignore[index]


def test_disabled_webhook_and_disabled_flow_answer_409_and_start_nothing(api: Api) -> None:
    api.publish(TICKETS)
    token = _enable(api)
    assert api.services.sql is not None and api.services.handles is not None
    _, flow = get_version(api.services.sql, "tickets")
    set_enabled(api.services.handles.client, api.services.keys, flow, "trigger.webhook", False, api.clock.now())
    status, data = _post(api, token, BODY)
    assert status == 409
    assert data["error"]["code"] == "webhook_disabled"  # type: ignore[index]
    assert "lockgate webhooks enable tickets" in data["error"]["message"]  # type: ignore[index]

    api.publish({**TICKETS, "enabled": False})
    status, data = _post(api, token, BODY)
    assert status == 409
    assert data["error"]["code"] == "flow_disabled"  # type: ignore[index]
    assert counters(api.services.handles.client, api.services.keys) == {"tickets/hook:disabled": 2}
    assert api.services.list_runs() == []


def test_bodies_the_flow_refuses_get_clear_errors(api: Api) -> None:
    api.publish(TICKETS)
    token = _enable(api)
    status, data = _post(api, token, b"{not json")
    assert (status, data["error"]["code"]) == (400, "bad_json")  # type: ignore[index]
    status, data = _post(api, token, b"[1, 2]")
    assert (status, data["error"]["code"]) == (422, "bad_body")  # type: ignore[index]
    status, data = _post(api, token, json.dumps({"ticket": "a string"}).encode(), delivery="d-9")
    assert (status, data["error"]["code"]) == (422, "refused_inputs")  # type: ignore[index]
    assert api.services.list_runs() == []


def test_the_dedupe_key_template_reads_the_request(api: Api) -> None:
    document = flow_doc("orders", [
        {"id": "hook", "type": "trigger.webhook", "config": {"dedupe_key": "{{ request.json.order.id }}"}},
        {"id": "done", "type": "terminal"},
    ], [("hook", "done")], {"order": {"type": "object"}})
    api.publish(document)
    token = _enable(api, "orders")
    first = json.dumps({"order": {"id": 7, "n": 1}}).encode()
    same_order = json.dumps({"order": {"id": 7, "n": 2}}).encode()
    status, data = _post(api, token, first, delivery="a")
    assert status == 202
    status, again = _post(api, token, same_order, delivery="b")
    assert (status, again["run_id"]) == (200, data["run_id"])
    assert api.services.handles is not None and api.services.sql is not None
    shown = settings_of(api.services.handles.client, api.services.keys, get_version(api.services.sql, "orders")[1])
    assert shown[0].enabled and shown[0].token == token


def test_a_long_delivery_id_dedupes_within_the_key_column(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(TICKETS)
    token = _enable(api)
    long_id = "d" * 400
    status, data = _post(api, token, BODY, delivery=long_id)
    assert status == 202, data
    status, again = _post(api, token, BODY, delivery=long_id)
    assert (status, again["run_id"]) == (200, data["run_id"])
    status, other = _post(api, token, BODY, delivery=long_id + "x")
    assert status == 202 and other["run_id"] != data["run_id"]
