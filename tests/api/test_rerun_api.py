"""`POST /api/v1/runs/{id}/rerun` through real HTTP: the rerun, its dry run, and its refusals as error kinds."""

from __future__ import annotations

from tests.api.conftest import Api, flow_doc
from tests.engine.conftest import Site


def _counting(site: Site, greeting: str = "Hello") -> dict[str, object]:
    return flow_doc("counted", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "charge", "type": "http.request", "config": {"method": "POST", "url": site.url + "/charge",
                                                             "output_key": "charged"}},
        {"id": "greet", "type": "set",
         "config": {"values": {"greeting": greeting + " #{{ state.charged.body.count }}"}}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.greeting }}"}},
    ], [("start", "charge"), ("charge", "greet"), ("greet", "done")])


def test_a_rerun_answers_201_with_the_new_run_and_repeats_no_upstream_effect(any_db_api: Api, site: Site) -> None:
    api = any_db_api
    api.publish(_counting(site))
    first = api.http.post("/api/v1/runs", json={"flow_id": "counted"}, headers=api.headers()).json()
    assert first["status"] == "succeeded"
    dry = api.http.post(f"/api/v1/runs/{first['run_id']}/rerun", json={"from_node": "charge", "dry_run": True},
                        headers=api.headers())
    assert dry.status_code == 200, dry.text
    assert dry.json()["run_id"] is None
    assert dry.json()["repeated_effects"] == ["charge"]
    answer = api.http.post(f"/api/v1/runs/{first['run_id']}/rerun", json={"from_node": "greet"},
                           headers=api.headers())
    assert answer.status_code == 201, answer.text
    started = answer.json()
    assert (started["rerun_of"], started["from_node"], started["version"]) == (first["run_id"], "greet", 1)
    assert started["reused_steps"] == ["start", "charge"]
    assert started["repeated_effects"] == []
    run = api.services.wait_for_run(started["run_id"])
    assert (run["status"], run["result"]) == ("succeeded", "Hello #1")
    assert site.hits == {"/charge": 1}
    shown = api.http.get(f"/api/v1/runs/{started['run_id']}", headers=api.headers()).json()
    assert (shown["rerun_of"], shown["from_node"]) == (first["run_id"], "greet")


def test_rerun_refusals_are_error_kinds(api: Api, site: Site) -> None:
    api.publish(_counting(site))
    run_id = api.http.post("/api/v1/runs", json={"flow_id": "counted"}, headers=api.headers()).json()["run_id"]
    api.publish(_counting(site, greeting="Hi"))

    def refused(run: str, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        answer = api.http.post(f"/api/v1/runs/{run}/rerun", json=body, headers=api.headers())
        return answer.status_code, answer.json()["error"]

    status, error = refused(run_id, {"from_node": "done", "version": "current"})
    assert (status, error["code"], error["nodes"], error["original_version"]) == (409, "upstream_changed",
                                                                                   ["greet"], 1)
    assert refused(run_id, {"from_node": "ghost"})[1]["code"] == "unknown_node"
    assert refused("nope", {"from_node": "greet"})[:1] == (404,)
    assert refused(run_id, {"from_node": "greet", "version": 9})[1]["code"] == "unknown_version"
    assert refused(run_id, {"from_node": "greet", "version": "newest"})[0] == 422
    assert len(api.services.list_runs()) == 1
    assert site.hits == {"/charge": 1}


def test_a_rerun_has_the_budget_preflight_of_any_run(api: Api) -> None:
    ledger = api.services.money.services.ledger
    ledger.set_budget("small", "5", "day")
    api.publish(flow_doc("spend", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "reserve", "type": "budget.reserve", "config": {"for": "model", "amount": 0.1, "budget": "small"}},
        {"id": "model", "type": "ai.model", "config": {"provider": "local", "model": "sim-small", "prompt": "hi",
                                                        "output_key": "answer"}},
        {"id": "done", "type": "terminal"},
    ], [("start", "reserve"), ("reserve", "model"), ("model", "done")]))
    run_id = api.http.post("/api/v1/runs", json={"flow_id": "spend"}, headers=api.headers()).json()["run_id"]
    api.services.wait_for_run(run_id)
    ledger.set_budget("small", "0", "day")
    answer = api.http.post(f"/api/v1/runs/{run_id}/rerun", json={"from_node": "reserve"}, headers=api.headers())
    assert (answer.status_code, answer.json()["error"]["code"]) == (402, "budget_exhausted")
    assert len(api.services.list_runs()) == 1
