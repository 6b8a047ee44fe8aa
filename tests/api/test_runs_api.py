"""The /api/v1 routes through real HTTP calls: answers, waiting runs, errors and API-key auth."""

from __future__ import annotations

import time

from engine.api.runs import RETRY_WHILE_RUNNING_SECONDS
from engine.api.server import MAX_BODY_BYTES
from engine.approvals.keys import revoke_key
from tests.api.conftest import APPROVAL, HELLO, QUEUED, Api, flow_doc
from tests.engine.conftest import Site, wait_until


def test_every_api_route_needs_a_valid_key(api: Api) -> None:
    api.publish(HELLO)
    missing = api.http.get("/api/v1/runs")
    assert missing.status_code == 401
    assert missing.json()["error"]["code"] == "missing_key"
    malformed = api.http.get("/api/v1/runs", headers={"Authorization": "Bearer nope"})
    assert malformed.status_code == 401
    assert malformed.json()["error"]["code"] == "malformed_key"
    assert api.services.sql is not None
    revoke_key(api.services.sql, "tests")
    revoked = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Ada"}},
                            headers=api.headers())
    assert revoked.status_code == 401
    assert revoked.json()["error"]["code"] == "revoked_key"
    assert api.services.list_runs() == []


def test_a_start_checks_the_key_before_the_body(api: Api) -> None:
    api.publish(HELLO)
    bad_key = {"Authorization": "Bearer lgk_" + "x" * 43}
    for body in ({"flow_id": 5}, {}, {"flow_id": "hello", "version": 1 << 63}):
        refused = api.http.post("/api/v1/runs", json=body, headers=bad_key)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unknown_key", refused.text
        unread = api.http.post("/api/v1/runs", json=body, headers=api.headers())
        assert unread.status_code in (400, 422), unread.text
    empty = api.http.post("/api/v1/runs", content=b"", headers={**bad_key, "content-type": "application/json"})
    assert empty.status_code == 401
    assert api.services.list_runs() == []


def test_a_start_reads_its_body_as_json_by_content_type_and_names_the_refused_fields(api: Api) -> None:
    api.publish(HELLO)
    body = b'{"flow_id": "hello", "inputs": {"name": "Ada"}}'
    key = api.headers()["Authorization"]
    for content_type in (None, "application/json", "Application/JSON; charset=utf-8", "application/vnd.lockgate+json"):
        headers = {"Authorization": key, **({"content-type": content_type} if content_type else {})}
        started = api.http.post("/api/v1/runs", content=body, headers=headers)
        assert started.status_code == 201 and started.json()["result"] == "Hello, Ada!", (content_type, started.text)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "nonsense"):
        refused = api.http.post("/api/v1/runs", content=body, headers={"Authorization": key,
                                                                         "content-type": content_type})
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "bad_json"), content_type
        # `curl -d` sends a form's type: the answer says so, rather than that the body is not a JSON object
        message = refused.json()["error"]["message"]
        assert f"sent as {content_type!r}" in message and "Content-Type: application/json" in message, message
    unread = api.http.post("/api/v1/runs", content=b"{nope", headers={"Authorization": "Bearer lgk_" + "x" * 43})
    assert (unread.status_code, unread.json()["error"]["code"]) == (401, "unknown_key")
    fields = api.http.post("/api/v1/runs", json={"flow_id": "", "wait": -1}, headers=api.headers())
    assert (fields.status_code, fields.json()["error"]["code"]) == (422, "bad_request")
    message = fields.json()["error"]["message"]
    assert message.startswith("flow_id: ") and "; wait: " in message, message
    assert len(api.services.list_runs()) == 4


def test_a_run_finishing_within_wait_answers_201_and_a_repeat_200(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(HELLO)
    body = {"flow_id": "hello", "inputs": {"name": "Ada"}, "idempotency_key": "order-1", "wait": 10}
    first = api.http.post("/api/v1/runs", json=body, headers=api.headers())
    assert first.status_code == 201, first.text
    assert first.json()["status"] == "succeeded"
    assert first.json()["result"] == "Hello, Ada!"
    again = api.http.post("/api/v1/runs", json=body, headers=api.headers())
    assert again.status_code == 200
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.json()["duplicate"] is True
    assert len(api.services.list_runs(flow_id="hello")) == 1
    other_flow = api.http.post("/api/v1/runs", json={**body, "flow_id": "ghost"}, headers=api.headers())
    assert (other_flow.status_code, other_flow.json()["error"]["code"]) == (409, "idempotency_key_reused")
    assert first.json()["run_id"] in other_flow.json()["error"]["message"]

    shown = api.http.get(f"/api/v1/runs/{first.json()['run_id']}", headers=api.headers())
    assert shown.status_code == 200
    assert [step["node"] for step in shown.json()["steps"]] == ["start", "greet", "done"]
    listed = api.http.get("/api/v1/runs", params={"status": "succeeded"}, headers=api.headers())
    assert [run["id"] for run in listed.json()["runs"]] == [first.json()["run_id"]]
    assert api.http.get("/api/v1/runs", params={"status": "failed"}, headers=api.headers()).json()["runs"] == []


def test_a_parking_run_answers_202_waiting_with_retry_after(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(QUEUED)
    answer = api.http.post("/api/v1/runs", json={"flow_id": "later", "wait": 10}, headers=api.headers())
    assert answer.status_code == 202, answer.text
    data = answer.json()
    assert data["status"] == "waiting"
    assert data["waiting_on"] == {"node": "wait", "reason": "queue_delay"}
    assert 3590 <= data["retry_after_seconds"] <= 3600
    assert answer.headers["retry-after"] == str(data["retry_after_seconds"])

    cancelled = api.http.post(f"/api/v1/runs/{data['run_id']}/cancel", headers=api.headers())
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert api.services.wait_for_run(data["run_id"], timeout=10)["status"] == "cancelled"


def test_async_mode_answers_202_queued_at_once(api: Api, site: Site) -> None:
    site.release.clear()
    api.publish(flow_doc("held", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "call", "type": "http.request", "config": {"method": "GET", "url": site.url + "/hold"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.call.body.count }}"}},
    ], [("start", "call"), ("call", "done")]))
    busy = []
    for held in (1, 2):  # both workers of the engine inside a call that answers only once released
        busy.append(api.services.create_run("held", {}).run_id)
        wait_until(lambda held=held: site.hits.get("/hold") == held, what=f"worker {held} to be inside the call")
    answer = api.http.post("/api/v1/runs", json={"flow_id": "held", "wait": 0}, headers=api.headers(),
                           timeout=10)  # answered while no worker is free: it did not wait for the run
    assert answer.status_code == 202
    data = answer.json()
    assert (data["status"], data["retry_after_seconds"]) == ("queued", RETRY_WHILE_RUNNING_SECONDS)
    assert answer.headers["retry-after"] == str(RETRY_WHILE_RUNNING_SECONDS)
    site.release.set()
    for run_id in (*busy, data["run_id"]):
        assert api.services.wait_for_run(run_id, timeout=10)["status"] == "succeeded"


def test_refused_inputs_say_how_to_send_them_in_the_body_and_name_each_as_data(api: Api) -> None:
    api.publish(HELLO)
    missing = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {}}, headers=api.headers())
    error = missing.json()["error"]
    assert (missing.status_code, error["code"]) == (422, "refused_inputs")
    assert 'required input "name" (string) is missing; send it in the body\'s "inputs", e.g. "inputs": ' \
           '{"name": "text"}' in error["message"]
    assert error["inputs"] == [{"name": "name", "problem": "missing", "type": "string"}]
    wrong = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": 3, "colour": "red"}},
                          headers=api.headers())
    error = wrong.json()["error"]
    assert '"name" must be of JSON type string, got integer; send a JSON string' in error["message"]
    assert "--input" not in error["message"]  # a command-line hint means nothing to an HTTP client
    assert error["inputs"] == [{"name": "colour", "problem": "undeclared", "type": None},
                               {"name": "name", "problem": "wrong_type", "type": "string"}]


def test_errors_name_the_problem_with_their_status(api: Api) -> None:
    api.publish(HELLO)
    api.publish(flow_doc("off", [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}],
                         [("start", "done")], enabled=False))
    headers = api.headers()
    bad_json = api.http.post("/api/v1/runs", content=b"{nope", headers=headers)
    assert (bad_json.status_code, bad_json.json()["error"]["code"]) == (400, "bad_json")
    too_large = api.http.post("/api/v1/runs", content=b'{"flow_id": "hello", "wait": 1e400}',
                              headers={**headers, "Content-Type": "application/json"})
    assert (too_large.status_code, too_large.json()["error"]["code"]) == (400, "bad_json")
    assert "is not valid JSON (number is infinity" in too_large.json()["error"]["message"]
    unknown = api.http.post("/api/v1/runs", json={"flow_id": "ghost"}, headers=headers)
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "unknown_flow")
    assert "ghost" in unknown.json()["error"]["message"]
    for loose in ({"wait": True}, {"wait": "5"}, {"version": "1"}, {"version": True}):  # no quiet coercion
        answer = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "x"}, **loose},
                               headers=headers)
        assert (answer.status_code, answer.json()["error"]["code"]) == (422, "bad_request"), (loose, answer.text)
    # A misspelt field is refused, not dropped: "idempotencyKey" ignored would start a second run on a retry.
    typo = api.http.post("/api/v1/runs", json={"flow_id": "hello", "input": {"name": "x"}, "idempotencyKey": "k"},
                         headers=headers)
    assert (typo.status_code, typo.json()["error"]["code"]) == (422, "bad_request"), typo.text
    assert ("input: not a field of this request; did you mean 'inputs'? it takes flow_id, inputs, idempotency_key, "
            "version, wait, callback_url") in typo.json()["error"]["message"]
    assert "idempotencyKey: not a field of this request; did you mean 'idempotency_key'?" in typo.json()["error"][
        "message"]
    assert api.http.get("/api/v1/runs", headers=headers).json()["runs"] == []  # neither started a run
    for path, code in (("/api/v1/runs/a.b", "unknown_run"), (f"/api/v1/runs/{'x' * 65}", "unknown_run"),
                       ("/api/v1/flows/no!such/versions", "unknown_flow")):  # ids nothing can have: not found
        answer = api.http.get(path, headers=headers)
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, code), (path, answer.text)
    ftp = api.http.post("/api/v1/runs", json={"flow_id": "hello", "callback_url": "ftp://x"}, headers=headers)
    assert (ftp.status_code, ftp.json()["error"]["code"]) == (422, "bad_request")
    assert "callback_url: must be an http:// or https:// URL" in ftp.json()["error"]["message"]
    no_version = api.http.post("/api/v1/runs", json={"flow_id": "hello", "version": 9}, headers=headers)
    assert (no_version.status_code, no_version.json()["error"]["code"]) == (404, "unknown_version")
    assert "has no version 9" in no_version.json()["error"]["message"]
    refused = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": 3}}, headers=headers)
    assert (refused.status_code, refused.json()["error"]["code"]) == (422, "refused_inputs")
    assert "name" in refused.json()["error"]["message"]
    disabled = api.http.post("/api/v1/runs", json={"flow_id": "off"}, headers=headers)
    assert (disabled.status_code, disabled.json()["error"]["code"]) == (409, "flow_disabled")
    assert "disabled" in disabled.json()["error"]["message"]
    no_run = api.http.get("/api/v1/runs/abc123", headers=headers)
    assert (no_run.status_code, no_run.json()["error"]["code"]) == (404, "unknown_run")
    no_cancel = api.http.post("/api/v1/runs/abc123/cancel", headers=headers)
    assert no_cancel.status_code == 404
    no_route = api.http.get("/api/v1/nothing", headers=headers)
    assert no_route.status_code == 404
    wrong_method = api.http.delete("/api/v1/runs", headers=headers)
    assert wrong_method.status_code == 405
    reserved = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "x"},
                                                   "idempotency_key": "webhook:tickets:hook:1"}, headers=headers)
    assert (reserved.status_code, reserved.json()["error"]["code"]) == (422, "bad_request")
    bad_status = api.http.get("/api/v1/runs", params={"status": "sleeping"}, headers=headers)
    assert bad_status.status_code == 422
    assert api.services.list_runs() == []


def test_flow_versions_are_listed(api: Api) -> None:
    api.publish(HELLO)
    changed = {**HELLO, "description": "second"}
    api.publish(changed)
    answer = api.http.get("/api/v1/flows/hello/versions", headers=api.headers())
    assert answer.status_code == 200
    assert [v["version"] for v in answer.json()["versions"]] == [1, 2]
    assert api.http.get("/api/v1/flows/ghost/versions", headers=api.headers()).status_code == 404


def test_approvals_are_listed_and_decided_with_the_key(api: Api) -> None:
    api.publish(APPROVAL)
    started = api.http.post("/api/v1/runs", json={"flow_id": "ask", "wait": 10}, headers=api.headers())
    assert started.status_code == 202
    assert started.json()["waiting_on"] == {"node": "ok", "reason": "approval"}
    assert started.json()["retry_after_seconds"] == 30  # not the hour to its timeout: a person may decide sooner
    run_id = started.json()["run_id"]
    deadline = time.monotonic() + 10
    pending: list[dict[str, object]] = []
    while not pending and time.monotonic() < deadline:
        pending = api.http.get("/api/v1/approvals", headers=api.headers()).json()["approvals"]
        time.sleep(0.02)
    assert [item["run_id"] for item in pending] == [run_id]
    approval_id = pending[0]["id"]

    bad = api.http.post(f"/api/v1/approvals/{approval_id}/decision", json={"decision": "maybe"},
                        headers=api.headers())
    assert bad.status_code == 422
    decided = api.http.post(f"/api/v1/approvals/{approval_id}/decision", json={"decision": "approve"},
                            headers=api.headers())
    assert decided.status_code == 200, decided.text
    assert decided.json()["actor"] == "key:tests"
    again = api.http.post(f"/api/v1/approvals/{approval_id}/decision", json={"decision": "reject"},
                          headers=api.headers())
    assert (again.status_code, again.json()["error"]["code"]) == (409, "already_decided")
    unknown = api.http.post("/api/v1/approvals/nope/decision", json={"decision": "approve"}, headers=api.headers())
    assert unknown.status_code == 404
    assert api.services.wait_for_run(run_id, timeout=10)["result"] == "approved"


def test_an_exhausted_budget_answers_402_and_starts_nothing(api: Api) -> None:
    api.services.money.services.ledger.set_budget("empty", "0", "day")
    api.publish(flow_doc("spend", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "reserve", "type": "budget.reserve", "config": {"for": "model", "amount": 0.1, "budget": "empty"}},
        {"id": "model", "type": "ai.model", "config": {"provider": "local", "model": "sim-small", "prompt": "hi",
                                                        "output_key": "answer"}},
        {"id": "done", "type": "terminal"},
    ], [("start", "reserve"), ("reserve", "model"), ("model", "done")]))
    answer = api.http.post("/api/v1/runs", json={"flow_id": "spend"}, headers=api.headers())
    assert answer.status_code == 402, answer.text
    assert answer.json()["error"]["code"] == "budget_exhausted"
    assert 'budget "empty" is exhausted' in answer.json()["error"]["message"]
    assert api.services.list_runs() == []


def test_a_body_over_the_limit_is_refused_with_413(api: Api) -> None:
    answer = api.http.post("/api/v1/runs", content=b"x" * (MAX_BODY_BYTES + 1), headers=api.headers())
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "too_large"
