"""The provider simulator over real HTTP: answers, usage, limits with 429, background calls, auth."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from engine.clock import ManualClock
from engine.providers.simulator import ProviderSimulator
from engine.providers.tokens import parse_reset

TRIAGE = "Label this ticket as refund, bug or question: I was charged twice, I want a refund"


def chat(sim: ProviderSimulator, content: str, model: str = "sim-small", **extra: object) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": content}], **extra}
    return httpx.post(sim.url + "/chat/completions", json=body, headers={"authorization": "Bearer k1"}, timeout=5)


def test_same_prompt_gets_the_same_answer_with_usage(simulator: ProviderSimulator) -> None:
    first, second = chat(simulator, TRIAGE).json(), chat(simulator, TRIAGE).json()
    assert first == second
    assert first["choices"][0]["message"]["content"] == "refund"
    usage = first["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_triage_labels_follow_the_ticket(simulator: ProviderSimulator) -> None:
    def label(body: str) -> str:
        return str(chat(simulator, f"Label this ticket as refund, bug or question: {body}").json()
                   ["choices"][0]["message"]["content"])

    assert label("The app crashes on start") == "bug"
    assert label("Where do I change my avatar") == "question"
    other = chat(simulator, "Write a haiku").json()["choices"][0]["message"]["content"]
    assert other.startswith("Simulated answer ") and other != chat(simulator, "Write two").json()["choices"][0]


def test_max_tokens_truncates_with_finish_reason_length(simulator: ProviderSimulator) -> None:
    body = chat(simulator, "Write a haiku", max_tokens=2).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] <= 2


def test_request_limit_answers_429_with_headers_until_the_window_resets(
        start_simulator: Callable[..., ProviderSimulator], clock: ManualClock) -> None:
    sim = start_simulator(requests_per_window=2, window_seconds=60)
    clock.set(1_800_000_010.0)  # 10 s into a 60 s window
    ok = [chat(sim, "hello"), chat(sim, "hello")]
    assert [r.status_code for r in ok] == [200, 200]
    assert ok[0].headers["x-ratelimit-limit-requests"] == "2"
    assert [r.headers["x-ratelimit-remaining-requests"] for r in ok] == ["1", "0"]
    limited = chat(sim, "hello")
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "50"
    assert parse_reset(limited.headers["x-ratelimit-reset-requests"]) == 50.0
    assert limited.json()["error"]["type"] == "rate_limit_error"
    clock.advance(50)
    assert chat(sim, "hello").status_code == 200
    assert sim.counters.rate_limited == 1 and sim.counters.completed == 3


def test_limits_are_counted_per_api_key(start_simulator: Callable[..., ProviderSimulator]) -> None:
    sim = start_simulator(requests_per_window=1)
    body = {"model": "sim-small", "messages": [{"role": "user", "content": "hi"}]}
    statuses = [httpx.post(sim.url + "/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}
                           ).status_code for key in ("a", "b", "a")]
    assert statuses == [200, 200, 429]


def test_token_limit_counts_prompt_and_max_tokens(start_simulator: Callable[..., ProviderSimulator]) -> None:
    sim = start_simulator(tokens_per_window=100)
    first = chat(sim, "x" * 40, max_tokens=50)  # 10 + 3 prompt tokens, 50 allowed for the answer
    assert first.status_code == 200
    assert first.headers["x-ratelimit-remaining-tokens"] == "37"
    assert chat(sim, "x" * 40, max_tokens=50).status_code == 429
    assert chat(sim, "x" * 40, max_tokens=20).status_code == 200


def test_background_call_polls_in_progress_until_done(simulator: ProviderSimulator, clock: ManualClock) -> None:
    started = chat(simulator, TRIAGE, background=True)
    assert started.status_code == 202
    call_id = started.json()["id"]
    poll = httpx.get(f"{simulator.url}/responses/{call_id}")
    assert poll.json()["status"] == "in_progress"
    clock.advance(5)
    done = httpx.get(f"{simulator.url}/responses/{call_id}").json()
    assert done["status"] == "completed"
    assert done["output"]["choices"][0]["message"]["content"] == "refund"
    assert httpx.get(f"{simulator.url}/responses/resp_unknown").status_code == 404


def test_models_lists_answering_and_fault_models(simulator: ProviderSimulator) -> None:
    ids = {m["id"] for m in httpx.get(simulator.url + "/models").json()["data"]}
    assert {"sim-small", "sim-large", "sim-fault-500", "sim-fault-drop"} <= ids


def test_api_keys_are_enforced_when_configured(start_simulator: Callable[..., ProviderSimulator]) -> None:
    sim = start_simulator(api_keys=("k1",))
    assert chat(sim, "hi").status_code == 200
    wrong = httpx.post(sim.url + "/chat/completions", json={"model": "sim-small", "messages": []},
                       headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401


def test_malformed_body_is_400(simulator: ProviderSimulator) -> None:
    response = httpx.post(simulator.url + "/chat/completions", json={"messages": "no"})
    assert response.status_code == 400
    assert "model" in response.json()["error"]["message"]


def test_fault_500_by_model_name_and_by_header(simulator: ProviderSimulator) -> None:
    assert chat(simulator, "hi", model="sim-fault-500").status_code == 500
    by_header = httpx.post(simulator.url + "/chat/completions", headers={"x-sim-fault": "garbage"},
                           json={"model": "sim-small", "messages": [{"role": "user", "content": "hi"}]})
    assert by_header.status_code == 200 and by_header.text.startswith("<html>")
    assert simulator.counters.faults == 2


def test_latency_delays_each_answer(start_simulator: Callable[..., ProviderSimulator]) -> None:
    sim = start_simulator(latency_ms=150)
    response = chat(sim, "hi")
    assert response.elapsed.total_seconds() >= 0.14
