"""Provider-area fixtures: a real simulator over HTTP on a free port, a manual clock, provider settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from engine.clock import ManualClock
from engine.providers.config import ProviderConfig, simulator_provider
from engine.providers.simulator import ProviderSimulator, SimulatorSettings


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def start_simulator(clock: ManualClock) -> Iterator[Callable[..., ProviderSimulator]]:
    """Start a simulator with the given settings on the test's clock; stopped afterwards."""
    started: list[ProviderSimulator] = []

    def start(**settings: object) -> ProviderSimulator:
        simulator = ProviderSimulator(port=0, settings=SimulatorSettings(**settings), clock=clock)  # type: ignore[arg-type]
        started.append(simulator.start())
        return simulator

    yield start
    for simulator in started:
        simulator.stop()


@pytest.fixture
def simulator(start_simulator: Callable[..., ProviderSimulator]) -> ProviderSimulator:
    """An unlimited simulator with no latency."""
    return start_simulator(hang_seconds=5.0)


@pytest.fixture
def provider(simulator: ProviderSimulator) -> ProviderConfig:
    return simulator_provider(simulator.url)
