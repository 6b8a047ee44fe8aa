"""The OpenAI-compatible adapter making real HTTP calls to the simulator: parsing, cost, and each fault's error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from decimal import Decimal

import pytest

from engine.clock import ManualClock
from engine.providers.base import (
    BadResponse,
    ChatRequest,
    ConnectionLost,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    RateLimitTelemetry,
)
from engine.providers.config import ProviderConfig, UnknownModelPrice, provider_from_data, simulator_provider
from engine.providers.openai_compat import OpenAICompatAdapter
from engine.providers.simulator import ProviderSimulator

TRIAGE = ChatRequest.from_prompt("sim-small", "Label this ticket as refund, bug or question: please refund me")


class RecordingSink:
    def __init__(self) -> None:
        self.responses: list[tuple[str, str, RateLimitTelemetry]] = []
        self.limited: list[tuple[str, float]] = []

    def record_response(self, provider: str, connection: str, telemetry: RateLimitTelemetry) -> None:
        self.responses.append((provider, connection, telemetry))

    def record_rate_limited(self, provider: str, connection: str, retry_after: float,
                            telemetry: RateLimitTelemetry) -> None:
        self.limited.append((provider, retry_after))


def test_complete_parses_answer_usage_and_cost(provider: ProviderConfig) -> None:
    adapter = OpenAICompatAdapter(provider)
    result = adapter.complete(TRIAGE)
    assert result.text == "refund"
    assert result.prompt_tokens > 0 and result.completion_tokens == 2
    price = provider.prices["sim-small"]
    expected = (Decimal(result.prompt_tokens) * price.prompt_per_1m
                + Decimal(result.completion_tokens) * price.completion_per_1m)
    assert result.cost_micros == int(expected.to_integral_value(rounding="ROUND_CEILING"))
    assert result.cost_usd == Decimal(result.cost_micros) / 1_000_000
    assert result.connection == "main" and result.finish_reason == "stop"


def test_cost_uses_per_million_prices_exactly_and_rounds_up(provider: ProviderConfig) -> None:
    adapter = OpenAICompatAdapter(provider)
    assert adapter.cost_micros("sim-large", 1_000_000, 0) == 5_000_000  # $5.00 per 1M prompt tokens
    assert adapter.cost_micros("sim-large", 0, 1_000) == 15_000  # $15 per 1M completion tokens → $0.015
    assert adapter.cost_micros("sim-small", 1, 0) == 1  # $0.0000005 rounds up to one micro-dollar


def test_estimate_covers_the_real_cost(provider: ProviderConfig) -> None:
    adapter = OpenAICompatAdapter(provider)
    request = ChatRequest.from_prompt("sim-small", "Write a haiku about queues", max_tokens=50)
    estimate = adapter.estimate_cost_micros(request)
    result = adapter.complete(request)
    assert result.cost_micros <= estimate
    assert estimate == adapter.cost_micros("sim-small", result.prompt_tokens, 50)


def test_unpriced_model_fails_before_any_call(provider: ProviderConfig, simulator: ProviderSimulator) -> None:
    with pytest.raises(UnknownModelPrice, match="add it under prices"):
        OpenAICompatAdapter(provider).complete(ChatRequest.from_prompt("gpt-unknown", "hi"))
    assert simulator.counters.requests == 0


def test_telemetry_goes_to_the_sink(start_simulator: Callable[..., ProviderSimulator]) -> None:
    sim = start_simulator(requests_per_window=10, tokens_per_window=10_000)
    sink = RecordingSink()
    OpenAICompatAdapter(simulator_provider(sim.url), telemetry=sink).complete(TRIAGE)
    (name, connection, telemetry), = sink.responses
    assert (name, connection) == ("local", "main")
    assert telemetry.limit_requests == 10 and telemetry.remaining_requests == 9
    assert telemetry.limit_tokens == 10_000 and telemetry.remaining_tokens is not None
    assert telemetry.reset_requests_s is not None and 0 < telemetry.reset_requests_s <= 60


def test_429_raises_rate_limited_with_retry_after(start_simulator: Callable[..., ProviderSimulator],
                                                   clock: ManualClock) -> None:
    sim = start_simulator(requests_per_window=1, window_seconds=60)
    clock.set(1_800_000_030.0)
    sink = RecordingSink()
    adapter = OpenAICompatAdapter(simulator_provider(sim.url), telemetry=sink)
    adapter.complete(TRIAGE)
    with pytest.raises(RateLimited) as caught:
        adapter.complete(TRIAGE)
    assert caught.value.retry_after == pytest.approx(30.0)
    assert caught.value.retryable and caught.value.status_code == 429
    assert sink.limited == [("local", pytest.approx(30.0))]


def fault_adapter(provider: ProviderConfig, fault: str, timeout: float = 5.0) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(provider, extra_headers={"x-sim-fault": fault}, timeout_seconds=timeout)


def test_garbage_body_is_bad_response(provider: ProviderConfig) -> None:
    with pytest.raises(BadResponse, match="not JSON"):
        fault_adapter(provider, "garbage").complete(TRIAGE)


def test_500_is_a_retryable_provider_error(provider: ProviderConfig) -> None:
    with pytest.raises(ProviderError) as caught:
        fault_adapter(provider, "500").complete(TRIAGE)
    assert caught.value.status_code == 500 and caught.value.retryable
    assert type(caught.value) is ProviderError


def test_hang_is_a_timeout(provider: ProviderConfig) -> None:
    with pytest.raises(ProviderTimeout, match=r"did not answer within 0\.3s"):
        fault_adapter(provider, "hang", timeout=0.3).complete(TRIAGE)


def test_dropped_connection_is_connection_lost(provider: ProviderConfig) -> None:
    with pytest.raises(ConnectionLost, match="dropped mid-response"):
        fault_adapter(provider, "drop").complete(TRIAGE)


def test_fault_models_map_the_same_way(simulator: ProviderSimulator) -> None:
    provider = provider_from_data({
        "name": "local",
        "connections": [{"name": "main", "base_url": simulator.url}],
        "prices": {f"sim-fault-{f}": {"prompt_per_1m": 1, "completion_per_1m": 1} for f in ("garbage", "drop")},
    })
    adapter = OpenAICompatAdapter(provider)
    with pytest.raises(BadResponse):
        adapter.complete(ChatRequest.from_prompt("sim-fault-garbage", "hi"))
    with pytest.raises(ConnectionLost):
        adapter.complete(ChatRequest.from_prompt("sim-fault-drop", "hi"))


def test_nobody_listening_is_connection_lost() -> None:
    provider = simulator_provider("http://127.0.0.1:9/v1")
    with pytest.raises(ConnectionLost):
        OpenAICompatAdapter(provider, timeout_seconds=2).complete(TRIAGE)


def test_wrong_api_key_is_not_retryable(start_simulator: Callable[..., ProviderSimulator]) -> None:
    sim = start_simulator(api_keys=("right",))
    with pytest.raises(ProviderError) as caught:
        OpenAICompatAdapter(simulator_provider(sim.url, api_key="wrong")).complete(TRIAGE)
    assert caught.value.status_code == 401 and not caught.value.retryable


def test_async_complete(provider: ProviderConfig) -> None:
    result = asyncio.run(OpenAICompatAdapter(provider).acomplete(TRIAGE))
    assert result.text == "refund"


def test_async_maps_faults_too(provider: ProviderConfig) -> None:
    with pytest.raises(ConnectionLost):
        asyncio.run(fault_adapter(provider, "drop").acomplete(TRIAGE))


def test_background_start_and_poll(provider: ProviderConfig, clock: ManualClock) -> None:
    adapter = OpenAICompatAdapter(provider)
    call = adapter.start_background(TRIAGE)
    assert call.call_id.startswith("resp_") and call.connection == "main"
    assert adapter.poll_background(call) is None
    clock.advance(6)
    result = adapter.poll_background(call)
    assert result is not None and result.text == "refund" and result.cost_micros > 0


def test_provider_config_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"connections.*at least 1"):
        provider_from_data({"name": "x", "connections": []})
    with pytest.raises(ValueError, match="connection names repeat"):
        provider_from_data({"name": "x", "connections": [{"name": "a", "base_url": "u"},
                                                         {"name": "a", "base_url": "v"}]})
    with pytest.raises(ValueError, match=r"prices\.m\.prompt_per_1m"):
        provider_from_data({"name": "x", "connections": [{"name": "a", "base_url": "u"}],
                            "prices": {"m": {"prompt_per_1m": -1, "completion_per_1m": 1}}})
