"""Signed webhook deliveries that start nothing are counted under their trigger, so `lockgate webhooks list`
shows them; a dedupe key reading a header the request lacks means no dedupe, and finds a header in any case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.publish import get_version
from engine.triggers.settings import counters, set_enabled
from engine.triggers.webhooks import signature_of
from tests.api.conftest import Api, flow_doc
from tests.cli import cli_env, lockgate
from tests.conftest import EXAMPLES

TICKET = {"ticket": {"subject": "Refund please"}}


def _hook_flow(flow_id: str, hook: dict[str, Any]) -> dict[str, Any]:
    return flow_doc(flow_id, [hook, {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.ticket }}"}}],
                    [(hook["id"], "done")], {"ticket": {"type": "object", "required": True}})


def _enable(api: Api, document: dict[str, Any], enabled: bool = True) -> str:
    assert api.services.sql is not None and api.services.handles is not None
    api.publish(document)
    _, flow = get_version(api.services.sql, document["id"])
    settings = set_enabled(api.services.handles.client, api.services.keys, flow, "trigger.webhook", enabled,
                           api.clock.now())
    assert settings[0].token is not None
    return settings[0].token


def _post(api: Api, token: str, body: bytes, headers: dict[str, str] | None = None,
          signed: bool = True) -> tuple[int, dict[str, Any]]:
    sent = {"content-type": "application/json", **(headers or {})}
    if signed:
        sent["X-Hub-Signature-256"] = signature_of(body, token)
    answer = api.http.post(f"/webhooks/{token}", content=body, headers=sent)
    return answer.status_code, answer.json()


def _code(answer: tuple[int, dict[str, Any]]) -> tuple[int, str]:
    return answer[0], answer[1]["error"]["code"]


def _counted(api: Api) -> dict[str, int]:
    assert api.services.handles is not None
    return counters(api.services.handles.client, api.services.keys)


def test_every_signed_delivery_that_starts_nothing_is_counted(api: Api, tmp_path: Path, redis_url: str,
                                                              key_prefix: str, sqlite_url: str) -> None:
    document = _hook_flow("refusals", {"id": "hook", "type": "trigger.webhook",
                                       "config": {"dedupe_key": "{{ request.json.id }}"}})
    token = _enable(api, document)
    assert _code(_post(api, token, b"[1, 2]")) == (422, "bad_body")
    assert _code(_post(api, token, b"{not json")) == (400, "bad_json")
    assert _code(_post(api, token, json.dumps({"id": 1, "ticket": "a string"}).encode())) == (422, "refused_inputs")
    assert _code(_post(api, token, json.dumps(TICKET).encode())) == (422, "bad_dedupe_key")
    started = json.dumps({"id": 2, **TICKET}).encode()
    assert _post(api, token, started)[0] == 202
    assert _post(api, token, started)[1]["duplicate"] is True
    assert _code(_post(api, token, started, signed=False)) == (401, "unsigned")
    _enable(api, document, enabled=False)
    assert _code(_post(api, token, started)) == (409, "webhook_disabled")

    assert _counted(api) == {"refusals/hook:refused": 4, "refusals/hook:disabled": 1, "webhook_unsigned": 1}
    assert len(api.services.list_runs(flow_id="refusals")) == 1
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=sqlite_url)
    listed = lockgate(env, "webhooks", "list", "refusals", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [row["started_nothing"] for row in json.loads(listed.stdout)] == [{"disabled": 1, "refused": 4}]
    piped = lockgate(env, "webhooks", "list", "refusals").stdout.splitlines()  # one tab-separated line a trigger
    assert [line.split("\t")[-1] for line in piped] == ["5 (1 while disabled, 4 refused)"]


def _example_hook() -> dict[str, Any]:
    document = json.loads((EXAMPLES / "ticket-triage.flow.json").read_text())
    return next(node for node in document["nodes"] if node["type"] == "trigger.webhook")


def test_the_ticket_triage_webhook_runs_a_delivery_without_a_delivery_id_undeduped(api: Api) -> None:
    hook = _example_hook()
    assert "X-Delivery-Id" in hook["config"]["dedupe_key"]
    token = _enable(api, _hook_flow("triage-hook", hook))
    body = json.dumps(TICKET).encode()
    first, second = _post(api, token, body), _post(api, token, body)
    assert (first[0], second[0]) == (202, 202), (first, second)
    assert first[1]["run_id"] != second[1]["run_id"]

    status, keyed = _post(api, token, body, {"x-delivery-id": "t-1"})
    assert status == 202
    status, again = _post(api, token, body, {"X-DELIVERY-ID": "t-1"})
    assert (status, again["run_id"], again["duplicate"]) == (200, keyed["run_id"], True)
    assert len(api.services.list_runs(flow_id="triage-hook")) == 3
    assert _counted(api) == {}


@pytest.mark.parametrize("template", ["{{ request.headers['X-GitHub-Delivery'] }}",
                                      "{{ request.headers.get('X-GitHub-Delivery', '') }}",
                                      "{{ request.headers['x-github-delivery'] }}"])
def test_a_header_the_dedupe_key_reads_is_found_whatever_its_case(api: Api, template: str) -> None:
    token = _enable(api, _hook_flow("github", {"id": "hook", "type": "trigger.webhook",
                                               "config": {"dedupe_key": template}}))
    body = json.dumps(TICKET).encode()
    status, first = _post(api, token, body, {"X-GitHub-Delivery": "g-1"})
    assert status == 202, first
    for spelling in ("x-github-delivery", "X-GITHUB-DELIVERY", "X-GitHub-Delivery"):
        status, again = _post(api, token, body, {spelling: "g-1"})
        assert (status, again["run_id"], again["duplicate"]) == (200, first["run_id"], True)
    assert len(api.services.list_runs(flow_id="github")) == 1
