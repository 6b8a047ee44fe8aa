"""Tokens and cost of a run with two `ai.model` steps against the provider simulator, on SQLite and PostgreSQL:
per step and per run in SQL, in `lockgate runs show`, the HTTP API, the Runs panel and the run's details; the
run's continue_on_fail errors with them; a redelivered batch of its events leaves the totals as they were."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import redis
import sqlalchemy as sa
from PySide6.QtCore import Qt

from app.live import run_row
from app.panels.rows import cents
from app.panels.runs import COST_COLUMN, TOKENS_COLUMN, RunsPanel
from app.run_details import ERROR_COLUMN, STEP_COLUMNS, RunDetails
from engine.api.server import ApiServer
from engine.approvals.keys import create_key
from engine.facade import EngineApi
from engine.money.amounts import format_usd
from engine.providers.sim_answers import answer_for
from engine.providers.tokens import count_tokens, prompt_tokens
from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.projection import apply_batch
from engine.store.models import Run, Step
from tests.cli import cli_env, lockgate
from tests.engine.conftest import Site
from tests.money.conftest import MoneyEngine

GREETING = "Say hello to Ada"
LABELLING = "Label this as refund, bug or question: I was charged twice"


def _flow(site_url: str) -> dict[str, Any]:
    def model(node_id: str, prompt: str, key: str) -> dict[str, Any]:
        return {"id": node_id, "type": "ai.model", "config": {"provider": "local", "model": "sim-small",
                                                              "prompt": prompt, "output_key": key}}

    nodes = [{"id": "start", "type": "trigger.manual", "config": {}},
             {"id": "reserve", "type": "budget.reserve", "config": {"for": "greet", "amount": 0.2,
                                                                    "budget": "default"}},
             model("greet", "Say hello to {{ inputs.name }}", "answer"),
             {"id": "reserve2", "type": "budget.reserve", "config": {"for": "label", "amount": 0.2,
                                                                     "budget": "default"}},
             model("label", LABELLING, "label"),
             {"id": "notify", "type": "http.request", "config": {"method": "GET", "url": site_url + "/fail"},
              "continue_on_fail": True},
             {"id": "end", "type": "terminal", "config": {"output": "{{ state.label }}"}}]
    chain = [node["id"] for node in nodes]
    return {"format": "lockgate.flow/1", "id": "tokens", "name": "tokens",
            "inputs": {"name": {"type": "string", "default": "Ada"}},
            "nodes": nodes, "edges": [{"from": a, "to": b} for a, b in itertools.pairwise(chain)]}


EXPECTED_STEPS = {
    "greet": (prompt_tokens([GREETING]), count_tokens(answer_for(GREETING))),
    "label": (prompt_tokens([LABELLING]), count_tokens("refund")),
}
EXPECTED_IN = sum(tokens_in for tokens_in, _ in EXPECTED_STEPS.values())
EXPECTED_OUT = sum(tokens_out for _, tokens_out in EXPECTED_STEPS.values())


def _sql_tokens(sql: sa.Engine, run_id: str) -> tuple[tuple[Any, ...], dict[str, tuple[Any, Any]]]:
    with sql.connect() as conn:
        run = tuple(conn.execute(sa.select(Run.tokens_in, Run.tokens_out, Run.cost_micros)
                                 .where(Run.id == run_id)).one())
        steps = {row.step: (row.tokens_in, row.tokens_out) for row in
                 conn.execute(sa.select(Step.step, Step.tokens_in, Step.tokens_out).where(Step.run_id == run_id))}
    return run, steps


def _journal(engine: MoneyEngine, redis_url: str, run_id: str, count: int) -> list[tuple[str, bytes]]:
    """The run's events as the projector applied them (its journal), once all `count` are there."""
    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 10
    while True:
        entries = client.xrange(engine.services.keys.events_journal)
        messages = [(mid.decode(), fields[EVENT_FIELD]) for mid, fields in entries
                    if run_id.encode() in fields[EVENT_FIELD]]
        if len(messages) >= count or time.monotonic() > deadline:
            return messages
        time.sleep(0.02)


def test_tokens_and_cost_per_step_and_run_everywhere_a_run_is_shown(
        start_money_engine: Callable[..., MoneyEngine], db_url: str, site: Site, tmp_path: Path, redis_url: str,
        key_prefix: str, qtbot: Any) -> None:
    engine = start_money_engine(db_url=db_url, event_journal=1000)
    engine.publish(_flow(site.url))
    run = engine.wait(engine.start("tokens"))
    assert run["status"] == "succeeded", run.get("error")
    assert run["result"] == "refund"
    run_id = run["id"]
    holds = engine.settled_holds(run_id, 2)
    cost = sum(hold["charged_micros"] for hold in holds)
    assert cost > 0
    sql = engine.services.sql
    assert sql is not None

    # SQL: each model step its own call's tokens, the run their sum; steps that call no model have none.
    totals, steps = _sql_tokens(sql, run_id)
    assert totals == (EXPECTED_IN, EXPECTED_OUT, cost)
    assert {step: steps[step] for step in EXPECTED_STEPS} == EXPECTED_STEPS
    assert steps["notify"] == steps["reserve"] == (None, None)
    expected_errors = {"notify": {"message": engine.services.get_run(run_id)["errors"]["notify"]["message"],
                                  "type": "http_status", "attempts": 1}}
    assert "503" in expected_errors["notify"]["message"]

    # A redelivered batch (every event the projector applied for this run, again) doubles nothing.
    # run_started, 7 steps started and completed, 2 holds placed and charged, run_succeeded
    journal = _journal(engine, redis_url, run_id, 20)
    assert len(journal) >= 20
    again = apply_batch(sql, journal)
    assert again.applied == 0 and again.duplicates == len(journal)
    assert _sql_tokens(sql, run_id) == (totals, steps)

    # `lockgate runs show --json` and its human form.
    env = cli_env(tmp_path, redis_url, key_prefix, LOCKGATE_DB_URL=db_url)
    shown = lockgate(env, "runs", "show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert (data["tokens_in"], data["tokens_out"], data["cost_micros"]) == (EXPECTED_IN, EXPECTED_OUT, cost)
    assert data["errors"] == expected_errors
    assert data["current_node"] == "end"
    by_step = {step["step"]: (step["tokens_in"], step["tokens_out"]) for step in data["steps"]}
    assert {step: by_step[step] for step in EXPECTED_STEPS} == EXPECTED_STEPS
    assert by_step["notify"] == (None, None)
    human = lockgate(env, "runs", "show", run_id)
    assert human.returncode == 0, human.stderr
    assert f"tokens: {EXPECTED_IN:,} in, {EXPECTED_OUT:,} out" in human.stdout
    assert "went on past notify: http_status" in human.stdout

    # The HTTP API.
    server = ApiServer(engine.services, "127.0.0.1", 0).start()
    try:
        key = create_key(sql, "tokens", engine.clock)
        answer = httpx.get(f"{server.url}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {key}"},
                           timeout=20)
        listed = httpx.get(f"{server.url}/api/v1/runs", headers={"Authorization": f"Bearer {key}"}, timeout=20)
    finally:
        server.stop()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["tokens_in"], body["tokens_out"], body["cost_micros"]) == (EXPECTED_IN, EXPECTED_OUT, cost)
    assert body["errors"] == expected_errors and body["current_node"] == "end"
    api_steps = {step["step"]: (step["tokens_in"], step["tokens_out"]) for step in body["steps"]}
    assert {step: api_steps[step] for step in EXPECTED_STEPS} == EXPECTED_STEPS
    [summary] = [r for r in listed.json()["runs"] if r["id"] == run_id]
    assert (summary["tokens_in"], summary["tokens_out"]) == (EXPECTED_IN, EXPECTED_OUT)

    # The Runs panel and the run's details, from the stored records as the app's bridge reads them.
    api = EngineApi(engine.services)
    panel = RunsPanel()
    qtbot.addWidget(panel)
    panel.set_runs([run_row(r) for r in api.list_runs().runs])
    assert panel.cell_text(0, TOKENS_COLUMN) == f"{EXPECTED_IN:,} in · {EXPECTED_OUT:,} out"
    assert panel.cell_text(0, COST_COLUMN) == cents(cost / 1_000_000) != "$0.00"
    assert panel.model.data(panel.model.index(0, COST_COLUMN), Qt.ItemDataRole.ToolTipRole) == format_usd(cost)
    details = RunDetails()
    qtbot.addWidget(details)
    found = api.get_run(run_id)
    assert found is not None
    details.show_run(found)
    assert f"tokens {EXPECTED_IN:,} in · {EXPECTED_OUT:,} out" in details.header.text()
    assert f"cost {format_usd(cost)}" in details.header.text()
    column = STEP_COLUMNS.index("Tokens")
    cells = {details.steps.item(r, 0).text(): details.steps.item(r, column).text()
             for r in range(details.steps.rowCount())}
    greet_in, greet_out = EXPECTED_STEPS["greet"]
    assert cells["greet"] == f"{greet_in} in · {greet_out} out"
    assert cells["notify"] == ""
    assert "503" in details.steps.item(list(cells).index("notify"), ERROR_COLUMN).text()
