"""Providers entered in the Settings dialog are the engine's providers: providers.json in the data folder
with the key by reference, the key resolved from the secret store when the engine calls the provider."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.provider_file import SETTINGS_MANAGER, SIMULATOR_MANAGER, write_settings_providers
from app.settings import AppSettings, ProviderSetting, SecretStore, provider_secret_name
from app.settings_dialog import SettingsDialog
from app.window import MainWindow
from engine.flow import flow_from_data
from engine.providers.config import simulator_provider
from engine.providers.registry import PROVIDERS_FILE, MissingProviderKey, ProviderRegistry, providers_in
from engine.providers.simulator import ProviderSimulator, SimulatorSettings
from engine.read_models import Run, RunSummary
from tests.app.cells import cell

PRO_KEY = "sk-pro-secret-7777abcd"


@pytest.fixture
def keyed_simulator() -> Iterator[ProviderSimulator]:
    """A provider simulator that answers only requests carrying PRO_KEY."""
    simulator = ProviderSimulator(port=0, settings=SimulatorSettings(api_keys=(PRO_KEY,))).start()
    yield simulator
    simulator.stop()


def model_flow(provider: str) -> object:
    return flow_from_data({
        "format": "lockgate.flow/1", "id": "pro-call", "name": "Call the pro provider",
        "nodes": [
            {"id": "start", "type": "trigger.manual", "position": [0, 0], "config": {}},
            {"id": "reserve", "type": "budget.reserve", "position": [100, 0],
             "config": {"for": "model", "amount": 0.1}},
            {"id": "model", "type": "ai.model", "position": [200, 0],
             "config": {"provider": provider, "model": "sim-small", "prompt": "Hi", "output_key": "out"}},
            {"id": "done", "type": "terminal", "position": [400, 0], "config": {}},
        ],
        "edges": [{"from": "start", "to": "reserve"}, {"from": "reserve", "to": "model"},
                  {"from": "model", "to": "done"}],
    })


def add_provider_in_dialog(qtbot, settings: AppSettings, store: SecretStore, url: str, key: str) -> None:
    dialog = SettingsDialog(settings, store=store)
    qtbot.addWidget(dialog)
    dialog._add_provider_row(None)
    table = dialog.providers_table
    cell(table, 0, 0).setText("pro")
    cell(table, 0, 1).setText(url)
    cell(table, 0, 3).setText('{"sim-small": {"input": 0.5, "output": 1.5}}')
    cell(table, 0, 4).setText("3")
    dialog.set_provider_key(0, key)
    dialog.save()


def test_a_provider_added_in_settings_is_called_by_a_run_with_its_key(
        qtbot, tmp_path: Path, app_settings: AppSettings, keyed_simulator: ProviderSimulator,
        open_engine_window: Callable[..., MainWindow]) -> None:
    data_dir = tmp_path / "data"
    store = SecretStore(data_dir, use_keyring=False)
    add_provider_in_dialog(qtbot, app_settings, store, keyed_simulator.url.removesuffix("/v1"), PRO_KEY)

    written = (data_dir / PROVIDERS_FILE).read_text("utf-8")
    assert PRO_KEY not in written  # the key is referenced, never written next to the provider
    pro = next(p for p in providers_in(data_dir) if p.name == "pro")
    assert pro.connections[0].api_key_ref == provider_secret_name("pro")
    assert pro.connections[0].base_url == keyed_simulator.url and pro.capacity == 3
    assert pro.managed_by == SETTINGS_MANAGER and "sim-small" in pro.prices

    window = open_engine_window()
    bridge = window.bridge
    assert bridge is not None
    answers: list[object] = []
    bridge.publish(model_flow("pro"), lambda version, error: answers.append(error or version))
    qtbot.waitUntil(lambda: bool(answers), timeout=10_000)
    bridge.create_run("pro-call", {}, lambda created, error: answers.append(error or created))
    qtbot.waitUntil(lambda: len(answers) == 2, timeout=10_000)
    assert not isinstance(answers[1], BaseException), answers[1]

    def finished() -> bool:
        return any(r.status in ("succeeded", "failed") for r in window.runs.rows.values())

    qtbot.waitUntil(finished, timeout=20_000)
    row = next(iter(window.runs.rows.values()))
    assert row.status == "succeeded"
    assert keyed_simulator.counters.completed == 1  # the call carried the key the simulator requires
    # The Runs panel's cost comes from the engine's list_runs (the run was charged for the call).
    qtbot.waitUntil(lambda: (next(iter(window.runs.rows.values())).cost_usd or 0) > 0, timeout=20_000)
    # The engine's own queries carry what the app shows: cost per run, times per step (no SQL in the app).
    run_id = row.run_id
    answers: dict[str, object] = {}
    bridge.list_runs(lambda runs, error: answers.setdefault("list_runs", error or runs))
    bridge.get_run(run_id, lambda run, error: answers.setdefault("get_run", error or run))
    qtbot.waitUntil(lambda: len(answers) == 2, timeout=20_000)
    runs, run = answers["list_runs"], answers["get_run"]
    assert isinstance(runs, list) and isinstance(run, Run)
    assert isinstance(runs[0], RunSummary) and runs[0].id == run_id and (runs[0].cost_micros or 0) > 0
    assert [s.node for s in run.steps] == ["start", "reserve", "model", "done"]
    assert all(s.started_at and s.finished_at and s.started_at <= s.finished_at for s in run.steps)
    # The bundled simulator's `local` entry was added beside the Settings provider, not over it.
    names = {p.name: p.managed_by for p in providers_in(data_dir)}
    assert names == {"pro": SETTINGS_MANAGER, "local": SIMULATOR_MANAGER}


def test_a_missing_key_names_the_provider_and_the_fix(tmp_path: Path) -> None:
    write_settings_providers(tmp_path, [ProviderSetting("pro", "http://127.0.0.1:9/v1")], {"pro"})
    registry = ProviderRegistry(providers_in(tmp_path), secrets=lambda _name: None)
    with pytest.raises(MissingProviderKey, match=r"provider 'pro'.*Settings > Providers"):
        registry.adapter("pro")


def test_a_plaintext_key_in_providers_json_still_works(keyed_simulator: ProviderSimulator) -> None:
    provider = simulator_provider(keyed_simulator.url, name="old", api_key=PRO_KEY)
    registry = ProviderRegistry([provider], secrets=lambda _name: None)
    try:
        assert registry.adapter("old")._headers["authorization"] == f"Bearer {PRO_KEY}"
    finally:
        registry.close()


def test_no_settings_providers_leave_the_engine_default_alone(tmp_path: Path) -> None:
    write_settings_providers(tmp_path, [], set())
    assert not (tmp_path / PROVIDERS_FILE).exists()
    assert [p.name for p in providers_in(tmp_path)] == ["local"]


def test_settings_rewrite_their_entries_and_keep_hand_written_ones(tmp_path: Path) -> None:
    hand_written = simulator_provider("http://127.0.0.1:9/v1", name="mine", api_key="sk-by-hand")
    (tmp_path / PROVIDERS_FILE).write_text(json.dumps(
        {"providers": [hand_written.model_dump(mode="json")]}), "utf-8")
    write_settings_providers(tmp_path, [ProviderSetting("a", "http://127.0.0.1:9"), ProviderSetting("b", "http://x")],
                             set())
    write_settings_providers(tmp_path, [ProviderSetting("b", "http://127.0.0.1:10/v1")], set())
    providers = {p.name: p for p in providers_in(tmp_path)}
    assert sorted(providers) == ["b", "mine"]  # `a` was removed in Settings; the hand-written one stays
    assert providers["b"].connections[0].base_url == "http://127.0.0.1:10/v1"
    assert providers["b"].connections[0].api_key_ref == ""  # no key stored: none referenced
    assert providers["mine"].connections[0].api_key == "sk-by-hand"
