"""The flow listing's `enabled` is the latest published version's, so listing a flow and starting it agree."""

from __future__ import annotations

import dataclasses

from engine.facade import EngineApi
from engine.flow import flow_from_data
from engine.publish import publish
from engine.store.db import session_scope
from engine.store.models import FlowRecord
from tests.api.conftest import Api, flow_doc

NODES = [{"id": "start", "type": "trigger.manual"}, {"id": "done", "type": "terminal"}]


def _listed(api: Api) -> dict[str, bool]:
    """`enabled` by flow id, from the facade and from `GET /api/v1/flows` (asserted equal)."""
    facade = {flow.flow_id: flow.enabled for flow in EngineApi(api.services).list_flows().flows}
    answer = api.http.get("/api/v1/flows", headers=api.headers())
    assert answer.status_code == 200, answer.text
    assert {flow["flow_id"]: flow["enabled"] for flow in answer.json()["flows"]} == facade
    return facade


def _start_code(api: Api, flow_id: str) -> int:
    return api.http.post("/api/v1/runs", json={"flow_id": flow_id}, headers=api.headers()).status_code


def test_listing_follows_each_published_versions_enabled_flag(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(flow_doc("off", NODES, [("start", "done")], enabled=False))
    assert _listed(api) == {"off": False}
    refused = api.http.post("/api/v1/runs", json={"flow_id": "off"}, headers=api.headers())
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "flow_disabled")
    api.publish(flow_doc("off", NODES, [("start", "done")]))
    assert _listed(api) == {"off": True}
    assert _start_code(api, "off") in (200, 201, 202)
    api.publish(flow_doc("off", NODES, [("start", "done")], enabled=False))
    assert _listed(api) == {"off": False}
    assert _start_code(api, "off") == 409


def test_republishing_the_latest_content_corrects_a_stale_flag(any_db_api: Api) -> None:
    api = any_db_api
    sql = api.services.sql
    assert sql is not None
    disabled = flow_from_data(flow_doc("off", NODES, [("start", "done")], enabled=False))
    first = publish(sql, disabled)
    with session_scope(sql) as session:
        row = session.get(FlowRecord, "off")
        assert row is not None
        row.enabled = True  # out of step with its latest version
    again = publish(sql, disabled)
    assert (first.created, again.created) == (True, False)
    assert again == dataclasses.replace(first, created=False)
    assert _listed(api) == {"off": False}
