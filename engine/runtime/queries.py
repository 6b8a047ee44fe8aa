"""Reading runs and their steps from the store (what `lockgate runs`, the app and the API show).

A stored value no answer could carry (one written before inputs were bounded, or by another hand: nested
past the encoders' limits, a lone surrogate) is shown as a note in its place, so one such run never makes
a list or a run fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol, cast

import orjson
import sqlalchemy as sa

from engine.json_bounds import json_problems
from engine.runtime.live_change import LiveChange
from engine.runtime.transitions import TERMINAL
from engine.store.db import reading
from engine.store.driver_reads import SqliteReader, sqlite_reader
from engine.store.driver_rows import column_names
from engine.store.models import AppliedEvent, Run, Step

RUNS = cast(sa.Table, Run.__table__)
STEPS = cast(sa.Table, Step.__table__)
APPLIED = cast(sa.Table, AppliedEvent.__table__)
ANSWER_NESTING = 8
"""Levels an answer wraps a stored value in (`{"runs": [{"inputs": {...}}]}`, steps deeper): a value shown
must encode with this many levels to spare."""
_ENCODER_DEPTH = 254
"""orjson's nesting limit."""


def _answerable(value: Any) -> bool:
    kind = type(value)
    if value is None or kind is bool or kind is float or (kind is int and -(1 << 63) <= value < (1 << 64)):
        return True
    if kind is str and value.isascii():
        return True
    wrapped = value
    for _ in range(ANSWER_NESTING):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except (orjson.JSONEncodeError, TypeError):
        return False
    return True


def _not_shown(value: Any) -> str:
    problems = json_problems(value, _ENCODER_DEPTH - ANSWER_NESTING, limit=1)
    if not problems:
        return "<not shown: the stored value cannot be answered as JSON>"
    path = problems[0].path if len(problems[0].path) <= 80 else problems[0].path[:60] + "..." + problems[0].path[-17:]
    why = f"{path}: {problems[0].message}"
    return f"<not shown: the stored value cannot be answered as JSON ({why})>"


def shown(value: Any) -> Any:
    """`value` as stored when an answer can carry it; else, per entry of an object, a note where it cannot."""
    if value is None or _answerable(value):
        return value
    if isinstance(value, dict):
        return {_shown_key(key): item if _answerable(item) else _not_shown(item) for key, item in value.items()}
    return _not_shown(value)


def _shown_key(key: Any) -> str:
    return key if isinstance(key, str) and _answerable(key) else str(key).encode("utf-8", "backslashreplace").decode()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _run_data(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "flow_id": row["flow_id"],
        "version": row["version"],
        "status": row["status"],
        "trigger": row["trigger"],
        "inputs": shown(row["inputs"]),
        "result": shown(row["result"]),
        "error": shown(row["error"]),
        "error_type": row["error_type"],
        "errors": shown(row["errors"]) or {},
        "waiting_on": shown(row["waiting_on"]),
        "current_node": row["current_node"],
        "cost_micros": row["cost_micros"],
        "tokens_in": row["tokens_in"],
        "tokens_out": row["tokens_out"],
        "parent_run_id": row["parent_run_id"],
        "rerun_of": row["rerun_of"],
        "from_node": row["from_node"],
        "created_at": _iso(row["created_at"]),
        "started_at": _iso(row["started_at"]),
        "finished_at": _iso(row["finished_at"]),
    }


_REUSED_STATUSES = frozenset({"succeeded", "failed"})


def _reused_from(row: Any, rerun_of: str | None) -> str | None:
    """The run a rerun's step was taken from: a step recorded finished without one attempt of its own is one
    a `step_reused` recorded (every executed step counts its attempts from 1)."""
    if rerun_of is None or row["attempts"] or row["status"] not in _REUSED_STATUSES:
        return None
    return rerun_of


def _step_data(row: Any, rerun_of: str | None = None) -> dict[str, Any]:
    return {
        "step": row["step"],
        "node": row["node_id"],
        "type": row["node_type"],
        "status": row["status"],
        "attempts": row["attempts"],
        "duration_ms": row["duration_ms"],
        "tokens_in": row["tokens_in"],
        "tokens_out": row["tokens_out"],
        "ports": shown(row["ports"]),
        "given": shown(row["input"]),
        "output": shown(row["output"]),
        "error": shown(row["error"]),
        "error_type": row["error_type"],
        "started_at": _iso(row["started_at"]),
        "finished_at": _iso(row["finished_at"]),
        "reused_from": _reused_from(row, rerun_of),
    }


# Built once: building a statement per read costs more than executing it. Rows are fetched with one driver
# call (`.all()`): the driver lets go of the GIL on each fetch, and with busy threads each wait to get it
# back costs more than the row.
_RUN = sa.select(RUNS).where(RUNS.c.id == sa.bindparam("run_id"))
CHILD_STEP_TYPE = "flow.call"
"""The node type whose steps start child runs (`parent_run_id`)."""
_CHILD_IDS = (sa.select(RUNS.c.id).where(RUNS.c.parent_run_id == sa.bindparam("run_id"))
              .order_by(RUNS.c.created_at, RUNS.c.id))
_STEPS = (sa.select(STEPS).where(STEPS.c.run_id == sa.bindparam("run_id"))
          .order_by(STEPS.c.started_at.is_(None), STEPS.c.started_at, STEPS.c.id))


class _RunRows(Protocol):
    """Where `_read_run` reads a run's rows from, in one read transaction."""

    def run(self, run_id: str) -> Mapping[Any, Any] | None: ...

    def steps(self, run_id: str) -> Sequence[Mapping[Any, Any]]: ...

    def child_ids(self, run_id: str) -> list[str]: ...


class _CoreRows:
    def __init__(self, conn: sa.Connection) -> None:
        self._conn = conn

    def run(self, run_id: str) -> Mapping[Any, Any] | None:
        return self._conn.execute(_RUN, {"run_id": run_id}).mappings().first()

    def steps(self, run_id: str) -> Sequence[Mapping[Any, Any]]:
        return self._conn.execute(_STEPS, {"run_id": run_id}).mappings().all()

    def child_ids(self, run_id: str) -> list[str]:
        return list(self._conn.execute(_CHILD_IDS, {"run_id": run_id}).scalars().all())


_DRIVER_RUN = f"SELECT {column_names(RUNS.columns)} FROM {RUNS.name} WHERE id = ?"
_DRIVER_STEPS = (f"SELECT {column_names(STEPS.columns)} FROM {STEPS.name} WHERE run_id = ? "
                 "ORDER BY started_at IS NULL, started_at, id")
_DRIVER_CHILD_IDS = f"SELECT id FROM {RUNS.name} WHERE parent_run_id = ? ORDER BY created_at, id"


class _DriverRows:
    """The same rows, read through the SQLite driver (`engine.store.driver_reads`)."""

    def __init__(self, reader: SqliteReader) -> None:
        self._reader = reader

    def run(self, run_id: str) -> Mapping[Any, Any] | None:
        rows = self._reader.rows(_DRIVER_RUN, (run_id,), RUNS)
        return rows[0] if rows else None

    def steps(self, run_id: str) -> Sequence[Mapping[Any, Any]]:
        return self._reader.rows(_DRIVER_STEPS, (run_id,), STEPS)

    def child_ids(self, run_id: str) -> list[str]:
        return self._reader.values(_DRIVER_CHILD_IDS, (run_id,))


def _read_run(rows: _RunRows, run_id: str, with_steps: bool) -> tuple[dict[str, Any], int] | None:
    row = rows.run(run_id)
    if row is None:
        return None
    data = _run_data(row)
    data["state"] = shown(row["state"])
    steps = rows.steps(run_id) if with_steps else None
    if steps is not None and row["status"] in TERMINAL and not any(
            step["node_type"] == CHILD_STEP_TYPE for step in steps):
        # Children are started only by `flow.call` steps, whose start is applied before anything after it: an
        # ended run without one has none (most runs; the query is skipped).
        data["child_run_ids"] = []
    else:
        data["child_run_ids"] = rows.child_ids(run_id)
    if steps is not None:
        data["steps"] = [_step_data(step, row["rerun_of"]) for step in steps]
        counts: dict[str, int] = {}
        for step in data["steps"]:
            counts[step["status"]] = counts.get(step["status"], 0) + 1
        data["step_counts"] = counts
    return data, int(row["last_seq"] or 0)


def _read_run_of(sql: sa.Engine, run_id: str, with_steps: bool) -> tuple[dict[str, Any], int] | None:
    """`_read_run` in one read-only transaction (never blocking the projector): on SQLite through the driver,
    the API's hottest read (every sync start reads its run once it ends)."""
    if sql.dialect.name == "sqlite":
        with sqlite_reader(sql) as reader:
            return _read_run(_DriverRows(reader), run_id, with_steps)
    with reading(sql) as conn:
        return _read_run(_CoreRows(conn), run_id, with_steps)


class NodeFacts(NamedTuple):
    """What a published version says of one of its nodes, for reads that name a node by id."""

    type: str
    title: str


_VERSION_NODES: dict[tuple[str, str, int], dict[str, NodeFacts]] = {}
"""Node id -> facts by (store, flow id, version): a published version never changes, and a sync start's answer
reads it for every run with a skipped step."""
_VERSION_NODES_KEPT = 512


def version_nodes(sql: sa.Engine, flow_id: str, version: int) -> dict[str, NodeFacts] | None:
    """Each node's type and title in `flow_id` v`version` (read once per store and version), or None when the
    store holds no such version."""
    key = (str(sql.url), flow_id, version)
    nodes = _VERSION_NODES.get(key)
    if nodes is None:
        from engine.publish import UnknownFlowVersion, get_version  # not at the top: a run's read rarely needs it

        try:
            flow = get_version(sql, flow_id, version)[1]
        except UnknownFlowVersion:  # a run's version is always published; a hand-edited store may lack it
            return None
        if len(_VERSION_NODES) >= _VERSION_NODES_KEPT:
            _VERSION_NODES.clear()
        nodes = _VERSION_NODES[key] = {node.id: NodeFacts(node.type, node.title.strip()) for node in flow.nodes}
    return nodes


def _with_types(sql: sa.Engine, found: tuple[dict[str, Any], int] | None) -> tuple[dict[str, Any], int] | None:
    """Each step's `type` from the run's published flow version where its record names none (a skipped step's:
    `step_skipped` carries no type)."""
    if found is None:
        return None
    run = found[0]
    steps = run.get("steps") or ()
    if all(step["type"] is not None for step in steps):
        return found
    nodes = version_nodes(sql, run["flow_id"], run["version"])
    if nodes is not None:
        for step in steps:
            if step["type"] is None and (facts := nodes.get(step["node"])) is not None:
                step["type"] = facts.type
    return found


def get_run(sql: sa.Engine, run_id: str, *, with_steps: bool = True) -> dict[str, Any] | None:
    """A run with its steps (ordered by start, each with `started_at` / `finished_at` and its node's `type`) and
    step counts, its `parent_run_id` and `child_run_ids` (flow.call), or None."""
    found = _with_types(sql, _read_run_of(sql, run_id, with_steps))
    return found[0] if found is not None else None


@dataclass(frozen=True)
class RunAt:
    """A run as `get_run` gives it, and the place in its stored sequence that answer reflects."""

    run: dict[str, Any]
    seq: int


def get_run_at(sql: sa.Engine, run_id: str) -> RunAt | None:
    """`get_run` with the run's last applied sequence, read in one read-only transaction (never blocking the
    projector), so the answer holds every change up to `seq` and none after it."""
    found = _with_types(sql, _read_run_of(sql, run_id, True))
    return RunAt(*found) if found is not None else None


def changes_after(sql: sa.Engine, run_id: str, after_seq: int, *, limit: int = 1000) -> list[LiveChange]:
    """The run's applied changes after sequence `after_seq`, in order, each as the live channel published it."""
    query = (sa.select(APPLIED.c.change).where(APPLIED.c.run_id == run_id, APPLIED.c.seq > after_seq)
             .order_by(APPLIED.c.seq).limit(limit))
    with reading(sql) as conn:
        stored = conn.execute(query).scalars().all()
    return [LiveChange.from_json(text) for text in stored if text is not None]


def list_runs(sql: sa.Engine, *, flow_id: str | None = None, status: str | None = None,
              limit: int = 50, after: tuple[datetime, str] | None = None) -> list[dict[str, Any]]:
    """Newest runs first, each with `cost_micros` (charged so far), `tokens_in` / `tokens_out`, `errors`,
    `current_node` and `waiting_on`; `after` (a run's `created_at` and id) starts past that run."""
    query = sa.select(RUNS).order_by(RUNS.c.created_at.desc(), RUNS.c.id).limit(limit)
    if flow_id:
        query = query.where(RUNS.c.flow_id == flow_id)
    if status:
        query = query.where(RUNS.c.status == status)
    if after is not None:
        created, run_id = after
        query = query.where(sa.or_(RUNS.c.created_at < created,
                                   sa.and_(RUNS.c.created_at == created, RUNS.c.id > run_id)))
    with reading(sql) as conn:
        return [_run_data(row) for row in conn.execute(query).mappings().all()]
