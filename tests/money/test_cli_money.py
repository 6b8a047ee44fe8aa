"""`lockgate run` with money: a model flow against the simulator charges its hold, `lockgate holds list`
and `lockgate budgets list` show it, and an exhausted budget refuses the next run before it starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.providers.simulator import ProviderSimulator
from tests.cli import cli_env, lockgate
from tests.money.conftest import model_flow, provider_file


@pytest.fixture
def sim() -> Iterator[ProviderSimulator]:
    simulator = ProviderSimulator(port=0).start()
    try:
        yield simulator
    finally:
        simulator.stop()


def test_run_charges_and_the_cli_shows_holds_and_budgets(tmp_path: Path, redis_url: str, key_prefix: str,
                                                          sim: ProviderSimulator) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "providers.json").write_text(json.dumps(provider_file(sim.url)))
    flow = tmp_path / "hello-model.flow.json"
    flow.write_text(json.dumps(model_flow("hello-model", {})))
    env = cli_env(tmp_path, redis_url, key_prefix)

    assert lockgate(env, "budgets", "set", "default", "--limit", "1", "--period", "day").returncode == 0
    ran = lockgate(env, "run", str(flow), "--json")
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    assert run["status"] == "succeeded" and run["result"].startswith("Simulated answer")

    holds = json.loads(lockgate(env, "holds", "list", "--json").stdout)
    assert [(h["run_id"], h["state"], h["amount_micros"]) for h in holds] == [(run["id"], "charged", 200_000)]
    [budget] = json.loads(lockgate(env, "budgets", "list", "--json").stdout)
    assert (budget["spent_micros"], budget["held_micros"]) == (holds[0]["charged_micros"], 0)

    assert lockgate(env, "budgets", "set", "default", "--limit", "0", "--period", "day").returncode == 0
    refused = lockgate(env, "run", str(flow))
    assert refused.returncode == 1
    assert 'budget "default" is exhausted for this day' in refused.stderr
    assert "lockgate budgets set default --limit USD" in refused.stderr
