"""Approvals v2 over the HTTP API: quorum progress and each decision in `GET /approvals`, a vote short of the
quorum answered 200 without a port, a second vote by the same key 409, forbid_self refusing the starter's key."""

from __future__ import annotations

from typing import Any

from engine.approvals.keys import create_key
from tests.api.conftest import Api, flow_doc
from tests.engine.conftest import wait_until

QUORUM = flow_doc(
    "quorum",
    [
        {"id": "start", "type": "trigger.manual"},
        {
            "id": "ok",
            "type": "approval",
            "config": {"timeout": "1h", "message": "ship?", "required": 2, "forbid_self": True},
        },
        {"id": "yes", "type": "terminal", "config": {"output": "approved"}},
        {"id": "no", "type": "terminal", "config": {"output": "rejected"}},
    ],
    [("start", "ok"), ("ok", "approved", "yes"), ("ok", "rejected", "no")],
)


def _pending(api: Api) -> list[dict[str, Any]]:
    answer = api.http.get("/api/v1/approvals", headers=api.headers())
    assert answer.status_code == 200, answer.text
    approvals: list[dict[str, Any]] = answer.json()["approvals"]
    return approvals


def test_a_quorum_over_the_api(any_db_api: Api) -> None:
    api = any_db_api
    assert api.services.sql is not None
    others = [create_key(api.services.sql, name) for name in ("ada", "bob")]
    api.publish(QUORUM)
    started = api.http.post("/api/v1/runs", json={"flow_id": "quorum", "wait": 0}, headers=api.headers())
    run_id = started.json()["run_id"]
    [pending] = wait_until(lambda: _pending(api), what="the pending approval")
    assert (pending["run_id"], pending["required"], pending["approved_count"], pending["decisions"]) == (
        run_id,
        2,
        0,
        [],
    )

    def post(key: str, decision: str, comment: str | None = None) -> Any:
        return api.http.post(
            f"/api/v1/approvals/{pending['id']}/decision",
            json={"decision": decision, "comment": comment},
            headers={"Authorization": f"Bearer {key}"},
        )

    own = post(api.key, "approve")
    assert (own.status_code, own.json()["error"]["code"]) == (403, "self_decision")
    first = post(others[0], "approve", "looks right")
    assert first.status_code == 200, first.text
    assert (first.json()["port"], first.json()["approved_count"], first.json()["required"]) == (None, 1, 2)
    twice = post(others[0], "approve")
    assert (twice.status_code, twice.json()["error"]["code"]) == (409, "already_voted")
    [progress] = _pending(api)
    assert progress["approved_count"] == 1
    assert [(d["by"], d["decision"], d["comment"]) for d in progress["decisions"]] == [
        ("key:ada", "approve", "looks right")
    ]
    last = post(others[1], "approve")
    assert last.status_code == 200 and last.json()["port"] == "approved" and last.json()["approved_count"] == 2
    assert api.services.wait_for_run(run_id, timeout=10)["result"] == "approved"
    assert _pending(api) == []
