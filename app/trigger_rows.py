"""What the Triggers view shows of one published flow: a row per trigger node, from the engine's settings and
counters (no Qt, so it is tested without a window).

Webhook and schedule triggers need enabling by the user (`engine.triggers.settings.SWITCHED_TYPES`); event and
manual triggers follow the flow's own `enabled` flag. A trigger that would start nothing gets a notice on the
canvas, so a schedule firing into a disabled flow is never a silent void.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from engine.durations import parse_duration
from engine.triggers.status import TriggerNode, TriggerStatus

__all__ = ["TriggerNode", "TriggerRow", "TriggerStatus", "mask_token", "next_fire_time", "trigger_rows",
           "webhook_refusals"]

# Redis and croniter are imported where used: this module loads with the window, before the engine starts.

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
"""Where `lockgate worker --http` serves unless LOCKGATE_HTTP_URL says otherwise (as the CLI prints it)."""
WEBHOOK_REFUSALS = ("webhook_unsigned", "webhook_bad_signature", "webhook_unknown_token")
"""Counters of deliveries refused before their flow is known (they name no trigger)."""


@dataclass(frozen=True)
class TriggerRow:
    node_id: str
    type: str
    title: str
    switchable: bool
    """Webhook and schedule triggers: the user enables them."""
    enabled: bool
    """Would start a run now: the flow is enabled and (for switchable types) the trigger too."""
    state: str
    url: str = ""
    token: str = ""
    next_fire: float | None = None
    last_fire: float | None = None
    fired: int = 0
    disabled_hits: int = 0
    """Fires or deliveries that started nothing because the flow or trigger was disabled."""
    refused: int = 0
    loop_guarded: int = 0

    @property
    def kind(self) -> str:
        return self.type.removeprefix("trigger.")

    def notice(self) -> tuple[str, str]:
        """(pill label, tooltip line) for the canvas; empty when the trigger starts runs."""
        if self.enabled:
            return "", ""
        if self.state == "flow disabled":
            return "flow disabled", (f"flow disabled — this {self.kind} trigger starts nothing; enable the flow "
                                     "and publish it again")
        return "disabled", f"{self.kind} disabled — enable it in Triggers"


def mask_token(token: str) -> str:
    """The token with all but its prefix and last four characters hidden."""
    if len(token) <= 10:
        return "•" * len(token)
    return f"{token[:4]}{'•' * 8}{token[-4:]}"


def next_fire_time(config: dict[str, Any], after: float, now: float) -> float | None:
    """The first fire time after `now` (`every` counts from `after`, the last fire or the enabling)."""
    if config.get("every") is not None:
        period = parse_duration(config["every"])
        if period <= 0:
            return None
        steps = max(int((now - after) // period) + 1, 1)
        return after + steps * period
    cron = config.get("cron")
    if not cron:
        return None
    from zoneinfo import ZoneInfo

    from croniter import croniter

    zone = ZoneInfo(config.get("timezone") or "UTC")
    start = datetime.fromtimestamp(now, UTC).astimezone(zone)
    return float(croniter(cron, start).get_next(datetime).timestamp())


def trigger_rows(status: TriggerStatus, base_url: str = DEFAULT_BASE_URL) -> list[TriggerRow]:
    from engine.triggers.settings import SWITCHED_TYPES

    base = base_url.rstrip("/")
    rows: list[TriggerRow] = []
    for node in status.nodes:
        setting = status.settings.get(node.node_id)
        switchable = node.type in SWITCHED_TYPES
        switched_on = setting.enabled if (switchable and setting is not None) else not switchable
        if not status.flow_enabled:
            state = "flow disabled"
        elif switchable:
            state = "enabled" if switched_on else "disabled"
        else:
            state = "on with the flow"
        enabled = status.flow_enabled and switched_on
        token = (setting.token or "") if setting is not None else ""
        next_fire = None
        last_fire = setting.last_fire if setting is not None else None
        if node.type == "trigger.schedule" and enabled and setting is not None:
            after = max((t for t in (setting.last_fire, setting.enabled_at) if t is not None), default=status.now)
            try:
                next_fire = next_fire_time(node.config, after, status.now)
            except (ValueError, KeyError):
                next_fire = None  # publish validated it; an unreadable schedule shows no time rather than a wrong one
        label = f"{status.flow_id}/{node.node_id}"
        rows.append(TriggerRow(
            node.node_id, node.type, node.title, switchable, enabled, state,
            url=f"{base}/webhooks/{token}" if token else "", token=token,
            next_fire=next_fire, last_fire=last_fire, fired=status.fired.get(node.node_id, 0),
            disabled_hits=status.counters.get(f"{label}:disabled", 0),
            refused=status.counters.get(f"{label}:refused", 0) + status.counters.get(f"{label}:bad_schedule", 0),
            loop_guarded=status.counters.get(f"{label}:loop_guard", 0),
        ))
    return rows


def webhook_refusals(counters: dict[str, int]) -> dict[str, int]:
    """Deliveries refused before any flow was known: unsigned, mis-signed, unknown token."""
    return {name: counters.get(name, 0) for name in WEBHOOK_REFUSALS}
