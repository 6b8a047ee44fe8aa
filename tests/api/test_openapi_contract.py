"""The contract is a file: the served OpenAPI document is the committed one, and the committed one is what the
models generate (write it again with `python -m engine.api.contract` after changing a route or a model)."""

from __future__ import annotations

from engine.api.contract import as_text, committed, generated
from tests.api.conftest import Api

NAMED = {"StartRun", "StartedRun", "Run", "RunSummary", "RunList", "Step", "Approval", "ApprovalList",
         "DecisionRequest", "Decision", "FlowVersion", "FlowVersions", "FlowList", "Error", "WebhookAccepted",
         "CallbackResumed"}


def test_the_committed_document_is_what_the_models_generate() -> None:
    assert as_text(committed()) == as_text(generated()), \
        "engine/api/openapi.json is stale: run `python -m engine.api.contract` and commit it"


def test_the_server_serves_the_committed_document(api: Api) -> None:
    answer = api.http.get("/openapi.json")
    assert answer.status_code == 200
    assert answer.json() == committed()
    document = answer.json()
    assert document["openapi"].startswith("3.1")
    assert set(document["components"]["schemas"]) >= NAMED
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    assert response["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/Error"} or path == "/api/v1/flows", (method, path, status)
