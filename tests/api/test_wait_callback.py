"""`wait.callback` end to end over real HTTP: the URL a template gets, the first POST resumes through `received`
with its body under `output_key`, later ones `409`, unknown tokens `404` writing nothing, bad bodies refused,
the timeout through `timed_out` on the manual clock; on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import sqlalchemy as sa

from engine.parking.callback_links import callback_token
from engine.parking.callback_resume import MAX_CALLBACK_BODY_BYTES, resume_callback
from engine.store.models import AppliedEvent
from tests.api.conftest import Api, flow_doc
from tests.engine.conftest import wait_until

PUBLIC = "https://hooks.example.com/lockgate"


def callback_flow(flow_id: str = "cb", timeout: str = "1h", before: list[dict[str, Any]] | None = None,
                  ) -> dict[str, Any]:
    """trigger → (before…) → announce (renders the URL) → wait → done (received) / late (timed_out)."""
    extra = before or []
    chain = ["start", *(n["id"] for n in extra), "announce", "wait"]
    return flow_doc(flow_id, [
        {"id": "start", "type": "trigger.manual"},
        *extra,
        {"id": "announce", "type": "set", "config": {"values": {"resume_at": "{{ callback_url('wait') }}"}}},
        {"id": "wait", "type": "wait.callback", "config": {"timeout": timeout, "output_key": "reply"}},
        {"id": "done", "type": "terminal", "config": {"output": "{{ state.reply.status }}"}},
        {"id": "late", "type": "terminal", "config": {"output": "{{ 'late' }}"}},
    ], [*itertools.pairwise(chain), ("wait", "received", "done"), ("wait", "timed_out", "late")])


@pytest.fixture(autouse=True)
def _public_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCKGATE_PUBLIC_URL", PUBLIC + "/")


def _park(api: Api, flow: dict[str, Any] | None = None) -> tuple[str, str]:
    """Start a run of `flow` and wait until it parks on `wait`; returns (run id, the callback path)."""
    api.publish(flow or callback_flow())
    run_id = api.services.create_run(str((flow or {}).get("id", "cb"))).run_id
    run = _waiting_at(api, run_id, "wait")
    url = run["state"]["resume_at"]
    assert url.startswith(PUBLIC + "/callbacks/"), url
    return run_id, urlsplit(url).path.removeprefix("/lockgate")


def _waiting_at(api: Api, run_id: str, node: str) -> dict[str, Any]:
    def parked() -> dict[str, Any] | None:
        run = api.services.get_run(run_id, with_steps=False)
        return run if run and run["status"] == "waiting" and (run["waiting_on"] or {}).get("node") == node else None
    return dict(wait_until(parked, timeout=10, what=f"run {run_id} to park at {node}"))


def _redis_snapshot(api: Api) -> dict[bytes, Any]:
    client = api.services.require_handles().client
    keys = sorted(client.scan_iter(match=f"{api.services.keys.prefix}:*", count=1000))
    values: dict[bytes, Any] = {}
    for key in keys:
        kind = client.type(key)
        if kind == b"string":
            values[key] = client.get(key)
        elif kind == b"zset":
            values[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            values[key] = client.hgetall(key)
        elif kind == b"stream":
            values[key] = client.xlen(key)
    return values


def _sql_snapshot(api: Api, run_id: str) -> tuple[Any, ...]:
    run = api.services.get_run(run_id)
    assert run is not None
    return run["status"], run["waiting_on"], run["state"], [(s["step"], s["status"]) for s in run["steps"]]


def _applied(api: Api, run_id: str, event_type: str) -> int:
    """How many events of `event_type` the projector applied for the run."""
    with api.services.require_handles().sql.connect() as conn:
        return len(conn.execute(sa.select(AppliedEvent.event_id).where(AppliedEvent.run_id == run_id,
                                                                       AppliedEvent.event_type == event_type)).all())


def test_the_first_post_resumes_through_received_with_its_body_and_a_second_gets_409(any_db_api: Api) -> None:
    run_id, path = _park(any_db_api)
    answer = any_db_api.http.post(path, json={"status": "ok", "items": [1, 2]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["run_id"] == run_id and answer.json()["node"] == "wait"
    run = any_db_api.services.wait_for_run(run_id, timeout=10)
    assert run["status"] == "succeeded" and run["result"] == "ok", run
    assert run["state"]["reply"] == {"status": "ok", "items": [1, 2]}
    assert [s["ports"] for s in run["steps"] if s["step"] == "wait"] == [["received"]]

    again = any_db_api.http.post(path, json={"status": "second"})
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_resumed"
    assert any_db_api.services.get_run(run_id)["state"]["reply"] == {"status": "ok", "items": [1, 2]}  # type: ignore[index]


def test_unknown_and_forged_tokens_get_404_and_write_nothing(any_db_api: Api) -> None:
    run_id, path = _park(any_db_api)
    token = path.rsplit("/", 1)[1]
    any_db_api.idle.wait()
    redis_before, sql_before = _redis_snapshot(any_db_api), _sql_snapshot(any_db_api, run_id)
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    box = any_db_api.services.box
    other_node = callback_token(box, run_id, "announce")  # a real MAC, but not of a wait.callback node
    other_run = callback_token(box, "0" * 32, "wait")  # a real MAC of a run that does not exist
    for bad in (forged, other_node, other_run, "nonsense", run_id, f"{run_id}.{'x' * 43}"):
        answer = any_db_api.http.post(f"/callbacks/{bad}", json={"status": "forged"})
        assert answer.status_code == 404, (bad, answer.text)
        assert answer.json()["error"]["code"] in ("unknown_callback", "not_found")
    any_db_api.idle.wait()
    assert _redis_snapshot(any_db_api) == redis_before
    assert _sql_snapshot(any_db_api, run_id) == sql_before


def test_bad_bodies_are_refused_and_change_nothing(any_db_api: Api) -> None:
    run_id, path = _park(any_db_api)
    any_db_api.idle.wait()
    redis_before, sql_before = _redis_snapshot(any_db_api), _sql_snapshot(any_db_api, run_id)
    too_large = any_db_api.http.post(path, content=b'{"pad": "' + b"x" * (2 << 20) + b'"}',
                                     headers={"content-type": "application/json"})
    assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "too_large"
    bad_json = any_db_api.http.post(path, content=b'{"status": ', headers={"content-type": "application/json"})
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "bad_json"
    empty = any_db_api.http.post(path, content=b"")
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "bad_json"
    deep = any_db_api.http.post(path, content=b"[" * 100 + b"]" * 100)
    assert deep.status_code == 422 and deep.json()["error"]["code"] == "bad_body"
    assert "$" in deep.json()["error"]["message"]
    wrong_method = any_db_api.http.get(path)
    assert wrong_method.status_code == 405
    # The engine function applies the limit itself too (a server in front of it may not).
    direct = resume_callback(any_db_api.services.require_handles(), path.rsplit("/", 1)[1],
                             b" " * (MAX_CALLBACK_BODY_BYTES + 1))
    assert (direct.status, direct.code) == (413, "too_large")
    any_db_api.idle.wait()
    assert _redis_snapshot(any_db_api) == redis_before
    assert _sql_snapshot(any_db_api, run_id) == sql_before
    # Still waiting: a good POST afterwards wins.
    assert any_db_api.http.post(path, json={"status": "fine"}).status_code == 200
    assert any_db_api.services.wait_for_run(run_id, timeout=10)["result"] == "fine"


def test_the_timeout_leaves_through_timed_out_and_a_late_post_gets_409(any_db_api: Api) -> None:
    run_id, path = _park(any_db_api)
    run = any_db_api.services.get_run(run_id, with_steps=False)
    assert run is not None and run["waiting_on"]["reason"] == "callback"
    any_db_api.clock.advance(3600)
    assert any_db_api.services.waker is not None
    any_db_api.services.waker.due.nudge()
    run = any_db_api.services.wait_for_run(run_id, timeout=10)
    assert run["status"] == "succeeded" and run["result"] == "late", run
    assert [s["ports"] for s in run["steps"] if s["step"] == "wait"] == [["timed_out"]]
    assert "reply" not in run["state"]
    late = any_db_api.http.post(path, json={"status": "too late"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "already_resumed"
    assert "timeout" in late.json()["error"]["message"]


def test_twenty_parallel_posts_of_one_token_give_one_200_and_one_resume(any_db_api: Api) -> None:
    run_id, path = _park(any_db_api)
    barrier = threading.Barrier(20)
    answers: list[tuple[int, int, str]] = []

    def post(index: int) -> None:
        with httpx.Client(base_url=any_db_api.server.url, timeout=20) as client:
            barrier.wait()
            answer = client.post(path, json={"status": f"from-{index}"})
            answers.append((index, answer.status_code, answer.json().get("error", {}).get("code", "")))

    threads = [threading.Thread(target=post, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [index for index, status, _code in answers if status == 200]
    assert len(winners) == 1, answers
    assert sorted((status, code) for _i, status, code in answers if status != 200) == [(409, "already_resumed")] * 19
    run = any_db_api.services.wait_for_run(run_id, timeout=10)
    assert run["result"] == f"from-{winners[0]}"
    any_db_api.idle.wait()
    assert _applied(any_db_api, run_id, "run_resumed") == 1
    assert _applied(any_db_api, run_id, "step_completed") == 4  # start, announce, wait, done: each once


def test_a_post_before_the_node_runs_is_taken_when_it_gets_there(any_db_api: Api) -> None:
    flow = callback_flow("early", before=[{"id": "hold", "type": "queue", "config": {"delay": "10m"}}])
    flow["nodes"][2]["config"]["values"]["resume_at"] = "{{ callback_url('wait') }}"
    any_db_api.publish(flow)
    run_id = any_db_api.services.create_run("early").run_id
    _waiting_at(any_db_api, run_id, "hold")
    token = callback_token(any_db_api.services.box, run_id, "wait")
    answer = any_db_api.http.post(f"/callbacks/{token}", json={"status": "early bird"})
    assert answer.status_code == 200, answer.text
    any_db_api.clock.advance(600)
    assert any_db_api.services.waker is not None
    any_db_api.services.waker.due.nudge()
    run = any_db_api.services.wait_for_run(run_id, timeout=10)
    assert run["status"] == "succeeded" and run["result"] == "early bird", run
    assert run["state"]["resume_at"].endswith(f"/callbacks/{token}")


def test_a_post_for_a_run_that_ended_changes_nothing(any_db_api: Api) -> None:
    run_id, path = _park(any_db_api)
    any_db_api.services.cancel_run(run_id)
    any_db_api.services.wait_for_run(run_id, timeout=10)
    answer = any_db_api.http.post(path, json={"status": "ok"})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "run_not_waiting"
    client = any_db_api.services.require_handles().client
    assert client.get(any_db_api.services.keys.callback_claim(run_id, "wait")) is None


@pytest.fixture
def no_public_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset before the engine is built: it reads its settings once, at construction."""
    monkeypatch.delenv("LOCKGATE_PUBLIC_URL")


def test_without_a_public_url_the_base_is_the_engine_http_url(no_public_url: None, any_db_api: Api) -> None:
    any_db_api.publish(callback_flow())
    run_id = any_db_api.services.create_run("cb").run_id
    url = _waiting_at(any_db_api, run_id, "wait")["state"]["resume_at"]
    assert url.startswith(any_db_api.server.url + "/callbacks/"), url
    assert any_db_api.http.post(url, json={"status": "direct"}).status_code == 200
    assert any_db_api.services.wait_for_run(run_id, timeout=10)["result"] == "direct"
