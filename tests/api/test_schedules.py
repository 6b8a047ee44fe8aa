"""Schedule triggers with an injected ManualClock: disabled until enabled, once per fire time across two engine
processes' schedulers, latest missed time only, cron in a timezone, disabled flows counted."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

from engine.config import EngineConfig
from engine.publish import get_version
from engine.runtime.services import EngineServices
from engine.triggers.schedules import Fired, Scheduler, latest_fire_time
from engine.triggers.settings import counters, set_enabled
from tests.api.conftest import Api, flow_doc

EVERY = flow_doc("tick", [
    {"id": "clock", "type": "trigger.schedule", "config": {"every": "10m"}},
    {"id": "done", "type": "terminal"},
], [("clock", "done")])


def _enable(api: Api, flow_id: str = "tick") -> None:
    assert api.services.sql is not None and api.services.handles is not None
    _, flow = get_version(api.services.sql, flow_id)
    set_enabled(api.services.handles.client, api.services.keys, flow, "trigger.schedule", True, api.clock.now())


def _scheduler(api: Api) -> Scheduler:
    assert api.services.triggers is not None
    scheduler: Scheduler = api.services.triggers.scheduler
    return scheduler


def test_schedules_start_disabled_then_fire_once_per_time(api: Api) -> None:
    api.publish(EVERY)
    scheduler = _scheduler(api)
    api.clock.advance(3600)
    assert scheduler.tick() == []
    _enable(api)
    api.clock.advance(300)
    assert scheduler.tick() == []
    api.clock.advance(300)
    fired = scheduler.tick()
    assert [(f.node_id, f.outcome) for f in fired] == [("clock", "started")]
    assert scheduler.tick() == []
    run = api.services.wait_for_run(str(fired[0].run_id), timeout=10)
    assert (run["status"], run["trigger"]) == ("succeeded", "clock")
    # Down for 35 minutes: only the latest missed time runs.
    api.clock.advance(35 * 60)
    late = scheduler.tick()
    assert len(late) == 1 and late[0].fire_time == fired[0].fire_time + 30 * 60
    assert len(api.services.list_runs(flow_id="tick")) == 2


def test_two_engine_processes_start_one_run_per_fire_time(api: Api, tmp_path: Path) -> None:
    api.publish(EVERY)
    _enable(api)
    config = api.services.config
    other = EngineServices(EngineConfig(data_dir=tmp_path / "other", redis_url=config.redis_url,
                                        db_url=config.db_url, key_prefix=config.key_prefix),
                           clock=api.clock, workers=0, projector=False, due_waker=False, scheduler=False).start()
    try:
        schedulers = [_scheduler(api), other.triggers.scheduler]
        for _ in range(3):
            api.clock.advance(600)
            results: list[list[Fired]] = [[], []]
            threads = [threading.Thread(target=lambda found=found, scheduler=scheduler: found.extend(scheduler.tick()))
                       for found, scheduler in zip(results, schedulers, strict=True)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            outcomes = sorted(f.outcome for r in results for f in r)
            assert outcomes in (["started"], ["duplicate", "started"])
    finally:
        other.stop()
    assert len(api.services.list_runs(flow_id="tick")) == 3


def test_a_disabled_flow_schedule_starts_nothing_and_is_counted(api: Api) -> None:
    api.publish(EVERY)
    _enable(api)
    api.publish({**EVERY, "enabled": False})
    api.clock.advance(600)
    fired = _scheduler(api).tick()
    assert [(f.outcome, f.run_id) for f in fired] == [("disabled", None)]
    assert api.services.handles is not None
    assert counters(api.services.handles.client, api.services.keys) == {"tick/clock:disabled": 1}
    assert api.services.list_runs() == []


def test_cron_fire_times_follow_the_timezone() -> None:
    config = {"cron": "0 9 * * *", "timezone": "Europe/Berlin"}
    summer_morning = datetime(2026, 7, 1, 7, 30, tzinfo=UTC).timestamp()  # 09:30 in Berlin
    fire = latest_fire_time(config, summer_morning - 86400 + 3600, summer_morning)
    assert fire == datetime(2026, 7, 1, 7, 0, tzinfo=UTC).timestamp()
    assert latest_fire_time(config, fire or 0, summer_morning) is None
    exactly = datetime(2026, 12, 1, 8, 0, tzinfo=UTC).timestamp()  # 09:00 in Berlin in winter
    assert latest_fire_time(config, exactly - 60, exactly) == exactly
    assert latest_fire_time({"every": "10m"}, 1000.0, 1599.0) is None
    assert latest_fire_time({"every": "10m"}, 1000.0, 2800.0) == 2800.0


def test_times_while_disabled_never_fire_after_enabling_again(api: Api) -> None:
    api.publish(EVERY)
    _enable(api)
    scheduler = _scheduler(api)
    api.clock.advance(600)
    assert [f.outcome for f in scheduler.tick()] == ["started"]
    assert api.services.sql is not None and api.services.handles is not None
    _, flow = get_version(api.services.sql, "tick")
    set_enabled(api.services.handles.client, api.services.keys, flow, "trigger.schedule", False, api.clock.now())
    api.clock.advance(3600)
    assert scheduler.tick() == []
    _enable(api)
    assert scheduler.tick() == []
    api.clock.advance(600)
    assert [f.outcome for f in scheduler.tick()] == ["started"]
    assert len(api.services.list_runs(flow_id="tick")) == 2
