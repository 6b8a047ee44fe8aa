"""`lockgate webhooks list` and `lockgate schedules list` show the Triggers dock's "started nothing" counts."""

from __future__ import annotations

import json
from pathlib import Path

from engine.flow import flow_from_data
from engine.triggers.settings import set_enabled
from engine.triggers.webhooks import signature_of
from tests.api.conftest import TICKETS, Api, flow_doc
from tests.cli import cli_env, lockgate

SCHEDULED = flow_doc("nightly", [
    {"id": "tick", "type": "trigger.schedule", "config": {"every": "1m"}},
    {"id": "done", "type": "terminal", "config": {"output": "{{ inputs.day }}"}},
], [("tick", "done")], {"day": {"type": "string", "required": True}})


def test_list_shows_deliveries_and_fires_that_started_nothing(api: Api, tmp_path: Path, redis_url: str,
                                                              key_prefix: str, sqlite_url: str) -> None:
    services = api.services
    assert services.handles is not None
    client, keys = services.handles.client, services.keys
    api.publish(TICKETS)
    api.publish(SCHEDULED)
    now = api.clock.now()
    token = set_enabled(client, keys, flow_from_data(TICKETS), "trigger.webhook", True, now)[0].token
    assert token is not None
    set_enabled(client, keys, flow_from_data(TICKETS), "trigger.webhook", False, now)
    body = b'{"ticket": {"subject": "late"}}'
    for delivery in ("1", "2"):
        answer = api.http.post(f"/webhooks/{token}", content=body,
                               headers={"X-Hub-Signature-256": signature_of(body, token), "X-Delivery-Id": delivery})
        assert answer.status_code == 409
    set_enabled(client, keys, flow_from_data(SCHEDULED), "trigger.schedule", True, now)
    api.clock.advance(61)
    fired = services.triggers.scheduler.tick()
    assert [f.outcome for f in fired] == ["refused"]  # the schedule gives no "day": the run is refused

    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=sqlite_url)
    hooks = lockgate(env, "webhooks", "list", "tickets", "--json")
    assert hooks.returncode == 0, hooks.stderr
    assert [row["started_nothing"] for row in json.loads(hooks.stdout)] == [{"disabled": 2, "refused": 0}]
    text = lockgate(env, "webhooks", "list", "tickets").stdout  # piped: trigger, state, URL, token, started nothing
    assert text.endswith("\t2 (2 while disabled, 0 refused)\n")
    schedules = lockgate(env, "schedules", "list", "nightly", "--json")
    assert schedules.returncode == 0, schedules.stderr
    assert [row["started_nothing"] for row in json.loads(schedules.stdout)] == [{"disabled": 0, "refused": 1}]
    assert lockgate(env, "schedules", "list", "nightly").stdout == \
        "nightly/tick\tenabled\tevery 1m\t1 (0 while disabled, 1 refused)\n"
