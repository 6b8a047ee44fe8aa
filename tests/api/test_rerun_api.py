"""`POST /api/v1/runs/{id}/rerun` through real HTTP: the rerun, its dry run, and its refusals as error kinds."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from tests.api.conftest import Api, flow_doc
from tests.engine.conftest import Site, wait_until


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
    status, error = refused(run_id, {"from_node": "greet", "version": 9})
    assert (status, error["code"], error["original_version"]) == (404, "unknown_version", 1)
    assert "original run's version (1)" in error["message"] and "latest" not in error["message"]
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


def test_a_rerun_that_repeats_an_effect_needs_repeat_effects(api: Api, site: Site) -> None:
    api.publish(_counting(site))
    run_id = api.http.post("/api/v1/runs", json={"flow_id": "counted"}, headers=api.headers()).json()["run_id"]

    def rerun(body: dict[str, object]) -> httpx.Response:
        return api.http.post(f"/api/v1/runs/{run_id}/rerun", json=body, headers=api.headers())

    refused = rerun({"from_node": "charge"})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["nodes"]) == ("repeats_effects", ["charge"])
    assert '"repeat_effects": true' in error["message"] and "dry_run" in error["message"]
    assert rerun({"from_node": "charge", "repeat_effects": False}).status_code == 409
    assert len(api.services.list_runs()) == 1 and site.hits == {"/charge": 1}  # nothing started

    dry = rerun({"from_node": "charge", "dry_run": True})
    assert (dry.status_code, dry.json()["repeated_effects"]) == (200, ["charge"])
    started = rerun({"from_node": "charge", "repeat_effects": True})
    assert started.status_code == 201, started.text
    run = api.services.wait_for_run(started.json()["run_id"])
    assert (run["status"], run["result"]) == ("succeeded", "Hello #2")
    assert site.hits == {"/charge": 2}


def _callback_flow() -> dict[str, object]:
    """start -> tell (renders wait's URL) -> wait (wait.callback) -> done."""
    return flow_doc("told", [
        {"id": "start", "type": "trigger.manual"},
        {"id": "tell", "type": "set", "config": {"values": {"url": "{{ callback_url('wait') }}"}}},
        {"id": "wait", "type": "wait.callback", "config": {"timeout": "25s", "output_key": "reply"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.reply.status }}"}},
    ], [("start", "tell"), ("tell", "wait"), ("wait", "received", "done")])


def _answer_callback(api: Api, run_id: str) -> str:
    """Wait until `run_id` parks at `wait`, POST its URL (as `tell` rendered it), wait for the end; the URL."""
    run = wait_until(lambda: (lambda r: r if r and r["status"] == "waiting" else None)(
        api.services.get_run(run_id, with_steps=False)), timeout=10, what=f"run {run_id} to park")
    url = str(run["state"]["url"])
    posted = api.http.post(urlsplit(url).path, json={"status": "ok"})
    assert posted.status_code == 200, posted.text
    assert api.services.wait_for_run(run_id)["status"] == "succeeded"
    return url


def test_a_rerun_that_would_reuse_a_rendered_callback_url_is_refused(any_db_api: Api) -> None:
    api = any_db_api
    api.publish(_callback_flow())
    run_id = api.services.create_run("told").run_id
    original_url = _answer_callback(api, run_id)

    for body in ({"from_node": "wait"}, {"from_node": "wait", "dry_run": True},
                 {"from_node": "wait", "repeat_effects": True}):
        refused = api.http.post(f"/api/v1/runs/{run_id}/rerun", json=body, headers=api.headers())
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["nodes"]) == ("callback_url_reused", ["tell"]), error
        assert 'callback_url("wait")' in error["message"] and 'Rerun from "tell" or earlier' in error["message"]
    assert len(api.services.list_runs()) == 1  # nothing started
    after_wait = api.http.post(f"/api/v1/runs/{run_id}/rerun", json={"from_node": "done", "dry_run": True},
                               headers=api.headers())  # wait is reused too: no URL is needed again
    assert (after_wait.status_code, after_wait.json()["reused_steps"]) == (200, ["start", "tell", "wait"])

    started = api.http.post(f"/api/v1/runs/{run_id}/rerun", json={"from_node": "tell"}, headers=api.headers())
    assert started.status_code == 201, started.text
    assert started.json()["reused_steps"] == ["start"]
    rerun_url = _answer_callback(api, str(started.json()["run_id"]))
    assert rerun_url != original_url  # the rerun's own URL, rendered again, resumes it
