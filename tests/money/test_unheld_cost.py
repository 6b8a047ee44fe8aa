"""A model call with no `budget.reserve` before it is charged to no budget, but its cost is the run's all the same:
the run's `cost_micros` counts it beside the held calls' charges, once, also when its events are applied again."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import redis
import sqlalchemy as sa

from engine.runtime.emitter import EVENT_FIELD
from engine.runtime.projection import apply_batch
from engine.store.models import Run
from tests.money.conftest import MoneyEngine

PROMPT = "Say hello to Ada"


def _flow() -> dict[str, Any]:
    def model(node_id: str) -> dict[str, Any]:
        return {"id": node_id, "type": "ai.model", "config": {"provider": "local", "model": "sim-small",
                                                              "prompt": PROMPT, "output_key": node_id}}

    nodes = [{"id": "start", "type": "trigger.manual", "config": {}},
             {"id": "reserve", "type": "budget.reserve", "config": {"for": "held", "amount": 0.2,
                                                                    "budget": "default"}},
             model("held"), model("unheld"),
             {"id": "end", "type": "terminal", "config": {"output": "{{ state.unheld }}"}}]
    chain = [node["id"] for node in nodes]
    return {"format": "lockgate.flow/1", "id": "unheld", "name": "unheld", "nodes": nodes,
            "edges": [{"from": a, "to": b} for a, b in itertools.pairwise(chain)]}


def _cost(sql: sa.Engine, run_id: str) -> int:
    with sql.connect() as conn:
        return int(conn.execute(sa.select(Run.cost_micros).where(Run.id == run_id)).scalar_one())


def test_a_model_call_without_a_hold_still_costs_its_run(start_money_engine: Callable[..., MoneyEngine], db_url: str,
                                                         redis_url: str) -> None:
    engine = start_money_engine(db_url=db_url, event_journal=1000)
    engine.publish(_flow())
    run = engine.wait(engine.start("unheld"))
    assert run["status"] == "succeeded", run.get("error")
    [hold] = engine.settled_holds(run["id"], 1)
    charged = hold["charged_micros"]
    assert charged > 0
    sql = engine.services.sql
    assert sql is not None
    # The same prompt to the same model: the unheld call cost what the held one was charged.
    assert _cost(sql, run["id"]) == 2 * charged

    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 10
    journal: list[tuple[str, bytes]] = []
    while time.monotonic() < deadline and not any(b'"cost_micros":' + str(charged).encode() in raw
                                                  for _, raw in journal):
        journal = [(mid.decode(), fields[EVENT_FIELD]) for mid, fields in
                   client.xrange(engine.services.keys.events_journal) if run["id"].encode() in fields[EVENT_FIELD]]
        time.sleep(0.02)
    again = apply_batch(sql, journal)
    assert again.applied == 0 and _cost(sql, run["id"]) == 2 * charged  # applied again: counted once
