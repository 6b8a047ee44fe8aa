"""`EngineApi.wait_for_run` and `create_run`: the typed waits the CLI and the app use, woken by the host's batches."""

from __future__ import annotations

import pytest

from engine.facade import EngineApi
from engine.read_models import Run
from tests.api.conftest import HELLO, QUEUED, Api


def test_wait_for_run_answers_the_run_at_the_status_asked_for(api: Api) -> None:
    facade = EngineApi(api.services)
    api.services.add_batch_listener(facade.watch.on_batch)
    try:
        api.publish(QUEUED)
        started = facade.create_run("later", {})
        assert (started.flow_id, started.version, started.duplicate) == ("later", 1, False)
        seen: list[Run] = []
        parked = facade.wait_for_run(started.run_id, statuses=frozenset({"waiting"}), timeout=30,
                                     on_change=seen.append)
        assert parked.status == "waiting" and isinstance(parked.waiting_on, dict)
        assert (parked.waiting_on["node"], parked.waiting_on["reason"]) == ("wait", "queue_delay")
        assert seen[-1] == parked and len({run.model_dump_json() for run in seen}) == len(seen)
        with pytest.raises(TimeoutError, match=f'run "{started.run_id}" is still waiting'):
            facade.wait_for_run(started.run_id, timeout=0.3)
        facade.cancel_run(started.run_id)
        assert facade.wait_for_run(started.run_id, timeout=30).status == "cancelled"
    finally:
        api.services.remove_batch_listener(facade.watch.on_batch)


def test_wait_for_run_of_an_unknown_run_says_so(api: Api) -> None:
    api.publish(HELLO)
    with pytest.raises(LookupError, match='run "nope" does not exist'):
        EngineApi(api.services).wait_for_run("nope", timeout=5)
