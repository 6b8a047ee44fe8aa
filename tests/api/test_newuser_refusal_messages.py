"""Body fields refused by their pattern or type are named by what they must be (docs/api.md, "Protocol limits"),
not by a regular expression or pydantic's names for a union's members. Against the real server on 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.api.conftest import HELLO, Api


def _finished_run(api: Api) -> str:
    api.publish(HELLO)
    run_id = api.services.create_run("hello", {"name": "Ada"}).run_id
    api.services.wait_for_run(run_id)
    return run_id


def test_a_test_recordings_name_is_refused_saying_what_it_must_be(api: Api) -> None:
    run_id = _finished_run(api)
    answer = api.http.post(f"/api/v1/runs/{run_id}/test-recording", json={"name": "bad name/x"},
                           headers=api.headers())
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": {"code": "bad_request", "message": (
        "name: must be a test name: letters, digits, '-' and '_' (at most 64), starting with a letter or digit")}}


@pytest.mark.parametrize("version", ["latest", 0, 1.5])
def test_a_reruns_version_is_refused_once_saying_what_it_may_be(api: Api, version: object) -> None:
    run_id = _finished_run(api)
    answer = api.http.post(f"/api/v1/runs/{run_id}/rerun", json={"from_node": "greet", "version": version},
                           headers=api.headers())
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": {"code": "bad_request", "message": (
        'version: must be a version number (1 or more), "original" or "current"')}}


def test_a_start_with_a_bad_version_keeps_its_own_message(api: Api) -> None:
    api.publish(HELLO)
    answer = api.http.post("/api/v1/runs", json={"flow_id": "hello", "inputs": {"name": "A"}, "version": 0},
                           headers=api.headers())
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["message"] == "version: Input should be greater than or equal to 1"
