"""Which webhook and schedule triggers are enabled, and each webhook's token, kept in Redis.

Webhook and schedule triggers start disabled: a published flow's schedule firing, or its webhook URL
answering, is something the user turns on (`lockgate schedules enable`, `lockgate webhooks enable`).
Event and manual triggers follow the flow's own `enabled` flag only.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from engine.flow import Flow
from engine.transport.keys import Keyspace

SWITCHED_TYPES = ("trigger.webhook", "trigger.schedule")
"""Trigger types that need enabling by the user before they start anything."""


class TriggerProblem(ValueError):
    """A trigger command that cannot be done; the message says the fix."""


@dataclass(frozen=True)
class TriggerSetting:
    flow_id: str
    node_id: str
    type: str
    enabled: bool
    token: str | None = None
    last_fire: float | None = None
    """Schedules: the last fire time started (epoch seconds)."""
    enabled_at: float | None = None

    def to_data(self) -> dict[str, Any]:
        return dict(self.__dict__)


MAX_KEY_CHARS = 200
"""Idempotency keys are stored in a 255-character column; longer ones are kept as a hash."""


def trigger_idempotency_key(*parts: str) -> str:
    """`part:part:...`, or its prefix and a SHA-256 of the rest when that would be too long for the column."""
    key = ":".join(parts)
    if len(key) <= MAX_KEY_CHARS:
        return key
    return f"{parts[0]}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def field_name(flow_id: str, node_id: str) -> str:
    return f"{flow_id}/{node_id}"


def _stored(client: redis.Redis, keys: Keyspace, flow_id: str, node_id: str) -> dict[str, Any]:
    raw = client.hget(keys.trigger_settings, field_name(flow_id, node_id))
    return orjson.loads(raw) if raw else {}


def _write(client: redis.Redis, keys: Keyspace, flow_id: str, node_id: str, data: dict[str, Any]) -> None:
    client.hset(keys.trigger_settings, field_name(flow_id, node_id), orjson.dumps(data))


def switched_triggers(flow: Flow, trigger_type: str | None = None) -> list[tuple[str, str]]:
    """(node id, type) of the flow's webhook/schedule triggers, optionally of one type."""
    return [(node.id, node.type) for node in flow.nodes
            if node.type in SWITCHED_TYPES and (trigger_type is None or node.type == trigger_type)]


def setting_of(client: redis.Redis, keys: Keyspace, flow_id: str, node_id: str, node_type: str) -> TriggerSetting:
    pipe = client.pipeline(transaction=False)
    pipe.hget(keys.trigger_settings, field_name(flow_id, node_id))
    pipe.hget(keys.schedule_last_fire, field_name(flow_id, node_id))
    raw, last_fire = pipe.execute()
    data = orjson.loads(raw) if raw else {}
    return TriggerSetting(flow_id, node_id, node_type, bool(data.get("enabled", False)), data.get("token"),
                          float(last_fire) if last_fire else None, data.get("enabled_at"))


def settings_of(client: redis.Redis, keys: Keyspace, flow: Flow,
                trigger_type: str | None = None) -> list[TriggerSetting]:
    return [setting_of(client, keys, flow.id, node_id, node_type)
            for node_id, node_type in switched_triggers(flow, trigger_type)]


def set_enabled(client: redis.Redis, keys: Keyspace, flow: Flow, trigger_type: str, enabled: bool,
                now: float, node_id: str | None = None) -> list[TriggerSetting]:
    """Enable or disable the flow's triggers of `trigger_type` (or just `node_id`); a webhook gets its token
    on first enable and keeps it after."""
    targets = [(nid, ntype) for nid, ntype in switched_triggers(flow, trigger_type) if node_id in (None, nid)]
    if not targets:
        kind = trigger_type.removeprefix("trigger.")
        which = f' named "{node_id}"' if node_id else ""
        raise TriggerProblem(f'flow "{flow.id}" has no {kind} trigger{which}; add a {trigger_type} node and '
                             "publish the flow again")
    for nid, ntype in targets:
        data = _stored(client, keys, flow.id, nid)
        if enabled and not data.get("enabled"):
            data["enabled_at"] = now
        data["enabled"] = enabled
        if ntype == "trigger.webhook" and enabled and not data.get("token"):
            data["token"] = "whk_" + secrets.token_urlsafe(24)
            client.hset(keys.webhook_tokens, data["token"], field_name(flow.id, nid))
        _write(client, keys, flow.id, nid, data)
    return [setting_of(client, keys, flow.id, nid, ntype) for nid, ntype in targets]


def record_last_fire(client: redis.Redis, keys: Keyspace, flow_id: str, node_id: str, fire_time: float) -> None:
    client.hset(keys.schedule_last_fire, field_name(flow_id, node_id), repr(fire_time))


def webhook_target(client: redis.Redis, keys: Keyspace, token: str) -> tuple[str, str] | None:
    """(flow id, node id) the token belongs to, or None."""
    raw = client.hget(keys.webhook_tokens, token)
    if raw is None:
        return None
    flow_id, _, node_id = (raw.decode() if isinstance(raw, bytes) else str(raw)).rpartition("/")
    return flow_id, node_id


def count(client: redis.Redis, keys: Keyspace, name: str) -> None:
    client.hincrby(keys.trigger_counters, name, 1)


def counters(client: redis.Redis, keys: Keyspace) -> dict[str, int]:
    return {(k.decode() if isinstance(k, bytes) else k): int(v)
            for k, v in client.hgetall(keys.trigger_counters).items()}
