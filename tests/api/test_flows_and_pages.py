"""`GET/POST /api/v1/flows` and paging `GET /api/v1/runs` with its cursor."""

from __future__ import annotations

import json

from tests.api.conftest import HELLO, QUEUED, Api


def test_publishing_over_http_answers_the_new_version_or_the_diagnostics(api: Api) -> None:
    first = api.http.post("/api/v1/flows", content=json.dumps(HELLO), headers=api.headers())
    assert first.status_code == 201, first.text
    assert (first.json()["flow_id"], first.json()["version"]) == ("hello", 1)
    second = api.http.post("/api/v1/flows", json={**HELLO, "description": "again"}, headers=api.headers())
    assert second.json()["version"] == 2
    api.publish(QUEUED)
    listed = api.http.get("/api/v1/flows", headers=api.headers()).json()["flows"]
    assert [(flow["flow_id"], flow["version"], flow["enabled"]) for flow in listed] == [("hello", 2, True),
                                                                                        ("later", 1, True)]
    broken = {**HELLO, "edges": [{"from": "start", "to": "nowhere"}]}
    refused = api.http.post("/api/v1/flows", json=broken, headers=api.headers())
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "publish_refused"
    assert set(refused.json()["error"]) == {"code", "message"}  # other errors' fields are left out, not null
    assert refused.json()["diagnostics"] and all(d["code"] for d in refused.json()["diagnostics"])
    not_a_flow = api.http.post("/api/v1/flows", content=b'{"format": "x"}', headers=api.headers())
    assert (not_a_flow.status_code, not_a_flow.json()["error"]["code"]) == (422, "bad_document")
    # The diagnostics are lockgate validate --json's: the same code for a document that is not a flow.
    assert [d["code"] for d in not_a_flow.json()["diagnostics"]] == ["invalid_document"]
    assert "$.format" in not_a_flow.json()["diagnostics"][0]["message"]
    assert api.http.get("/api/v1/flows/hello/versions", headers=api.headers()).json()["versions"][-1]["version"] == 2
    assert api.http.post("/api/v1/flows", json=HELLO).status_code == 401


def test_the_cursor_pages_through_every_run_once(api: Api) -> None:
    api.publish(HELLO)
    made = [api.services.create_run("hello", {"name": f"n{i}"}).run_id for i in range(7)]
    for run_id in made:
        api.services.wait_for_run(run_id)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3, "flow_id": "hello", **({"cursor": cursor} if cursor else {})}
        page = api.http.get("/api/v1/runs", params=params, headers=api.headers()).json()
        seen += [run["id"] for run in page["runs"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(made) and len(seen) == 7
    assert pages == 3
    everything = api.http.get("/api/v1/runs", params={"limit": 500}, headers=api.headers()).json()
    assert [run["id"] for run in everything["runs"]] == seen and everything["next_cursor"] is None
    bad = api.http.get("/api/v1/runs", params={"cursor": "bm9wZQ"}, headers=api.headers())
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "bad_cursor")


def test_a_query_parameter_given_twice_is_refused(api: Api) -> None:
    answer = api.http.get("/api/v1/runs", params=[("flow_id", "a"), ("flow_id", "b")], headers=api.headers())
    assert answer.status_code == 422
    assert answer.json()["error"] == {"code": "bad_request",
                                      "message": "query parameter 'flow_id' is given 2 times; give it once"}
