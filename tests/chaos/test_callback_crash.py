"""A worker killed for real around the resume of `wait.callback` runs: every run still resumes once, through
`received` with the first POST's body, and a POST after the crash is refused (`409 already_resumed`)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from engine.parking.callback_links import callback_token
from engine.parking.callback_resume import resume_callback
from engine.runtime.emitter import EVENT_FIELD
from tests.chaos.conftest import TRIGGER, Deployment
from tests.engine.conftest import make_flow

RUNS = 4
CRASHES = ["step.before_effect:1", "step.after_effect:1", "worker.before_ack:1", "worker.after_ack:1",
           "worker.in_drop:1"]


def _callback_flow() -> dict[str, Any]:
    wait = {"id": "wait", "type": "wait.callback", "config": {"timeout": "1h", "output_key": "reply"}}
    done = {"id": "done", "type": "terminal", "config": {"output": "{{ state.reply.n }}"}}
    late = {"id": "late", "type": "terminal", "config": {"output": "late"}}
    return make_flow("callback", [TRIGGER, wait, done, late],
                     [("start", "wait"), ("wait", "received", "done"), ("wait", "timed_out", "late")])


def _wait_completions(deployment: Deployment, run_id: str) -> list[list[str]]:
    """The ports of every `step_completed` of node `wait` the projector applied for the run (from the journal,
    which the projector writes just after its commit: SQL can show the run ended a moment before)."""
    client = deployment.wait_projected()
    found = []
    journal: Any = client.xrange(deployment.handle.keys.events_journal)
    for _id, fields in journal:
        event = orjson.loads(fields[EVENT_FIELD])
        if event.get("run_id") == run_id and event.get("type") == "step_completed" and event.get("node") == "wait":
            found.append(list(event.get("ports") or []))
    return found


@pytest.mark.parametrize(("deployment", "crash"), [("sqlite", c) for c in CRASHES] + [("postgres", CRASHES[2])],
                         indirect=["deployment"])
def test_a_worker_killed_around_a_callback_resume_resumes_each_run_once(deployment: Deployment, crash: str) -> None:
    deployment.publish(_callback_flow())
    run_ids = deployment.create("callback", RUNS)
    parker = deployment.start()
    deployment.wait_for(run_ids, frozenset({"waiting"}), timeout=60)
    deployment.stop(parker)

    handles = deployment.handle.require_handles()
    tokens = {run_id: callback_token(deployment.handle.box, run_id, "wait") for run_id in run_ids}
    for index, run_id in enumerate(run_ids):
        outcome = resume_callback(handles, tokens[run_id], orjson.dumps({"n": index}))
        assert (outcome.status, outcome.code) == (200, "resumed"), outcome
    if crash.startswith("worker.in_drop"):
        deployment.duplicate_resumes(run_ids)  # a late due waker's job, dropped: the crash is in the drop

    deployment.expect_crash(deployment.start(crash), crash.partition(":")[0])
    deployment.start()
    runs = deployment.wait_for(run_ids, frozenset({"succeeded", "failed", "cancelled"}), timeout=60)
    for index, run_id in enumerate(run_ids):
        run = runs[run_id]
        assert (run["status"], run["result"]) == ("succeeded", index), (run, deployment.logs())
        assert run["state"]["reply"] == {"n": index}
        assert _wait_completions(deployment, run_id) == [["received"]]
        again = resume_callback(handles, tokens[run_id], b'{"n": -1}')
        assert (again.status, again.code) == (409, "already_resumed")
    deployment.check_projection()
