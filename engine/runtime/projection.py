"""Applies a batch of events to SQL in one transaction, idempotently: the projector's pure SQL half.

Applying an event twice, or a whole batch again, changes nothing: event ids already in
`applied_events` are skipped, and every change sets values (never `+= 1`): a run's token totals are the
sum over its step rows, each of which holds its own call's tokens. Events the state machine
refuses and events that fail to parse are captured as dead letters (and recorded as handled so a
redelivery does not capture them twice).

The stored per-run sequence is numbered here: each applied event takes `runs.last_seq + 1` in the
transaction that records its id, so a run's sequence is 1..n in apply order, unique (a constraint on
`applied_events (run_id, seq)` refuses a second writer's batch) and gap-free (a redelivered event is a
duplicate and takes nothing; a batch that does not commit numbers nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import orjson
import sqlalchemy as sa

from engine.approvals.projection import APPROVAL_EVENT_TYPES, apply_approval_events
from engine.events import Event, PoisonEvent, decode_event, encode_event
from engine.events.built import BUILT
from engine.events.models import StepCompleted
from engine.money.projection import MONEY_EVENT_TYPES, apply_money_events
from engine.runtime import crashpoints
from engine.runtime.live_change import LiveChange
from engine.runtime.transitions import IllegalTransition, check_transition
from engine.runtime.write_lock import sqlite_writer
from engine.store.driver_reads import SqliteReader
from engine.store.driver_rows import (
    bind_processors,
    column_names,
    sqlite_cursor,
    sqlite_execute,
    sqlite_execute_rows,
)
from engine.store.models import AppliedEvent, DeadLetter, Run, Step
from engine.store.types import utc_from_epoch

RUNS = cast(sa.Table, Run.__table__)
STEPS = cast(sa.Table, Step.__table__)
APPLIED = cast(sa.Table, AppliedEvent.__table__)
DEAD = cast(sa.Table, DeadLetter.__table__)

_RUN_MUTABLE = ("status", "state", "result", "error", "error_type", "errors", "waiting_on", "current_node",
                "tokens_in", "tokens_out", "last_seq", "started_at", "first_parked_at", "finished_at", "updated_at")
_STEP_MUTABLE = ("node_type", "status", "attempts", "input", "output", "ports", "error", "error_type",
                 "duration_ms", "tokens_in", "tokens_out", "started_at", "finished_at")
_STEP_FINAL = frozenset({"succeeded", "failed", "skipped", "cancelled"})
_RUN_LOADED = (RUNS.c.id, RUNS.c.flow_id, RUNS.c.version, RUNS.c.parent_run_id,
               *(RUNS.c[name] for name in _RUN_MUTABLE))
_APPLIED_COLUMNS = ("event_id", "run_id", "seq", "event_type", "applied_at", "change")
# Built once: an expanding IN is compiled once per statement, not rebuilt (and re-keyed) for every batch.
_SELECT_APPLIED = sa.select(APPLIED.c.event_id).where(APPLIED.c.event_id.in_(sa.bindparam("ids", expanding=True)))
_SELECT_CHANGES = sa.select(APPLIED.c.change).where(APPLIED.c.event_id.in_(sa.bindparam("ids", expanding=True)),
                                                    APPLIED.c.change.is_not(None))
_SELECT_RUNS = sa.select(*_RUN_LOADED).where(RUNS.c.id.in_(sa.bindparam("ids", expanding=True)))
_SELECT_STEPS = sa.select(STEPS).where(STEPS.c.run_id.in_(sa.bindparam("ids", expanding=True)))
_RUN_LOADED_NAMES = column_names(_RUN_LOADED)
_STEP_NAMES = column_names(STEPS.columns)


def _marks(count: int) -> str:
    return ", ".join(["?"] * count)


@dataclass
class BatchResult:
    applied: int = 0
    duplicates: int = 0
    dead: int = 0
    changes: list[LiveChange] = field(default_factory=list)
    published: list[bytes] = field(default_factory=list)
    """Each change's JSON for the live channel, in the order of `changes` (the same text `applied_events` keeps)."""
    terminal_runs: list[tuple[str, str]] = field(default_factory=list)
    """(run id, final status) of runs that ended in this batch."""
    parents: dict[str, str] = field(default_factory=dict)
    """Parent run id of each run in `terminal_runs` that is a `flow.call` child (the others are absent)."""
    replayed: list[LiveChange] = field(default_factory=list)
    """The changes the batch's duplicates had made when they were applied, in their runs' sequence: a batch
    delivered again after its process died between its commit and its acknowledgement holds only duplicates, and a
    part that must hear every change (`Projector.fill_ack`) hears them from here. Not published again."""


@dataclass
class _Work:
    runs: dict[str, dict[str, Any]]
    steps: dict[tuple[str, str], dict[str, Any]]
    dirty_runs: set[str] = field(default_factory=set)
    new_steps: dict[tuple[str, str], None] = field(default_factory=dict)
    """Insertion-ordered, so step rows are numbered in event order."""
    dirty_steps: set[tuple[str, str]] = field(default_factory=set)
    token_runs: set[str] = field(default_factory=set)
    """Runs whose steps' tokens changed in this batch: their totals are summed again before writing."""


def _chunks(items: list[Any], size: int = 500) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def apply_batch(engine: sa.Engine, messages: list[tuple[str, bytes]], source: str = "events") -> BatchResult:
    """Apply (message id, raw event) pairs in one transaction; returns what changed."""
    result = BatchResult()
    now = datetime.now(UTC)
    decoded: list[tuple[str, Event]] = []
    dead_rows: list[dict[str, Any]] = []
    for message_id, raw in messages:
        try:
            decoded.append((message_id, BUILT.take(raw) or decode_event(raw)))
        except PoisonEvent as exc:
            dead_rows.append({"source": source, "message_id": message_id, "payload": raw, "error": str(exc),
                              "created_at": now})
    with sqlite_writer(engine), engine.begin() as conn:
        # SQLite: the batch's reads go straight to the driver too, in this transaction (see `_insert_applied`).
        reader = SqliteReader(sqlite_cursor(conn), conn.dialect) if conn.dialect.name == "sqlite" else None
        ids = list({event.event_id for _, event in decoded})
        seen: set[str] = set()
        for chunk in _chunks(ids):
            seen.update(_applied_ids(conn, reader, chunk))
        fresh: list[tuple[str, Event]] = []
        duplicates: list[str] = []
        for message_id, event in decoded:
            if event.event_id in seen:
                result.duplicates += 1
                duplicates.append(event.event_id)
                continue
            seen.add(event.event_id)
            fresh.append((message_id, event))
        if duplicates:
            result.replayed = _replayed(conn, duplicates)
        work = _load(conn, reader, {event.run_id for _, event in fresh})
        applied_rows = []
        money_events: list[Event] = []
        approval_events: list[Event] = []
        for message_id, event in fresh:
            # A dead letter is recorded as handled too (so a redelivery does not capture it twice) but takes
            # no place in its run's sequence.
            applied_row: dict[str, Any] = {"event_id": event.event_id, "run_id": event.run_id, "seq": None,
                                           "event_type": event.type, "applied_at": now, "change": None}
            applied_rows.append(applied_row)
            try:
                change = _apply(work, event)
            except (IllegalTransition, LookupError) as exc:
                dead_rows.append({"source": source, "message_id": message_id, "payload": encode_event(event),
                                  "error": str(exc), "created_at": now})
                continue
            except Exception as exc:  # a poison event must be captured, never retried forever
                dead_rows.append({"source": source, "message_id": message_id, "payload": encode_event(event),
                                  "error": f"{event.type} could not be applied: {type(exc).__name__}: {exc}",
                                  "created_at": now})
                continue
            result.applied += 1
            if event.type in MONEY_EVENT_TYPES or (isinstance(event, StepCompleted) and event.cost_micros):
                money_events.append(event)
            if event.type in APPROVAL_EVENT_TYPES:
                approval_events.append(event)
            published = orjson.dumps(change.to_data())
            applied_row.update(seq=change.seq, change=published.decode())
            result.changes.append(change)
            result.published.append(published)
            if change.event in ("run_succeeded", "run_failed", "run_cancelled", "run_interrupted"):
                result.terminal_runs.append((change.run_id, change.status))
                parent = work.runs[change.run_id]["parent_run_id"]
                if parent is not None:
                    result.parents[change.run_id] = parent
        _write(conn, work, applied_rows, dead_rows)
        if money_events:
            apply_money_events(conn, money_events)
        if approval_events:
            apply_approval_events(conn, work.runs, approval_events)
        crashpoints.reached("projector.before_commit")
    result.dead = len(dead_rows)
    return result


def _applied_ids(conn: sa.Connection, reader: SqliteReader | None, ids: list[str]) -> list[str]:
    """Which of these event ids are recorded as applied already."""
    if reader is not None:
        return reader.values(f"SELECT event_id FROM {APPLIED.name} WHERE event_id IN ({_marks(len(ids))})", ids)
    return list(conn.execute(_SELECT_APPLIED, {"ids": ids}).scalars().all())


def _replayed(conn: sa.Connection, event_ids: list[str]) -> list[LiveChange]:
    """The stored changes of these applied events (dead letters and events of this batch have none)."""
    changes: list[LiveChange] = []
    for chunk in _chunks(list(dict.fromkeys(event_ids))):
        rows = conn.execute(_SELECT_CHANGES, {"ids": chunk}).scalars()
        changes += [LiveChange.from_json(change) for change in rows]
    changes.sort(key=lambda change: (change.run_id, change.seq))
    return changes


def _run_rows(conn: sa.Connection, reader: SqliteReader | None, ids: list[str]) -> list[dict[str, Any]]:
    if reader is not None:
        return reader.rows(f"SELECT {_RUN_LOADED_NAMES} FROM {RUNS.name} WHERE id IN ({_marks(len(ids))})", ids,
                           RUNS)
    return [dict(row) for row in conn.execute(_SELECT_RUNS, {"ids": ids}).mappings().all()]


def _step_rows(conn: sa.Connection, reader: SqliteReader | None, run_ids: list[str]) -> list[dict[str, Any]]:
    if reader is not None:
        return reader.rows(f"SELECT {_STEP_NAMES} FROM {STEPS.name} WHERE run_id IN ({_marks(len(run_ids))})",
                           run_ids, STEPS)
    return [dict(row) for row in conn.execute(_SELECT_STEPS, {"ids": run_ids}).mappings().all()]


def _load(conn: sa.Connection, reader: SqliteReader | None, run_ids: set[str]) -> _Work:
    runs: dict[str, dict[str, Any]] = {}
    steps: dict[tuple[str, str], dict[str, Any]] = {}
    for chunk in _chunks(sorted(run_ids)):
        for row in _run_rows(conn, reader, chunk):
            runs[row["id"]] = row
        # Step rows are written only here, with the run's last_seq moved on in the same transaction: a run no
        # event was applied to yet (a new run, the common case) has none to read.
        applied_to = [run_id for run_id in chunk if run_id in runs and runs[run_id]["last_seq"]]
        if applied_to:
            for row in _step_rows(conn, reader, applied_to):
                steps[(row["run_id"], row["step"])] = row
    return _Work(runs, steps)


def _insert_applied(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    # The hottest insert (a row per event): bound once per batch and sent straight to the driver,
    # skipping SQLAlchemy's per-row parameter processing.
    dialect = conn.dialect
    mark = "?" if dialect.paramstyle in ("qmark", "numeric") else "%s"
    to_db = bind_processors(dialect, APPLIED, ("applied_at",))[0]
    applied_at = rows[0]["applied_at"]
    stamp = to_db(applied_at) if to_db is not None else applied_at
    sql = (f"INSERT INTO {APPLIED.name} ({', '.join(_APPLIED_COLUMNS)}) "
           f"VALUES ({', '.join([mark] * len(_APPLIED_COLUMNS))})")
    params = [(r["event_id"], r["run_id"], r["seq"], r["event_type"], stamp, r["change"]) for r in rows]
    if dialect.name == "sqlite":
        sqlite_execute(conn, sql, params)
    else:
        conn.exec_driver_sql(sql, params)


_STEP_INSERTED = ("run_id", "step", "node_id", *_STEP_MUTABLE)


def _update_by_id(conn: sa.Connection, table: sa.Table, mutable: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    """Write the `mutable` columns of run or step rows back by id."""
    if conn.dialect.name == "sqlite":
        sets = ", ".join(f"{name} = ?" for name in mutable)
        sqlite_execute_rows(conn, f"UPDATE {table.name} SET {sets} WHERE id = ?", table, (*mutable, "id"), rows)
        return
    conn.execute(sa.update(table).where(table.c.id == sa.bindparam("b_id"))
                 .values({col: sa.bindparam(col) for col in mutable}),
                 [{"b_id": row["id"], **{col: row[col] for col in mutable}} for row in rows])


def _insert_steps(conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
    if conn.dialect.name == "sqlite":
        sql = (f"INSERT INTO {STEPS.name} ({', '.join(_STEP_INSERTED)}) "
               f"VALUES ({', '.join(['?'] * len(_STEP_INSERTED))})")
        sqlite_execute_rows(conn, sql, STEPS, _STEP_INSERTED, rows)
        return
    conn.execute(sa.insert(STEPS), [{name: row[name] for name in _STEP_INSERTED} for row in rows])


def _sum_tokens(work: _Work) -> None:
    """Each touched run's token totals: the sum over all its step rows (loaded whole by `_load`)."""
    if not work.token_runs:
        return
    totals = {run_id: [0, 0] for run_id in work.token_runs}
    for (run_id, _step_key), row in work.steps.items():
        total = totals.get(run_id)
        if total is not None:
            total[0] += row["tokens_in"] or 0
            total[1] += row["tokens_out"] or 0
    for run_id, (tokens_in, tokens_out) in totals.items():
        work.runs[run_id].update(tokens_in=tokens_in, tokens_out=tokens_out)


def _write(conn: sa.Connection, work: _Work, applied_rows: list[dict[str, Any]],
           dead_rows: list[dict[str, Any]]) -> None:
    _sum_tokens(work)
    if applied_rows:
        _insert_applied(conn, applied_rows)
    if dead_rows:
        conn.execute(sa.insert(DEAD), dead_rows)
    if work.dirty_runs:
        _update_by_id(conn, RUNS, _RUN_MUTABLE, [work.runs[run_id] for run_id in work.dirty_runs])
    inserts = [work.steps[key] for key in work.new_steps]
    if inserts:
        _insert_steps(conn, inserts)
    updates = [work.steps[key] for key in work.dirty_steps if key not in work.new_steps]
    if updates:
        _update_by_id(conn, STEPS, _STEP_MUTABLE, updates)


def _step(work: _Work, run_id: str, step: str, node: str) -> dict[str, Any]:
    key = (run_id, step)
    row = work.steps.get(key)
    if row is None:
        row = {"run_id": run_id, "step": step, "node_id": node, "node_type": None, "status": "pending",
               "attempts": 0, "input": None, "output": None, "ports": None, "error": None, "error_type": None,
               "duration_ms": None, "tokens_in": None, "tokens_out": None, "started_at": None, "finished_at": None}
        work.steps[key] = row
        work.new_steps[key] = None
    work.dirty_steps.add(key)
    return row


def _apply(work: _Work, event: Event) -> LiveChange:
    """Apply one event to the loaded rows; the run's next place in its stored sequence becomes the change's
    `seq` (the producer's own count in `event.seq` is never stored: a decision and the worker resuming after
    it count independently)."""
    run = work.runs.get(event.run_id)
    if run is None:
        raise LookupError(f'run "{event.run_id}": {event.type} names a run the store does not have')
    target = check_transition(event.run_id, run["status"], event.type)
    at = utc_from_epoch(event.ts)
    work.dirty_runs.add(event.run_id)
    run["updated_at"] = at
    node: str | None = event.__dict__.get("node")  # getattr on a pydantic model raising is slow
    step_key: str | None = None
    step_status: str | None = None
    if target is not None:
        run["status"] = target
    match event.type:
        case "run_started":
            run["started_at"] = run["started_at"] or at
            if event.rerun is not None:  # a rerun starts from the state and errors of the steps it reuses
                run["state"], run["errors"] = dict(event.rerun.state), dict(event.rerun.errors) or None
        case "run_resumed":
            run["waiting_on"] = None
            run["current_node"] = event.node
        case "run_parked":
            waiting = event.waiting_on.record()
            node = waiting["node"]
            run["waiting_on"] = waiting
            run["current_node"] = node
            run["first_parked_at"] = run["first_parked_at"] or at
            row = _step(work, event.run_id, node, node)
            if row["status"] not in _STEP_FINAL:
                row["status"] = step_status = "suspended"
                step_key = node
        case "run_succeeded":
            run["result"] = event.result
            run["finished_at"] = at
            run["waiting_on"] = None
        case "run_failed" | "run_cancelled" | "run_interrupted":
            if event.type == "run_cancelled" and run["waiting_on"]:
                # The step the run was parked on waits no more: it ends with its run, as `cancelled`.
                parked_at = run["waiting_on"].get("node")
                parked = work.steps.get((event.run_id, parked_at)) if parked_at else None
                if parked is not None and parked["status"] == "suspended":
                    work.dirty_steps.add((event.run_id, parked_at))
                    parked.update(status="cancelled", finished_at=at)
                    node = node or parked_at
                    step_key, step_status = parked_at, "cancelled"
            run["finished_at"] = at
            run["waiting_on"] = None
            if event.type == "run_failed":
                run["error"], run["error_type"] = event.error, event.error_type
            elif event.type == "run_cancelled":
                run["error"], run["error_type"] = event.reason, "cancelled"
            else:
                run["error"], run["error_type"] = event.reason, "interrupted"
        case "step_started":
            row = _step(work, event.run_id, event.step, event.node)
            step_key = event.step
            if row["status"] not in _STEP_FINAL:
                row.update(status="running", node_type=event.node_type, input=event.given or row["input"])
                row["attempts"] = max(row["attempts"] or 0, event.step_attempt)
                row["started_at"] = row["started_at"] or at
            step_status = row["status"]
            run["current_node"] = event.node
        case "step_completed":
            row = _step(work, event.run_id, event.step, event.node)
            row.update(status="succeeded", output=event.writes, ports=event.ports, error=None, error_type=None,
                       duration_ms=event.duration_ms, finished_at=at)
            if event.tokens_in is not None or event.tokens_out is not None:
                row.update(tokens_in=event.tokens_in or 0, tokens_out=event.tokens_out or 0)
                work.token_runs.add(event.run_id)
            row["attempts"] = max(row["attempts"] or 0, event.step_attempt)
            row["started_at"] = row["started_at"] or at
            if event.writes and "[" not in event.step:
                run["state"] = {**(run["state"] or {}), **event.writes}
            step_key, step_status = event.step, "succeeded"
        case "step_failed":
            row = _step(work, event.run_id, event.step, event.node)
            if row["status"] not in _STEP_FINAL:
                row.update(error=event.error, error_type=event.error_type, duration_ms=event.duration_ms)
                row["attempts"] = max(row["attempts"] or 0, event.step_attempt)
                row["status"] = "running" if event.will_retry else "failed"
                if not event.will_retry:
                    row["finished_at"] = at
                if event.continued:
                    run["errors"] = {**(run["errors"] or {}), event.step: {
                        "message": event.error, "type": event.error_type, "attempts": event.step_attempt}}
            step_key, step_status = event.step, row["status"]
        case "step_reused":
            # Taken from the record of the run reused, never executed here: no attempt, no given.
            row = _step(work, event.run_id, event.step, event.node)
            row.update(status=event.step_status, node_type=event.node_type, ports=event.ports,
                       output=event.writes if event.ports is not None else None, error=event.error,
                       error_type=event.error_type)
            row["started_at"] = row["started_at"] or at
            row["finished_at"] = row["finished_at"] or at
            step_key, step_status = event.step, event.step_status
        case "step_skipped":
            row = _step(work, event.run_id, event.step, event.node)
            if row["status"] == "pending":
                row.update(status="skipped", finished_at=at)
            step_key, step_status = event.step, row["status"]
        case _:
            # approvals and holds: accepted into the run's sequence here; their tables are applied after _write
            pass
    # Taken last, once nothing can refuse the event any more: a dead letter takes no place.
    run["last_seq"] = seq = (run["last_seq"] or 0) + 1
    return LiveChange(run_id=event.run_id, flow_id=run["flow_id"], version=run["version"], status=run["status"],
                      seq=seq, event=event.type, node=node, step=step_key, step_status=step_status,
                      waiting_on=run["waiting_on"],
                      reason=event.__dict__.get("reason") if event.type == "hold_released" else None)
