"""API keys carry rights: a key made with some of `read`, `start`, `publish`, `decide` is refused the rest with
`403 key_without_rights`, over the real server; a key made without `--rights` may do everything."""

from __future__ import annotations

import httpx
import pytest

from engine.approvals.keys import ALL_SCOPES, KeyProblem, create_key, scopes_of_rights
from tests.api.conftest import APPROVAL, HELLO, Api


def _key(api: Api, name: str, rights: str) -> dict[str, str]:
    assert api.services.sql is not None
    key = create_key(api.services.sql, name, api.clock, scopes_of_rights(rights))
    return {"Authorization": f"Bearer {key}"}


def _refused(answer: httpx.Response, right: str) -> None:
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["code"] == "key_without_rights"
    assert f"lacks the {right} right" in error["message"]
    assert f"--rights {right}" in error["message"]


def test_a_read_only_key_reads_runs_and_is_refused_starts_publishes_and_decisions(api: Api) -> None:
    api.publish(HELLO)
    api.publish(APPROVAL)
    started = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Ada"}},
                            headers=api.headers())
    assert started.status_code == 201, started.text
    reader = _key(api, "dashboard", "read")

    assert api.http.get("/api/v1/runs", headers=reader).status_code == 200
    assert api.http.get(f"/api/v1/runs/{started.json()['run_id']}", headers=reader).status_code == 200
    assert api.http.get("/api/v1/flows", headers=reader).status_code == 200
    assert api.http.get("/api/v1/approvals", headers=reader).status_code == 200

    _refused(api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Bo"}}, headers=reader),
             "start")
    _refused(api.http.post(f"/api/v1/runs/{started.json()['run_id']}/cancel", headers=reader), "start")
    _refused(api.http.post("/api/v1/flows", json=HELLO, headers=reader), "publish")
    asked = api.http.post("/api/v1/runs", json={"flow_id": "ask", "wait": 5}, headers=api.headers())
    assert asked.status_code == 202, asked.text
    approval_id = api.http.get("/api/v1/approvals", headers=reader).json()["approvals"][0]["id"]
    decided = api.http.post(f"/api/v1/approvals/{approval_id}/decision", json={"decision": "approve"},
                            headers=reader)
    _refused(decided, "decide")
    runs = api.http.get("/api/v1/runs", params={"flow_id": "hello"}, headers=api.headers()).json()["runs"]
    assert len(runs) == 1, "the refused start left no run"


def test_a_start_key_cannot_read_and_a_bad_body_still_answers_for_its_key_first(api: Api) -> None:
    api.publish(HELLO)
    starter = _key(api, "ci", "start")
    started = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "Ada"}}, headers=starter)
    assert started.status_code == 201, started.text
    assert started.json()["status"] == "succeeded"
    _refused(api.http.get("/api/v1/runs", headers=starter), "read")
    _refused(api.http.get(f"/api/v1/runs/{started.json()['run_id']}/events", headers=starter), "read")
    reader = _key(api, "viewer", "runs:read")
    _refused(api.http.post("/api/v1/runs", json={"flow_id": "hello", "inptus": {}}, headers=reader), "start")


def test_a_decide_key_decides_and_a_key_made_without_rights_does_everything(api: Api) -> None:
    api.publish(APPROVAL)
    everything = _key(api, "owner", ",".join(ALL_SCOPES))
    assert api.http.post("/api/v1/flows", json=HELLO, headers=everything).status_code == 201
    asked = api.http.post("/api/v1/runs", json={"flow_id": "ask", "wait": 5}, headers=everything)
    assert asked.status_code == 202, asked.text
    approval_id = api.http.get("/api/v1/approvals", headers=everything).json()["approvals"][0]["id"]
    bot = _key(api, "approver-bot", "decide")
    _refused(api.http.get("/api/v1/approvals", headers=bot), "read")
    decided = api.http.post(f"/api/v1/approvals/{approval_id}/decision", json={"decision": "approve"}, headers=bot)
    assert decided.status_code == 200, decided.text
    assert decided.json()["accepted"] is True


@pytest.mark.parametrize(("rights", "problem"), [("", "name at least one right"),
                                                 ("read,approve", "unknown right 'approve'"),
                                                 ("reed", "did you mean 'read'")])
def test_rights_are_named_from_a_closed_set(rights: str, problem: str) -> None:
    with pytest.raises(KeyProblem, match=problem) as refused:
        scopes_of_rights(rights)
    if rights:
        assert "read (runs:read), start (runs:start), publish (flows:publish), decide (approvals:decide)" in str(
            refused.value)
    assert scopes_of_rights("decide, read") == ("runs:read", "approvals:decide")
