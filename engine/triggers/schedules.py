"""Schedule triggers: cron (croniter, in the trigger's timezone) or `every`, fired by a scheduler thread.

Exactly once per fire time across engine processes: each fire starts its run through `create_run()`
with the idempotency key `schedule:<flow>:<node>:<fire epoch>`, so a second process firing the same
time gets the existing run back. After downtime only the latest missed fire time runs (no burst of
catch-up runs); times before the trigger was enabled never fire.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from engine.clock import Clock
from engine.durations import parse_duration
from engine.flow import Flow, Node
from engine.runtime.create import RunRefused, StartsRuns
from engine.runtime.handles import EngineHandles
from engine.runtime.inputs import InputError
from engine.triggers.catalog_index import LatestFlows
from engine.triggers.settings import count, record_last_fire, setting_of, trigger_idempotency_key

log = logging.getLogger("lockgate.schedules")
TICK_SECONDS = 1.0


def latest_fire_time(config: dict[str, Any], after: float, now: float) -> float | None:
    """The latest fire time in (after, now], or None when none falls there."""
    if config.get("every") is not None:
        period = parse_duration(config["every"])
        if period <= 0:
            return None
        # Interval fires are counted from the moment the trigger was enabled (`after` on first use).
        steps = int((now - after) // period)
        return after + steps * period if steps >= 1 else None
    cron = config.get("cron")
    if not cron:
        return None
    from croniter import croniter  # here: only a process whose scheduler fires a cron schedule needs it

    zone = ZoneInfo(config.get("timezone") or "UTC")
    start = datetime.fromtimestamp(now, UTC).astimezone(zone)
    previous = croniter(cron, start).get_prev(datetime)
    fire = previous.timestamp()
    # croniter's get_prev is strictly before `start`; a fire exactly at `now` counts too.
    following = croniter(cron, previous).get_next(datetime).timestamp()
    if following <= now:
        fire = following
    return fire if fire > after else None


@dataclass(frozen=True)
class Fired:
    flow_id: str
    node_id: str
    fire_time: float
    run_id: str | None
    outcome: str
    """started, duplicate (another process started it), disabled, refused."""


class Scheduler:
    """Fires enabled schedule triggers of the latest published versions; `tick()` is one pass."""

    def __init__(self, handles: EngineHandles, create_run: StartsRuns, clock: Clock) -> None:
        self.handles = handles
        self.create_run = create_run
        self.clock = clock
        self.latest = LatestFlows(handles.sql)

    def _schedules(self) -> list[tuple[Flow, Node]]:
        return [(flow, node) for flow in self.latest.with_trigger("trigger.schedule")
                for node in flow.nodes if node.type == "trigger.schedule"]

    def tick(self) -> list[Fired]:
        now = self.clock.now()
        fired: list[Fired] = []
        client, keys = self.handles.client, self.handles.keys
        for flow, node in self._schedules():
            setting = setting_of(client, keys, flow.id, node.id, node.type)
            if not setting.enabled:
                continue
            # The later of the last fire and the last enabling: times while it was disabled never fire.
            after = max((t for t in (setting.last_fire, setting.enabled_at) if t is not None), default=now)
            try:
                fire = latest_fire_time(node.config, after, now)
            except Exception as exc:  # publish validates schedules; one bad one must not stop the others
                count(client, keys, f"{flow.id}/{node.id}:bad_schedule")
                log.warning('schedule "%s" of flow "%s" cannot be computed (%s); fix it and publish again',
                            node.id, flow.id, exc)
                continue
            if fire is None:
                continue
            fired.append(self._fire(flow, node, fire))
            record_last_fire(client, keys, flow.id, node.id, fire)
        return fired

    def _fire(self, flow: Flow, node: Node, fire: float) -> Fired:
        if not flow.enabled:
            count(self.handles.client, self.handles.keys, f"{flow.id}/{node.id}:disabled")
            log.warning('schedule "%s" of flow "%s" fired at %s but the flow is disabled: no run started',
                        node.id, flow.id, datetime.fromtimestamp(fire, UTC).isoformat())
            return Fired(flow.id, node.id, fire, None, "disabled")
        key = trigger_idempotency_key("schedule", flow.id, node.id, f"{fire:.0f}")
        try:
            created = self.create_run(flow.id, {}, trigger=node.id, idempotency_key=key)
        except (RunRefused, InputError) as exc:
            count(self.handles.client, self.handles.keys, f"{flow.id}/{node.id}:refused")
            log.warning('schedule "%s" of flow "%s": run refused: %s', node.id, flow.id, exc)
            return Fired(flow.id, node.id, fire, None, "refused")
        return Fired(flow.id, node.id, fire, created.run_id, "duplicate" if created.duplicate else "started")

    def run(self, stop: threading.Event, tick_seconds: float = TICK_SECONDS) -> None:
        while not stop.wait(tick_seconds):
            try:
                self.tick()
            except Exception:
                log.exception("scheduler tick failed; trying again next tick")
