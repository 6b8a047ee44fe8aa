"""`create_run()`: the single way a run comes to exist.

create_run: idempotency guard, budget preflight, version resolve, input check, run record
`queued`, job message on the jobs stream — in that order, so a refused run leaves no trace. A job that
cannot be enqueued takes its run record back with it; a process that dies between the two leaves a
queued run without a job, which the orphan sweep (`engine.runtime.orphans`) ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, cast

import redis
import sqlalchemy as sa

from engine.config import InputLimits
from engine.flow import Flow
from engine.ids import time_ordered_id
from engine.publish import PublishedVersion, get_version
from engine.runtime.handles import EngineHandles
from engine.runtime.inputs import check_input_bounds, check_inputs, redacted_inputs, secret_names
from engine.runtime.jobs import encode_job, start_job
from engine.runtime.sealed import seal_secrets
from engine.runtime.write_lock import sqlite_writer
from engine.secret_box import SecretBoxError
from engine.store.db import reading
from engine.store.models import Run

log = logging.getLogger("lockgate.create")

IDEMPOTENCY_TTL_SECONDS = 7 * 24 * 3600
LATEST_VERSION_TTL_SECONDS = 1.0
"""How long a resolved "latest version" is reused; this process's publishes invalidate it at once."""
RUNS = cast(sa.Table, Run.__table__)

RunMode = Literal["sync", "async"]
"""`async`: the caller does not wait (API `wait: 0`); its `max_wait` counts from acceptance, queued time included."""

BudgetPreflight = Callable[[Flow, dict[str, Any]], None]
"""Raises to refuse a run before it exists (the money issue replaces the no-op)."""


def no_budget_preflight(flow: Flow, inputs: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class RerunStart:
    """What a rerun's record and job start with (`engine.runtime.rerun` makes it)."""

    rerun_of: str
    from_node: str
    seed: dict[str, Any]
    """The job's `rerun` field: the reused steps in order and the node to start at. The run's state and
    errors come from its `run_started`, which carries them, like every other change to a run."""


@dataclass(frozen=True)
class CreatedRun:
    run_id: str
    flow_id: str
    version: int
    status: str
    duplicate: bool = False
    """True when the idempotency key had already created this run."""


class StartsRuns(Protocol):
    """`create_run` bound to one engine (`EngineServices.create_run`): its budget preflight and versions in hand."""

    def __call__(
        self,
        flow_id: str,
        inputs: dict[str, Any] | None = None,
        *,
        version: int | None = None,
        trigger: str | None = None,
        idempotency_key: str | None = None,
        mode: RunMode = "sync",
        parent_run_id: str | None = None,
        call_depth: int = 0,
        rerun: RerunStart | None = None,
        started_by: str | None = None,
    ) -> CreatedRun: ...


class RunRefused(ValueError):
    """create_run refused before any run existed; `reason` is the refusal's kind (the API's error code)."""

    reason = "run_refused"


class FlowDisabled(RunRefused):
    """The flow's newest (or requested) version is disabled: its triggers and callers start nothing."""

    reason = "flow_disabled"


class IdempotencyKeyReused(RunRefused):
    """The idempotency key already started a run of another flow: a retry names the flow its first request named."""

    reason = "idempotency_key_reused"


class SecretsUnsealable(RunRefused):
    """The run's secret inputs cannot be sealed (no usable data key), and they are never stored in plain text."""

    reason = "secret_key_unavailable"


def _trigger_of(flow: Flow, trigger: str | None) -> str:
    triggers = [node for node in flow.nodes if node.type.startswith("trigger.")]
    if trigger is not None:
        if not any(node.id == trigger for node in triggers):
            names = ", ".join(node.id for node in triggers) or "none"
            raise RunRefused(f'flow "{flow.id}" has no trigger node "{trigger}" (its triggers: {names})')
        return trigger
    for node in triggers:
        if node.type == "trigger.manual":
            return node.id
    if not triggers:
        raise RunRefused(f'flow "{flow.id}" has no trigger node; add a trigger.manual and publish again')
    return triggers[0].id


class LatestVersions:
    """Latest published version per flow, reused for a second: run starts are hot, publishes rare."""

    def __init__(self, ttl: float = LATEST_VERSION_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._entries: dict[str, tuple[float, PublishedVersion, Flow]] = {}
        self._lock = threading.Lock()

    def resolve(self, sql: sa.Engine, flow_id: str) -> tuple[PublishedVersion, Flow]:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(flow_id)
        if entry is not None and now - entry[0] < self.ttl:
            return entry[1], entry[2]
        published, flow = get_version(sql, flow_id)
        with self._lock:
            self._entries[flow_id] = (now, published, flow)
        return published, flow

    def invalidate(self, flow_id: str) -> None:
        with self._lock:
            self._entries.pop(flow_id, None)


def _existing_run(handles: EngineHandles, key: str, flow_id: str) -> CreatedRun | None:
    """The run `key` already started, as a duplicate; IdempotencyKeyReused when it is a run of another flow."""
    with reading(handles.sql) as conn:
        row = conn.execute(sa.select(Run.id, Run.flow_id, Run.version, Run.status)
                           .where(Run.idempotency_key == key)).first()
    if row is None:
        return None
    if row.flow_id != flow_id:
        raise IdempotencyKeyReused(f'idempotency_key "{key}" already started run {row.id} of flow "{row.flow_id}", '
                                   f'not of flow "{flow_id}"; a retry names the same flow, and a new start takes a '
                                   "new key")
    return CreatedRun(row.id, row.flow_id, row.version, row.status, duplicate=True)


def create_run(handles: EngineHandles, flow_id: str, inputs: dict[str, Any] | None = None, *,
               version: int | None = None, trigger: str | None = None, idempotency_key: str | None = None,
               budget_preflight: BudgetPreflight = no_budget_preflight,
               latest: LatestVersions | None = None, mode: RunMode = "sync",
               limits: InputLimits | None = None, parent_run_id: str | None = None,
               call_depth: int = 0, rerun: RerunStart | None = None, started_by: str | None = None) -> CreatedRun:
    """Create a queued run of a published flow and enqueue its job; raises RunRefused / InputError.

    `mode="async"` records the acceptance time (the run's `created_at`) on its job, and so in its
    checkpoints, so that its `max_wait` counts from acceptance rather than from its first park.
    `limits`: how large inputs may be (default: the engine's, `handles.limits`).
    `parent_run_id`, `call_depth`: set for the child run of a `flow.call` step (`engine.calls`).
    `rerun`: set for a rerun (`engine.runtime.rerun`): its record keeps `rerun_of` and `from_node`, its job the seed.
    `started_by`: who asked for the run (`key:<name>`, `user:<name>`), for an approval's `forbid_self`.
    """
    if mode not in ("sync", "async"):
        raise ValueError(f'create_run mode must be "sync" or "async" (got {mode!r})')
    if idempotency_key:
        found = _existing_run(handles, idempotency_key, flow_id)
        if found is not None:
            return found
    if version is None and latest is not None:
        published, flow = latest.resolve(handles.sql, flow_id)
    else:
        published, flow = get_version(handles.sql, flow_id, version)
    if not flow.enabled:
        raise FlowDisabled(f'flow "{flow.id}" (version {published.version}) is disabled, so its triggers start '
                         'nothing; enable it and publish again')
    trigger_id = _trigger_of(flow, trigger)
    given = inputs or {}
    bounds = limits or handles.limits
    check_input_bounds(flow.id, given, bounds)  # first: the type check copies values, which recurses
    resolved = check_inputs(flow, given)
    if len(resolved) > len(given):
        check_input_bounds(flow.id, resolved, bounds)  # with the defaults filled in
    budget_preflight(flow, resolved)
    run_id = time_ordered_id()
    secrets = {name: resolved[name] for name in secret_names(flow) if name in resolved}
    try:
        sealed = seal_secrets(handles.box, run_id, secrets) if secrets else None
    except SecretBoxError as exc:
        raise SecretsUnsealable(f'flow "{flow.id}": its secret inputs cannot be stored sealed: {exc}') from None
    if idempotency_key and not handles.client.set(handles.keys.idempotency(idempotency_key), run_id, nx=True,
                                                  ex=IDEMPOTENCY_TTL_SECONDS):
        found = _existing_run(handles, idempotency_key, flow_id)
        if found is not None:
            return found
    shown = redacted_inputs(flow, resolved)
    accepted_at = handles.clock.now()
    job = encode_job(start_job(run_id, flow.id, published.version, trigger_id, shown, bool(secrets),
                               accepted_at if mode == "async" else None,
                               rerun.seed if rerun is not None else None))
    now = datetime.fromtimestamp(accepted_at, UTC)
    try:
        handles.run_records.insert({
            "id": run_id, "flow_id": flow.id, "version": published.version, "status": "queued",
            "trigger": trigger_id, "idempotency_key": idempotency_key or None, "inputs": shown,
            "state": {}, "errors": None,
            "cost_micros": 0, "tokens_in": 0, "tokens_out": 0, "last_seq": 0, "created_at": now, "updated_at": now,
            "parent_run_id": parent_run_id, "call_depth": call_depth,
            "rerun_of": rerun.rerun_of if rerun is not None else None,
            "from_node": rerun.from_node if rerun is not None else None,
            "started_by": started_by})
    except sa.exc.IntegrityError:
        if idempotency_key:
            found = _existing_run(handles, idempotency_key, flow_id)
            if found is not None:
                return found
        raise
    pipe = handles.held.pipeline()
    if sealed is not None:
        pipe.set(handles.keys.run_secrets(run_id), sealed)
    pipe.xadd(handles.keys.jobs, job)
    try:
        handles.held.execute(pipe, retry=True)
    except Exception:
        _take_back(handles, run_id, idempotency_key)
        raise
    return CreatedRun(run_id, flow.id, published.version, "queued")


def _take_back(handles: EngineHandles, run_id: str, idempotency_key: str | None) -> None:
    """Undo a run whose job could not be enqueued: its record (still queued, nothing ran) and, where Redis
    answers, its secrets and idempotency key, so the caller can simply try again. Should the job have reached
    the stream after all (an answer lost, not a refusal), its events name no run and become dead letters."""
    with sqlite_writer(handles.sql), handles.sql.begin() as conn:
        conn.execute(sa.delete(RUNS).where(RUNS.c.id == run_id, RUNS.c.status == "queued", RUNS.c.last_seq == 0))
    try:
        handles.client.delete(handles.keys.run_secrets(run_id),
                              *([handles.keys.idempotency(idempotency_key)] if idempotency_key else []))
    except redis.RedisError:
        # Left behind, the secrets are never read (no job names the run), and an idempotency key naming a run
        # that does not exist counts as no key.
        log.warning("run %s: its job was not enqueued and Redis did not answer the clean-up", run_id)
