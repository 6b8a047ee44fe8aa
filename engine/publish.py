"""Publishing flows: validated, content-hashed, immutable versions numbered 1, 2, 3… per flow.

Runs pin the version they started on, so republishing never changes a running run. Publishing
content identical to the latest version returns that version instead of a new number.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from engine.flow import MAX_DOCUMENT_DEPTH, Flow, dump_flow, flow_to_data, load_flow_text
from engine.json_bounds import json_problems
from engine.store.db import read_scope, session_scope
from engine.store.models import FlowRecord, FlowVersion

if TYPE_CHECKING:
    from engine.validation import Diagnostic

Target = sa.Engine | Session


@dataclass(frozen=True)
class PublishedVersion:
    flow_id: str
    version: int
    content_hash: str
    published_at: datetime
    created: bool = True
    """False when `publish` stored nothing: the content was the latest version's, answered again."""


class PublishRefused(ValueError):
    """The flow has validation errors; nothing was stored."""

    def __init__(self, flow_id: str, diagnostics: list[Diagnostic]) -> None:
        self.flow_id = flow_id
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.severity == "error"]
        lines = "\n".join(f"  {d.code}{f' ({d.node})' if d.node else ''}: {d.message}" for d in errors)
        super().__init__(
            f'flow "{flow_id}" was not published: {len(errors)} validation error(s); fix them and publish again:\n'
            f"{lines}"
        )


class UnknownFlowVersion(LookupError):
    """No such flow, or no such version of it (`kind` says which: the API's error code)."""

    def __init__(self, message: str, kind: Literal["unknown_flow", "unknown_version"] = "unknown_flow") -> None:
        super().__init__(message)
        self.kind = kind


def content_hash(document: str) -> str:
    """sha256 hex of a flow document's text."""
    return hashlib.sha256(document.encode("utf-8")).hexdigest()


def _version_of(row: FlowVersion, created: bool = True) -> PublishedVersion:
    return PublishedVersion(row.flow_id, row.version, row.content_hash, row.published_at, created)


@contextmanager
def _writing(target: Target) -> Iterator[Session]:
    if isinstance(target, Session):
        yield target
    else:
        with session_scope(target) as session:
            yield session


@contextmanager
def _reading(target: Target) -> Iterator[Session]:
    if isinstance(target, Session):
        yield target
    else:
        with read_scope(target) as session:
            yield session


def _lock_flow_row(session: Session, flow: Flow, now: datetime) -> FlowRecord:
    """The flow's row, created if missing, locked for this transaction (PostgreSQL: FOR UPDATE;
    SQLite: the IMMEDIATE transaction already holds the database's write lock)."""
    insert: Callable[[type[FlowRecord]], Any] = sqlite_insert
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        insert = pg_insert
    values = {"id": flow.id, "name": flow.name, "latest_version": 0, "enabled": flow.enabled, "created_at": now}
    session.execute(insert(FlowRecord).values(**values, updated_at=now).on_conflict_do_nothing(index_elements=["id"]))
    locked = sa.select(FlowRecord).where(FlowRecord.id == flow.id).with_for_update()
    return session.scalars(locked.execution_options(populate_existing=True)).one()


def publish(target: Target, flow: Flow, *, now: datetime | None = None) -> PublishedVersion:
    """Validate `flow` and store it as its next version (or return the latest if identical).

    `target`: an Engine (own transaction) or a Session (the caller's transaction, not committed here).
    Raises `PublishRefused` when validation finds errors.
    """
    # Here, not at the top: validation pulls in networkx, which starting a worker or a CLI command
    # (everything that imports this module for `get_version`) has no use for.
    from engine.validation import Diagnostic, has_errors, validate

    diagnostics = validate(flow)
    if has_errors(diagnostics):
        raise PublishRefused(flow.id, diagnostics)
    calls = _call_diagnostics(target, flow)
    if has_errors(calls):
        raise PublishRefused(flow.id, diagnostics + calls)
    # A Flow built in memory (the canvas's) skipped the file checks; what is stored must load again.
    unfit = json_problems(flow_to_data(flow), MAX_DOCUMENT_DEPTH)
    if unfit:
        raise PublishRefused(flow.id, [Diagnostic("invalid_document", "error", None, f"{p.path}: {p.message}")
                                       for p in unfit])
    document = dump_flow(flow)
    digest = content_hash(document)
    stamp = now or datetime.now(UTC)
    with _writing(target) as session:
        record = _lock_flow_row(session, flow, stamp)
        record.enabled = flow.enabled  # the listing's copy of the latest version's flag
        if record.latest_version:
            latest = session.scalars(
                sa.select(FlowVersion).where(
                    FlowVersion.flow_id == flow.id, FlowVersion.version == record.latest_version
                )
            ).one()
            if latest.content_hash == digest:
                return _version_of(latest, created=False)
        record.latest_version += 1
        record.name = flow.name
        record.updated_at = stamp
        row = FlowVersion(
            flow_id=flow.id, version=record.latest_version, content_hash=digest, document=document, published_at=stamp
        )
        session.add(row)
        session.flush()
        return _version_of(row)


def _call_diagnostics(target: Target, flow: Flow) -> list[Diagnostic]:
    """`flow.call` checks against the published flows (`engine.calls.graph`); [] for a flow with no call."""
    if not any(node.type == "flow.call" for node in flow.nodes):
        return []
    from engine.calls.graph import call_diagnostics

    def resolve(flow_id: str, version: int | None) -> Flow | None:
        try:
            return get_version(target, flow_id, version)[1]
        except UnknownFlowVersion:
            return None

    return call_diagnostics(flow, resolve)


_parsed: dict[str, Flow] = {}
_parsed_lock = threading.Lock()
_PARSED_CACHE_LIMIT = 256


def _flow_of(row: FlowVersion) -> Flow:
    # Versions are immutable, so a parsed document is reused by its hash (run starts are hot).
    with _parsed_lock:
        cached = _parsed.get(row.content_hash)
    if cached is not None:
        return cached
    flow = load_flow_text(row.document)
    with _parsed_lock:
        if len(_parsed) >= _PARSED_CACHE_LIMIT:
            _parsed.pop(next(iter(_parsed)))
        _parsed[row.content_hash] = flow
    return flow


def get_version(target: Target, flow_id: str, version: int | None = None) -> tuple[PublishedVersion, Flow]:
    """A published version and its flow (None: the latest). Treat the returned Flow as read-only:
    it is shared between callers."""
    with _reading(target) as session:
        query = sa.select(FlowVersion).where(FlowVersion.flow_id == flow_id)
        if version is None:
            query = query.order_by(FlowVersion.version.desc()).limit(1)
        else:
            query = query.where(FlowVersion.version == version)
        row = session.scalars(query).first()
        if row is None:
            latest = None if version is None else session.scalar(
                sa.select(sa.func.max(FlowVersion.version)).where(FlowVersion.flow_id == flow_id))
            if latest is not None:
                raise UnknownFlowVersion(f'flow "{flow_id}" has no version {version} (its versions are 1 to {latest}); '
                                         "name one of them, or leave the version out for the latest",
                                         "unknown_version")
            what = f'flow "{flow_id}"' if version is None else f'version {version} of flow "{flow_id}"'
            raise UnknownFlowVersion(f"{what} is not published; publish the flow first (lockgate run publishes it)")
        return _version_of(row), _flow_of(row)


def list_versions(target: Target, flow_id: str) -> list[PublishedVersion]:
    """Every published version of `flow_id`, oldest first ([] when none)."""
    with _reading(target) as session:
        rows = session.scalars(
            sa.select(FlowVersion).where(FlowVersion.flow_id == flow_id).order_by(FlowVersion.version)
        ).all()
        return [_version_of(row) for row in rows]
