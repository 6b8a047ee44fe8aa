"""A query parameter a route does not declare is a `422 bad_request` naming it, the parameter it most likely meant
and the ones the route takes, on every route of the application (the API's, webhooks', callbacks', the live
routes', `/openapi.json`); the parameters the routes declare, and those docs/api.md documents, are taken. Against
the real server on 127.0.0.1 (`engine.api.known_query`)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from engine.api.contract import committed
from tests.api.conftest import HELLO, Api
from tests.api.raw_http import exchange, request

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
RUNS_TAKES = "it takes status, flow_id, limit, cursor"


def _operations() -> list[tuple[str, str, list[str]]]:
    """(method, path, query parameters) of every operation of the committed OpenAPI document."""
    found = []
    for path, item in committed()["paths"].items():
        for method, operation in item.items():
            names = [parameter["name"] for parameter in operation.get("parameters", [])
                     if parameter["in"] == "query"]
            found.append((method.upper(), path, names))
    return found


def _filled(path: str) -> str:
    """`path` with each of its parameters given a value its pattern accepts."""
    return re.sub(r"\{[^}]+\}", "run_1", path)


def test_a_typo_in_a_query_parameter_is_refused_naming_the_one_meant(api: Api) -> None:
    api.publish(HELLO)
    api.services.wait_for_run(api.services.create_run("hello", {"name": "Ada"}).run_id)
    answer = api.http.get("/api/v1/runs", params={"flow": "appr"}, headers=api.headers())
    assert answer.status_code == 422, answer.text  # not every flow's runs, as if no filter had been given
    assert answer.json() == {"error": {"code": "bad_request", "message": "flow: not a parameter of this request; did "
                                       f"you mean 'flow_id'? {RUNS_TAKES}"}}
    several = api.http.get("/api/v1/runs?flow=appr&stat=failed&page=2", headers=api.headers())
    assert several.status_code == 422
    assert several.json()["error"]["message"] == (
        "flow: not a parameter of this request; did you mean 'flow_id'? stat: not a parameter of this request; did "
        f"you mean 'status'? page: not a parameter of this request; {RUNS_TAKES}")


def test_a_route_taking_no_query_refuses_every_parameter(api: Api) -> None:
    answer = api.http.get("/api/v1/approvals?flow_id=x&limit=1", headers=api.headers())
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": {"code": "bad_request", "message": (
        "flow_id: not a parameter of this request; limit: not a parameter of this request; it takes no query "
        "parameters")}}


@pytest.mark.parametrize(("method", "path", "taken"), [*_operations(), ("GET", "/openapi.json", [])])
def test_every_route_refuses_a_parameter_it_does_not_declare(api: Api, method: str, path: str,
                                                              taken: list[str]) -> None:
    # The message lists what the route takes: the parameters checked are exactly those the document declares.
    answer = exchange(api.server.url, request(method, _filled(path) + "?colour=red", headers=api.headers()))
    assert answer.status == 422, answer.body
    takes = f"it takes {', '.join(taken)}" if taken else "it takes no query parameters"
    assert answer.json() == {"error": {"code": "bad_request",
                                       "message": f"colour: not a parameter of this request; {takes}"}}


def test_a_start_with_a_query_is_refused_and_starts_nothing(api: Api) -> None:
    api.publish(HELLO)
    assert api.server.lane is not None
    passed_on = api.server.lane.passed_on
    answer = api.http.post("/api/v1/runs?x=1", json={"flow_id": "hello", "inputs": {"name": "Ada"}},
                           headers=api.headers())
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": {"code": "bad_request", "message": "x: not a parameter of this request; it "
                                       "takes no query parameters"}}
    assert api.server.lane.passed_on == passed_on + 1  # the lane handed it on; the application refused it
    assert api.services.list_runs() == []


def test_a_path_or_method_no_route_takes_is_still_a_404_or_405(api: Api) -> None:
    assert exchange(api.server.url, request("GET", "/api/v2/runs?x=1")).status == 404
    refused = exchange(api.server.url, request("DELETE", "/api/v1/runs?x=1", headers=api.headers()))
    assert (refused.status, refused.error_code()) == (405, "method_not_allowed")


def _documented() -> list[tuple[str, str, list[str]]]:
    """(method, path, query parameters) of every route docs/api.md writes with a query (`GET /api/v1/runs?status=`)."""
    found = []
    for method, path, query in re.findall(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`?\s]*)\?([^`\s]*)`",
                                          DOCS.read_text(encoding="utf-8")):
        found.append((method, path, [part.split("=")[0] for part in query.split("&")]))
    return found


def test_every_query_parameter_the_documents_name_is_taken(api: Api) -> None:
    api.publish(HELLO)
    for name in ("Ada", "Bo"):
        api.services.wait_for_run(api.services.create_run("hello", {"name": name}).run_id)
    first = api.http.get("/api/v1/runs", params={"limit": 1}, headers=api.headers())
    assert first.status_code == 200 and first.json()["next_cursor"]
    values = {"status": "succeeded", "flow_id": "hello", "limit": "1", "cursor": first.json()["next_cursor"]}
    documented = _documented()
    assert {(method, path) for method, path, _names in documented} >= {("GET", "/api/v1/runs"),
                                                                        ("GET", "/api/v1/live")}
    with httpx.Client(base_url=api.server.url, timeout=20) as client:
        for method, path, names in documented:
            params = {name: values[name] for name in names}  # a new documented parameter: give it a value here
            # Streamed: /api/v1/live never ends by itself; its head is enough.
            with client.stream(method, path, params=params, headers=api.headers()) as answer:
                assert answer.status_code == 200, (method, path, params, answer.read())
    page = api.http.get("/api/v1/runs", params=values, headers=api.headers())
    assert page.status_code == 200 and len(page.json()["runs"]) == 1
    assert page.json()["runs"] != first.json()["runs"]  # the cursor was read: the second page
    assert api.http.get("/openapi.json?").status_code == 200  # an empty query names nothing
