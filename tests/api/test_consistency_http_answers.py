"""What a new user of the HTTP API meets: refusals name the HTTP way to go on (never a `lockgate` command), a
cancel's body is read (its `reason` recorded, a field it does not take refused), a key sent without `Bearer` is
told so, and a `flow_id` filter naming no published flow is `404 unknown_flow` on the list and the live stream.
Against the real server on 127.0.0.1."""

from __future__ import annotations

import httpx
import pytest

from tests.api.conftest import HELLO, QUEUED, Api


def _post(api: Api, path: str, body: object = None) -> httpx.Response:
    return api.http.post(path, json=body, headers=api.headers()) if body is not None else \
        api.http.post(path, headers=api.headers())


@pytest.mark.parametrize(("path", "body", "code", "hint"), [
    ("/api/v1/runs/nope/cancel", None, "unknown_run", "list runs with GET /api/v1/runs"),
    ("/api/v1/runs/nope/rerun", {"from_node": "greet"}, "unknown_run", "list runs with GET /api/v1/runs"),
    ("/api/v1/runs/nope/test-recording", {"name": "t"}, "unknown_run", "list runs with GET /api/v1/runs"),
    ("/api/v1/approvals/ap_nope/decision", {"decision": "approve"}, "unknown_approval",
     "list pending approvals with GET /api/v1/approvals"),
])
def test_an_unknown_id_is_answered_with_the_http_way_to_list_them(api: Api, path: str, body: object, code: str,
                                                                  hint: str) -> None:
    answer = _post(api, path, body)
    assert answer.status_code == 404, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert error["message"].endswith(f"does not exist; {hint}"), error
    assert "lockgate" not in error["message"]


def test_the_same_refusal_reads_alike_on_get_and_on_cancel(api: Api) -> None:
    got = api.http.get("/api/v1/runs/nope", headers=api.headers()).json()["error"]
    cancelled = _post(api, "/api/v1/runs/nope/cancel").json()["error"]
    assert got == cancelled == {"code": "unknown_run",
                                "message": 'run "nope" does not exist; list runs with GET /api/v1/runs'}


def _parked(api: Api) -> str:
    api.publish(QUEUED)
    run_id = api.services.create_run("later", {}).run_id
    api.services.wait_for_run(run_id, statuses=frozenset({"waiting"}))
    return run_id


def test_a_cancels_reason_is_recorded_as_the_clis_is(api: Api) -> None:
    run_id = _parked(api)
    answer = _post(api, f"/api/v1/runs/{run_id}/cancel", {"reason": "customer withdrew"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"run_id": run_id, "status": "cancelled"}
    run = api.services.wait_for_run(run_id)
    assert (run["status"], run["error"], run["error_type"]) == ("cancelled", "customer withdrew", "cancelled")


@pytest.mark.parametrize("body", [None, {}])
def test_a_cancel_without_a_reason_records_the_apis_own(api: Api, body: object) -> None:
    run_id = _parked(api)
    answer = _post(api, f"/api/v1/runs/{run_id}/cancel", body)
    assert answer.status_code == 200, answer.text
    assert api.services.wait_for_run(run_id)["error"] == "cancelled through the HTTP API"


def test_a_field_a_cancel_does_not_take_is_refused_not_dropped(api: Api) -> None:
    run_id = _parked(api)
    answer = _post(api, f"/api/v1/runs/{run_id}/cancel", {"reson": "x"})
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": {"code": "bad_request", "message": (
        "reson: not a field of this request; did you mean 'reason'? it takes reason")}}
    assert api.services.get_run(run_id)["status"] == "waiting"  # nothing was cancelled


@pytest.mark.parametrize(("header", "problem"), [
    ("{key}", "the Authorization header has a key without `Bearer` before it"),
    ("Token {key}", "the Authorization header uses the 'Token' scheme, not Bearer"),
])
@pytest.mark.parametrize(("method", "path"), [("GET", "/api/v1/runs"), ("POST", "/api/v1/runs"),
                                              ("GET", "/api/v1/live")])
def test_a_key_sent_without_bearer_is_told_how_to_send_it(api: Api, header: str, problem: str, method: str,
                                                          path: str) -> None:
    answer = api.http.request(method, path, headers={"Authorization": header.format(key=api.key)},
                              json={"flow_id": "hello"} if method == "POST" else None)
    assert answer.status_code == 401, answer.text
    assert answer.json() == {"error": {"code": "missing_key", "message": (
        f"{problem}; send the key as `Authorization: Bearer <key>`")}}


def test_no_key_at_all_keeps_its_message(api: Api) -> None:
    answer = api.http.get("/api/v1/runs")
    assert answer.status_code == 401
    assert answer.json()["error"] == {"code": "missing_key", "message": (
        "send an API key as `Authorization: Bearer lgk_...`; create one with `lockgate keys create NAME`")}


UNKNOWN_FLOW = {"error": {"code": "unknown_flow",
                          "message": 'flow "nope" is not published; list flows with GET /api/v1/flows'}}


def test_the_run_list_of_a_flow_never_published_is_unknown_flow(api: Api) -> None:
    answer = api.http.get("/api/v1/runs", params={"flow_id": "nope"}, headers=api.headers())
    assert answer.status_code == 404, answer.text
    assert answer.json() == UNKNOWN_FLOW
    api.publish(HELLO)  # a published flow without runs yet is an empty list
    listed = api.http.get("/api/v1/runs", params={"flow_id": "hello"}, headers=api.headers())
    assert listed.status_code == 200 and listed.json() == {"runs": [], "next_cursor": None}


def test_the_live_stream_of_a_flow_never_published_is_unknown_flow(api: Api) -> None:
    with api.http.stream("GET", "/api/v1/live", params={"flow_id": "nope"}, headers=api.headers(),
                         timeout=httpx.Timeout(10, read=3)) as answer:
        answer.read()
    assert answer.status_code == 404, answer.text
    assert answer.json() == UNKNOWN_FLOW
    api.publish(HELLO)
    with api.http.stream("GET", "/api/v1/live", params={"flow_id": "hello"}, headers=api.headers()) as live:
        assert live.status_code == 200 and live.headers["content-type"].startswith("text/event-stream")
