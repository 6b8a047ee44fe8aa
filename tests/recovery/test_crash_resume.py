"""Real worker processes killed (SIGKILL) or frozen (SIGSTOP) mid-step; the watchdog reclaims their job and a
new worker process continues the run from its last completed step."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from engine.flow import flow_from_data
from engine.host import EngineServices
from engine.store.models import AppliedEvent, DeadLetter
from tests.engine.conftest import make_flow
from tests.recovery.conftest import HoldingSite, WorkerProcess, wait_until

T = {"id": "start", "type": "trigger.manual"}


def _flow(flow_id: str, site: HoldingSite, method: str) -> dict[str, Any]:
    return make_flow(flow_id, [
        T,
        {"id": "first", "type": "http.request", "config": {"method": "GET", "url": site.url + "/first"}},
        {"id": "second", "type": "http.request", "config": {"method": method, "url": site.url + "/hold"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.second.body.count }}"}},
    ], [("start", "first"), ("first", "second"), ("second", "done")])


def _start_run(engine: EngineServices, document: dict[str, Any]) -> str:
    engine.publish_flow(flow_from_data(document))
    return engine.create_run(document["id"], {}).run_id


def _counts(engine: EngineServices) -> tuple[int, int]:
    assert engine.sql is not None
    with engine.sql.connect() as conn:
        applied = conn.execute(sa.select(sa.func.count()).select_from(AppliedEvent)).scalar_one()
        dead = conn.execute(sa.select(sa.func.count()).select_from(DeadLetter)).scalar_one()
    return applied, dead


def _kill_mid_step(supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], site: HoldingSite,
                   method: str) -> dict[str, Any]:
    first = spawn_worker()
    run_id = _start_run(supervisor, _flow(f"crash-{method.lower()}", site, method))
    wait_until(lambda: site.count("/hold") == 1, what="the first worker to be inside the slow step")
    first.signal(signal.SIGKILL)
    first.proc.wait(5)
    spawn_worker()
    return supervisor.wait_for_run(run_id, timeout=20)


def test_an_idempotent_step_in_flight_runs_again_and_earlier_steps_do_not(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    run = _kill_mid_step(supervisor, spawn_worker, holding_site, "GET")
    assert run["status"] == "succeeded", run
    assert run["result"] == 2  # the second call of /hold answered it
    assert holding_site.count("/first") == 1
    assert holding_site.count("/hold") == 2
    statuses = {step["step"]: step["status"] for step in run["steps"]}
    assert statuses == {"start": "succeeded", "first": "succeeded", "second": "succeeded", "done": "succeeded"}


def test_a_non_idempotent_step_in_flight_fails_the_run_and_says_the_user_decides(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    run = _kill_mid_step(supervisor, spawn_worker, holding_site, "POST")
    assert run["status"] == "failed", run
    assert run["error_type"] == "step_not_idempotent"
    assert "you decide" in run["error"] and '"second"' in run["error"]
    assert holding_site.count("/hold") == 1  # never posted twice
    assert holding_site.count("/first") == 1
    second = next(step for step in run["steps"] if step["step"] == "second")
    assert second["status"] == "failed" and second["error_type"] == "step_not_idempotent"


def test_a_zombie_worker_cannot_complete_the_job_taken_from_it(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    zombie = spawn_worker()
    run_id = _start_run(supervisor, _flow("zombie", holding_site, "GET"))
    wait_until(lambda: holding_site.count("/hold") == 1, what="the first worker to be inside the slow step")
    zombie.signal(signal.SIGSTOP)
    spawn_worker()
    run = supervisor.wait_for_run(run_id, timeout=20)
    assert run["status"] == "succeeded" and run["result"] == 2, run
    before = _counts(supervisor)

    holding_site.release.set()  # the zombie's own call of /hold now answers (count 1)
    zombie.signal(signal.SIGCONT)
    wait_until(lambda: "fenced" in zombie.log(), what="the zombie to try to write its result")
    client = supervisor.require_handles().client
    assert client.xlen(supervisor.keys.events) == 0  # the fenced write added no event
    wait_until(lambda: zombie.proc.poll() is None and "fenced" in zombie.log(), what="the zombie to go on serving")
    after_run = supervisor.get_run(run_id)
    assert after_run is not None
    assert (after_run["status"], after_run["result"]) == ("succeeded", 2)
    assert after_run["steps"] == run["steps"]
    assert _counts(supervisor) == before  # no event applied, none dead-lettered


def test_a_run_killed_after_resuming_from_a_park_continues_after_it(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    document = make_flow("parked-crash", [
        T,
        {"id": "pause", "type": "queue", "config": {"delay": "1s"}},
        {"id": "call", "type": "http.request", "config": {"method": "GET", "url": holding_site.url + "/hold"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.call.body.count }}"}},
    ], [("start", "pause"), ("pause", "call"), ("call", "done")])
    first = spawn_worker()
    run_id = _start_run(supervisor, document)
    wait_until(lambda: holding_site.count("/hold") == 1, what="the resumed run to be inside its slow step")
    first.signal(signal.SIGKILL)
    first.proc.wait(5)
    spawn_worker()
    run = supervisor.wait_for_run(run_id, timeout=20)
    assert run["status"] == "succeeded" and run["result"] == 2, run
    assert holding_site.count("/hold") == 2
    statuses = {step["step"]: step["status"] for step in run["steps"]}
    assert statuses == {"start": "succeeded", "pause": "succeeded", "call": "succeeded", "done": "succeeded"}


def _killed_during_hold(supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], site: HoldingSite,
                        document: dict[str, Any]) -> dict[str, Any]:
    """Run `document` on a worker process killed (SIGKILL) inside its first call of /hold; a second one goes on."""
    first = spawn_worker()
    run_id = _start_run(supervisor, document)
    wait_until(lambda: site.count("/hold") == 1, what="the first worker to be inside the call of /hold")
    first.signal(signal.SIGKILL)
    first.proc.wait(5)
    spawn_worker()
    return supervisor.wait_for_run(run_id, timeout=20)


def _one_call(flow_id: str, site: HoldingSite, method: str, idempotent: bool) -> dict[str, Any]:
    return make_flow(flow_id, [
        T,
        {"id": "call", "type": "http.request", "idempotent": idempotent,
         "config": {"method": method, "url": site.url + "/hold"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.call.body.count }}"}},
    ], [("start", "call"), ("call", "done")])


def test_a_post_marked_idempotent_runs_again(supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess],
                                             holding_site: HoldingSite) -> None:
    run = _killed_during_hold(supervisor, spawn_worker, holding_site, _one_call("post-again", holding_site, "POST",
                                                                                True))
    assert (run["status"], run["result"]) == ("succeeded", 2), run
    assert holding_site.count("/hold") == 2


def test_a_get_marked_not_idempotent_fails_and_says_the_user_decides(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    run = _killed_during_hold(supervisor, spawn_worker, holding_site, _one_call("get-once", holding_site, "GET",
                                                                                False))
    assert (run["status"], run["error_type"]) == ("failed", "step_not_idempotent"), run
    assert '"call"' in run["error"] and "you decide" in run["error"]
    assert holding_site.count("/hold") == 1


def _foreach(flow_id: str, site: HoldingSite, method: str) -> dict[str, Any]:
    """A foreach over two items, one at a time; each iteration calls /before, then /hold with `method`."""
    return make_flow(flow_id, [
        T,
        {"id": "each", "type": "foreach", "config": {"items": "{{ [1, 2] }}", "concurrency": 1,
                                                       "output_key": "calls"}},
        {"id": "before", "type": "http.request", "config": {"method": "GET", "url": site.url + "/before",
                                                             "output_key": "seen"}},
        {"id": "hold", "type": "http.request", "config": {"method": method, "url": site.url + "/hold?i={{ item }}",
                                                           "output_key": "held"}},
        {"id": "done", "type": "terminal",
         "config": {"output": "{{ state.calls | map(attribute='held') | map(attribute='body') "
                              "| map(attribute='count') | list }}"}},
    ], [("start", "each"), ("each", "item", "before"), ("before", "hold"), ("each", "done", "done")])


def test_a_foreach_with_an_idempotent_body_runs_its_iterations_again_whole(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    run = _killed_during_hold(supervisor, spawn_worker, holding_site, _foreach("each-get", holding_site, "GET"))
    assert run["status"] == "succeeded", run
    assert run["result"] == [2, 3]  # the killed call of /hold answered nobody
    # Iteration 0 had finished /before when its worker died: the iteration ran again whole, /before included.
    assert (holding_site.count("/before"), holding_site.count("/hold")) == (3, 3)
    statuses = {step["step"]: step["status"] for step in run["steps"]}
    assert statuses == {"start": "succeeded", "each": "succeeded", "before[0]": "succeeded",
                        "hold[0]": "succeeded", "before[1]": "succeeded", "hold[1]": "succeeded",
                        "done": "succeeded"}


def test_a_foreach_with_a_post_in_its_body_fails_and_says_the_user_decides(
        supervisor: EngineServices, spawn_worker: Callable[[], WorkerProcess], holding_site: HoldingSite) -> None:
    run = _killed_during_hold(supervisor, spawn_worker, holding_site, _foreach("each-post", holding_site, "POST"))
    assert (run["status"], run["error_type"]) == ("failed", "step_not_idempotent"), run
    assert '"each"' in run["error"] and "you decide" in run["error"]
    assert (holding_site.count("/before"), holding_site.count("/hold")) == (1, 1)  # nothing posted twice
