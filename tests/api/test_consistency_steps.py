"""What the API says about a run's steps and about repeated requests, consistent across routes (a new user's pass):

- every step has its node's `type`, the skipped ones' too (their records carry none; the read model fills it from
  the run's flow version), so `GET /api/v1/runs/{id}`, `lockgate runs show` and the app all name it;
- cancelling a run parked on an approval ends the parked step `cancelled`, not `suspended`;
- a rerun's booleans are strict, as a start's `wait` is: `"yes"` is `422 bad_request` naming the field;
- publishing the same document again stores nothing and answers `200` with the version it already has.
"""

from __future__ import annotations

from typing import Any

from engine.runtime.transitions import TERMINAL
from tests.api.conftest import APPROVAL, Api, flow_doc

BRANCHED = flow_doc("branched", [
    {"id": "start", "type": "trigger.manual"},
    {"id": "route", "type": "router", "config": {"branches": [{"port": "late", "when": "{{ false }}"}]}},
    {"id": "late", "type": "terminal", "config": {"output": "late"}},
    {"id": "done", "type": "terminal", "config": {"output": "done"}},
], [("start", "route"), ("route", "late", "late"), ("route", "default", "done")])


def _steps(run: dict[str, Any]) -> dict[str, tuple[str | None, str]]:
    return {step["step"]: (step["type"], step["status"]) for step in run["steps"]}


def test_a_skipped_step_has_its_nodes_type(api: Api) -> None:
    api.publish(BRANCHED)
    started = api.http.post("/api/v1/runs", json={"flow_id": "branched", "wait": 20}, headers=api.headers())
    assert started.status_code == 201, started.text
    assert _steps(started.json())["late"] == ("terminal", "skipped"), started.json()["steps"]
    run = api.http.get(f"/api/v1/runs/{started.json()['run_id']}", headers=api.headers()).json()
    assert _steps(run) == {"start": ("trigger.manual", "succeeded"), "route": ("router", "succeeded"),
                           "late": ("terminal", "skipped"), "done": ("terminal", "succeeded")}


def test_cancelling_a_parked_run_cancels_its_parked_step(api: Api) -> None:
    api.publish(APPROVAL)
    started = api.http.post("/api/v1/runs", json={"flow_id": "ask", "wait": 20}, headers=api.headers())
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    parked = api.services.wait_for_run(run_id, timeout=10, statuses=frozenset({"waiting"}))
    assert {step["step"]: step["status"] for step in parked["steps"]}["ok"] == "suspended"

    cancelled = api.http.post(f"/api/v1/runs/{run_id}/cancel", headers=api.headers())
    assert cancelled.json()["status"] == "cancelled", cancelled.text
    assert api.services.wait_for_run(run_id, timeout=10, statuses=TERMINAL)["status"] == "cancelled"
    run = api.http.get(f"/api/v1/runs/{run_id}", headers=api.headers()).json()
    steps = {step["step"]: step for step in run["steps"]}
    assert steps["ok"]["status"] == "cancelled", run["steps"]
    assert steps["ok"]["finished_at"] is not None
    assert "suspended" not in run["step_counts"], run["step_counts"]
    assert run["step_counts"].get("cancelled") == 1, run["step_counts"]


def test_a_reruns_booleans_are_strict(api: Api) -> None:
    api.publish(BRANCHED)
    run_id = api.http.post("/api/v1/runs", json={"flow_id": "branched", "wait": 20},
                           headers=api.headers()).json()["run_id"]
    for field, value in (("dry_run", "yes"), ("dry_run", "true"), ("dry_run", 1), ("repeat_effects", "true"),
                         ("repeat_effects", 0)):
        answer = api.http.post(f"/api/v1/runs/{run_id}/rerun", json={"from_node": "route", field: value},
                               headers=api.headers())
        assert answer.status_code == 422, (field, value, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "bad_request", (field, value, error)
        assert error["message"].startswith(f"{field}: "), (field, value, error)
    dry = api.http.post(f"/api/v1/runs/{run_id}/rerun", json={"from_node": "route", "dry_run": True, "version": 1},
                        headers=api.headers())
    assert dry.status_code == 200, dry.text
    assert dry.json()["run_id"] is None


def test_publishing_the_same_document_again_answers_200(api: Api) -> None:
    first = api.http.post("/api/v1/flows", json=BRANCHED, headers=api.headers())
    assert first.status_code == 201, first.text
    again = api.http.post("/api/v1/flows", json=BRANCHED, headers=api.headers())
    assert again.status_code == 200, again.text
    assert again.json() == first.json()
    changed = api.http.post("/api/v1/flows", json={**BRANCHED, "description": "changed"}, headers=api.headers())
    assert changed.status_code == 201, changed.text
    assert changed.json()["version"] == first.json()["version"] + 1
    back = api.http.post("/api/v1/flows", json=BRANCHED, headers=api.headers())
    assert back.status_code == 201, back.text  # the latest differs: the old content is stored as a new version
    assert back.json()["version"] == changed.json()["version"] + 1
