"""Schedule triggers with an injected ManualClock: disabled until enabled, once per fire time across two engine
processes (real child processes ticked at the test's time), latest missed time only, cron in a timezone,
disabled flows counted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from engine.config import EngineConfig
from engine.publish import get_version
from engine.triggers.schedules import Scheduler, latest_fire_time
from engine.triggers.settings import counters, set_enabled
from tests.api.conftest import Api, flow_doc
from tests.conftest import ROOT

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


class SchedulerProcess:
    """A `tests.api.scheduler_proc` child on the test's Redis and database."""

    def __init__(self, config: EngineConfig, data_dir: Path, processes: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.api.scheduler_proc", str(data_dir), str(config.redis_url),
             str(config.db_url), config.key_prefix, str(processes)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert self.read() == "ready"

    def read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def tick(self, now: float) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"tick {now!r}\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def test_two_engine_processes_start_one_run_per_fire_time(api: Api, tmp_path: Path) -> None:
    api.publish(EVERY)
    _enable(api)
    processes = [SchedulerProcess(api.services.config, tmp_path / f"engine-{n}", 2) for n in range(2)]
    try:
        started = []
        for _ in range(3):
            now = api.clock.advance(600)
            for process in processes:  # both tick the same fire time at once, each reaching create_run
                process.tick(now)
            fired = sorted(json.loads(process.read())[0] for process in processes)
            assert [outcome for outcome, _, _ in fired] == ["duplicate", "started"], fired
            assert {fire for _, fire, _ in fired} == {now} and len({run_id for _, _, run_id in fired}) == 1
            started.append(fired[1][2])
    finally:
        for process in processes:
            process.close()
    runs = api.services.list_runs(flow_id="tick")
    assert sorted(run["id"] for run in runs) == sorted(started) and len(set(started)) == 3
    for run_id in started:
        assert api.services.wait_for_run(run_id, timeout=10)["status"] == "succeeded"


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
