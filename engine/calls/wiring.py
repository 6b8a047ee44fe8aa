"""What a `flow.call` body needs of its engine (the SQL store, `create_run()` with the engine's budget
preflight, the depth limit), installed per Redis key prefix by `EngineServices.start()`.

Bodies run in workers that hold only Redis (`StepServices`); like the money services, these are found by
the key prefix of the worker's keyspace, so engines on different prefixes in one process stay apart.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from engine.runtime.create import BudgetPreflight, CreatedRun, LatestVersions, create_run
from engine.runtime.handles import EngineHandles
from engine.settings import DEFAULT_MAX_CALL_DEPTH
from engine.store.db import reading
from engine.store.models import Run


@dataclass(frozen=True)
class ChildRun:
    """A child run as its parent's step reads it."""

    id: str
    flow_id: str
    status: str
    result: Any
    error: str | None
    error_type: str | None


_CHILD_COLUMNS = (Run.id, Run.flow_id, Run.status, Run.result, Run.error, Run.error_type)


@dataclass(frozen=True)
class CallServices:
    handles: EngineHandles
    budget_preflight: BudgetPreflight
    latest: LatestVersions
    max_depth: int = DEFAULT_MAX_CALL_DEPTH

    def child_by_key(self, idempotency_key: str) -> ChildRun | None:
        """The child run this step attempt created, if it did."""
        with reading(self.handles.sql) as conn:
            row = conn.execute(sa.select(*_CHILD_COLUMNS).where(Run.idempotency_key == idempotency_key)).first()
        return ChildRun(row.id, row.flow_id, row.status, row.result, row.error, row.error_type) if row else None

    def depth_of(self, run_id: str) -> int:
        """How many `flow.call` parents `run_id` has (0 for a run started any other way)."""
        with reading(self.handles.sql) as conn:
            depth = conn.execute(sa.select(Run.call_depth).where(Run.id == run_id)).scalar()
        return int(depth or 0)

    def start_child(self, flow_id: str, inputs: dict[str, Any], version: int | None, idempotency_key: str,
                    parent_run_id: str, depth: int) -> CreatedRun:
        """`create_run()` of the child, with this engine's budget preflight; a repeated key finds the same run."""
        return create_run(self.handles, flow_id, inputs, version=version, idempotency_key=idempotency_key,
                          budget_preflight=self.budget_preflight, latest=self.latest,
                          parent_run_id=parent_run_id, call_depth=depth)


_installed: dict[str, CallServices] = {}
_installed_lock = threading.Lock()


def install(services: CallServices) -> None:
    with _installed_lock:
        _installed[services.handles.keys.prefix] = services


def uninstall(services: CallServices) -> None:
    with _installed_lock:
        if _installed.get(services.handles.keys.prefix) is services:
            del _installed[services.handles.keys.prefix]


def current(prefix: str) -> CallServices | None:
    with _installed_lock:
        return _installed.get(prefix)
