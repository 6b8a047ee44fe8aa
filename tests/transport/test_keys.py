"""Every engine key lives under the keyspace's prefix, and keyspaces do not see each other."""

from __future__ import annotations

import inspect

import pytest
import redis

from engine.transport.due import DueSet
from engine.transport.keys import Keyspace

GROUP_NAMES = {"jobs_group", "events_group", "approval_notices_group", "event_trigger_group"}


def _all_key_names(keyspace: Keyspace) -> dict[str, str]:
    names: dict[str, str] = {}
    for attribute, member in inspect.getmembers(Keyspace):
        if attribute.startswith("_") or attribute in GROUP_NAMES or attribute in {"prefix", "all_keys_pattern"}:
            continue
        if isinstance(member, property):
            names[attribute] = getattr(keyspace, attribute)
        elif inspect.isfunction(member):
            arity = len(inspect.signature(member).parameters) - 1
            names[attribute] = getattr(keyspace, attribute)(*[f"x{i}" for i in range(arity)])
    return names


def test_names_are_prefixed_distinct_and_documented() -> None:
    keyspace = Keyspace("lg")
    names = _all_key_names(keyspace)
    required = {
        "jobs", "events", "live", "due", "due_claims", "due_nudge", "projector_lease", "heartbeats", "run_cancel",
        "idempotency", "concurrency_cap", "provider_telemetry", "call_slots", "budget", "approval_decision",
    }  # fmt: skip
    assert required <= set(names)
    assert all(name.startswith("lg:") for name in names.values())
    assert len(set(names.values())) == len(names)
    assert keyspace.jobs == "lg:jobs" and keyspace.jobs_group == "workers"
    assert keyspace.events_group == "projector"
    for attribute in names:
        assert inspect.getdoc(getattr(Keyspace, attribute)), f"Keyspace.{attribute} needs its type and owner"


def test_prefix_must_be_a_plain_word() -> None:
    for bad in ("", "a:b", "x*", "has space"):
        with pytest.raises(ValueError, match="key prefix"):
            Keyspace(bad)


def test_two_keyspaces_on_one_server_are_isolated(client: redis.Redis, key_prefix: str) -> None:
    mine = DueSet(client, Keyspace(key_prefix))
    other = DueSet(client, Keyspace(f"{key_prefix}-other"))
    try:
        mine.schedule("run-1", 100.0)
        assert other.next_due() is None
        assert other.claim_due(now=1_000.0).items == []
        assert mine.claim_due(now=1_000.0).items[0].member == "run-1"
    finally:
        client.delete(other.keyspace.due, other.keyspace.due_claims, mine.keyspace.due_claims)
