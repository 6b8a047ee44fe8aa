"""A method a path does not take is a JSON 405 whose message and `Allow` header name every method the path takes,
whichever of the application's routes (the API's, webhooks', callbacks', the live routes', `/openapi.json`)
take them; against the real server on 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.api.conftest import Api
from tests.api.raw_http import exchange, request

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@pytest.mark.parametrize(("method", "path", "allowed"), [
    ("PUT", "/api/v1/flows", "GET, POST"),
    ("PUT", "/api/v1/runs", "GET, POST"),
    ("DELETE", "/api/v1/runs", "GET, POST"),
    ("PUT", "/api/v1/runs/run_1", "GET"),
    ("GET", "/api/v1/runs/run_1/cancel", "POST"),
    ("POST", "/api/v1/runs/run_1/events", "GET"),
    ("GET", "/webhooks/whk_x", "POST"),
    ("PUT", "/callbacks/run_1.sig", "POST"),
    ("PUT", "/openapi.json", "GET, HEAD"),
])
def test_a_405_names_every_method_the_path_takes(api: Api, method: str, path: str, allowed: str) -> None:
    answer = exchange(api.server.url, request(method, path, headers=api.headers()))
    assert answer.status == 405 and answer.error_code() == "method_not_allowed"
    assert answer.headers["allow"] == allowed
    assert answer.json() == {"error": {"code": "method_not_allowed",
                                       "message": f"{path} does not take {method}; it takes {allowed}"}}


def test_head_is_refused_where_get_routes_do_not_answer_it(api: Api) -> None:
    answer = exchange(api.server.url, request("HEAD", "/api/v1/runs", headers=api.headers()), head=True)
    assert answer.status == 405
    assert answer.headers["allow"] == "GET, POST"


@pytest.mark.parametrize("path", ["/api/v1/flows", "/api/v1/runs", "/api/v1/runs/run_1", "/api/v1/live",
                                  "/webhooks/whk_x", "/openapi.json"])
def test_the_allow_header_is_what_the_server_answers(api: Api, path: str) -> None:
    # No key: a method the path takes is refused by the route (401, 404...), not by routing, and opens no stream.
    answers = {method: exchange(api.server.url, request(method, path), head=method == "HEAD") for method in METHODS}
    taken = [method for method, answer in answers.items() if answer.status != 405]
    assert taken and len(taken) < len(METHODS)
    for answer in answers.values():
        if answer.status == 405:
            assert answer.headers["allow"] == ", ".join(sorted(taken))
