"""SQL tables of the engine. The projector is the only writer of run state (runs, steps, holds,
approvals); `publish` writes flows and versions; `create_run()` inserts queued runs.

Change a model only together with a new Alembic migration in `engine/store/migrations/versions`
(`tests/store/test_migrations.py` fails when they disagree).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from engine.store.types import JsonDocument, Micros, UtcDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RUN_STATUSES = ("queued", "running", "waiting", "succeeded", "failed", "interrupted", "cancelled")
TERMINAL_RUN_STATUSES = ("succeeded", "failed", "interrupted", "cancelled")
STEP_STATUSES = ("pending", "running", "suspended", "succeeded", "failed", "skipped", "cancelled")
HOLD_STATES = ("placed", "charged", "released")
APPROVAL_STATUSES = ("pending", "approved", "rejected", "expired")


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class FlowRecord(Base):
    """A flow by its id; its content lives in immutable `FlowVersion` rows."""

    __tablename__ = "flows"

    id: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(255), default="")
    latest_version: Mapped[int] = mapped_column(sa.Integer, default=0)
    """Highest published version number; bumped under a row lock so numbers never repeat."""
    enabled: Mapped[bool] = mapped_column(sa.Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class FlowVersion(Base):
    """One published version of a flow: frozen document text, never updated."""

    __tablename__ = "flow_versions"
    __table_args__ = (
        sa.UniqueConstraint("flow_id", "version"),
        sa.Index("ix_flow_versions_flow_id_content_hash", "flow_id", "content_hash"),
    )

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    flow_id: Mapped[str] = mapped_column(sa.ForeignKey("flows.id"))
    version: Mapped[int] = mapped_column(sa.Integer)
    content_hash: Mapped[str] = mapped_column(sa.String(64))
    """sha256 hex of the document text."""
    document: Mapped[str] = mapped_column(sa.Text)
    """The flow as `engine.flow.dump_flow` wrote it (byte-stable)."""
    published_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Run(Base):
    """One execution of a pinned flow version."""

    __tablename__ = "runs"
    __table_args__ = (
        sa.ForeignKeyConstraint(["flow_id", "version"], ["flow_versions.flow_id", "flow_versions.version"]),
        sa.Index("ix_runs_status", "status"),
        sa.Index("ix_runs_flow_id_created_at", "flow_id", "created_at"),
        sa.Index("ix_runs_parent_run_id", "parent_run_id"),
    )

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    flow_id: Mapped[str] = mapped_column(sa.String(128))
    version: Mapped[int] = mapped_column(sa.Integer)
    status: Mapped[str] = mapped_column(sa.String(16), default="queued")
    trigger: Mapped[str | None] = mapped_column(sa.String(128))
    """Id of the trigger node that started the run."""
    idempotency_key: Mapped[str | None] = mapped_column(sa.String(255), unique=True)
    inputs: Mapped[dict[str, Any]] = mapped_column(JsonDocument, default=dict)
    """Frozen inputs, secrets redacted."""
    state: Mapped[dict[str, Any]] = mapped_column(JsonDocument, default=dict)
    result: Mapped[Any | None] = mapped_column(JsonDocument)
    error: Mapped[str | None] = mapped_column(sa.Text)
    error_type: Mapped[str | None] = mapped_column(sa.String(64))
    """Why the run failed or was interrupted: step_failed, parked_expired, step_not_idempotent, ..."""
    waiting_on: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    """{node, reason, due_at} while parked: the source of truth the due set can be rebuilt from."""
    current_node: Mapped[str | None] = mapped_column(sa.String(128))
    cost_micros: Mapped[int] = mapped_column(Micros, default=0)
    """What the run's model calls cost, in micro-dollars (`engine.money.amounts`)."""
    tokens_in: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    """Prompt tokens of the run's `ai.model` steps: the sum over its step rows, set (never added to)."""
    tokens_out: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    """Completion tokens of the run's `ai.model` steps, summed the same way."""
    errors: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    """Failures the run went on past (`continue_on_fail`): step key -> {message, type, attempts}."""
    last_seq: Mapped[int] = mapped_column(sa.Integer, default=0)
    """Highest per-run event sequence number applied by the projector."""
    parent_run_id: Mapped[str | None] = mapped_column(sa.String(64))
    """The run whose `flow.call` step started this one (None for a run started any other way)."""
    call_depth: Mapped[int] = mapped_column(sa.Integer, default=0, server_default="0")
    """How many `flow.call` parents this run has above it (0 for a run started any other way)."""
    rerun_of: Mapped[str | None] = mapped_column(sa.String(64))
    """The finished run this one reruns from `from_node` (`engine.runtime.rerun`); None for any other run."""
    from_node: Mapped[str | None] = mapped_column(sa.String(128))
    """The node a rerun starts at: the steps before it are reused from `rerun_of`, never executed again."""
    started_by: Mapped[str | None] = mapped_column(sa.String(255))
    """Who started the run (`key:<name>`, `user:<name>`), when known: an approval's `forbid_self` refuses them."""
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    first_parked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    """Start of the run's `max_wait` budget."""
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Step(Base):
    """One node's execution within a run (one row per forEach item: `step` is `node[index]` there)."""

    __tablename__ = "steps"
    __table_args__ = (sa.UniqueConstraint("run_id", "step"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[str] = mapped_column(sa.String(255))
    """Step key: the node id, or `node[index]` inside a forEach (as in the events)."""
    node_id: Mapped[str] = mapped_column(sa.String(128))
    node_type: Mapped[str | None] = mapped_column(sa.String(64))
    status: Mapped[str] = mapped_column(sa.String(16), default="pending")
    attempts: Mapped[int] = mapped_column(sa.Integer, default=0)
    input: Mapped[Any | None] = mapped_column(JsonDocument)
    """What the step was given (redacted)."""
    output: Mapped[Any | None] = mapped_column(JsonDocument)
    """What it produced (redacted)."""
    ports: Mapped[list[str] | None] = mapped_column(JsonDocument)
    """Output ports the step delivered."""
    error: Mapped[str | None] = mapped_column(sa.Text)
    error_type: Mapped[str | None] = mapped_column(sa.String(64))
    duration_ms: Mapped[float | None] = mapped_column(sa.Float)
    tokens_in: Mapped[int | None] = mapped_column(sa.Integer)
    """`ai.model` only: the answered call's prompt tokens (None for steps that call no model)."""
    tokens_out: Mapped[int | None] = mapped_column(sa.Integer)
    """`ai.model` only: the answered call's completion tokens."""
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class AppliedEvent(Base):
    """Ids of events the projector applied: applying one again changes nothing. Each applied event holds its
    place in its run's sequence and the live change it made, so a live reader can catch up from here."""

    __tablename__ = "applied_events"
    __table_args__ = (sa.UniqueConstraint("run_id", "seq"),)

    event_id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(sa.String(64))
    seq: Mapped[int | None] = mapped_column(sa.Integer)
    """The run's stored sequence, 1..n in the order the projector applied its events, assigned by the projector
    (never the producer's count); None for an event captured as a dead letter, which takes no place."""
    event_type: Mapped[str] = mapped_column(sa.String(64))
    applied_at: Mapped[datetime] = mapped_column(UtcDateTime)
    change: Mapped[str | None] = mapped_column(sa.Text)
    """The live change the event made, as JSON text exactly as published on `Keyspace.live`; None for a dead
    letter."""


class DeadLetter(Base):
    """A message that could not be parsed or applied, kept with its error instead of retried forever."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(sa.String(128))
    """Stream (or service) the message came from."""
    message_id: Mapped[str | None] = mapped_column(sa.String(64))
    payload: Mapped[bytes] = mapped_column(sa.LargeBinary)
    error: Mapped[str] = mapped_column(sa.Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Budget(Base):
    """A spending limit per period."""

    __tablename__ = "budgets"

    name: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    limit_micros: Mapped[int] = mapped_column(Micros)
    """Limit per period in micro-dollars (`engine.money.amounts`), as all money columns."""
    period: Mapped[str] = mapped_column(sa.String(16))
    """'day', 'week', 'month' or 'total'."""
    period_start: Mapped[datetime | None] = mapped_column(UtcDateTime)
    spent_micros: Mapped[int] = mapped_column(Micros, default=0)
    held_micros: Mapped[int] = mapped_column(Micros, default=0)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Hold(Base):
    """Money reserved for one model call: placed, then charged or released (once)."""

    __tablename__ = "holds"
    __table_args__ = (
        sa.Index("ix_holds_run_id", "run_id"),
        sa.Index("ix_holds_state_expires_at", "state", "expires_at"),
    )

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    node_id: Mapped[str] = mapped_column(sa.String(128))
    budget_name: Mapped[str] = mapped_column(sa.ForeignKey("budgets.name"))
    amount_micros: Mapped[int] = mapped_column(Micros)
    charged_micros: Mapped[int | None] = mapped_column(Micros)
    state: Mapped[str] = mapped_column(sa.String(16), default="placed")
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime)


class Approval(Base):
    """A decision a person or API key owes a parked run."""

    __tablename__ = "approvals"
    __table_args__ = (sa.Index("ix_approvals_status", "status"), sa.Index("ix_approvals_run_id", "run_id"))

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    run_id: Mapped[str] = mapped_column(sa.ForeignKey("runs.id", ondelete="CASCADE"))
    flow_id: Mapped[str] = mapped_column(sa.String(128))
    node_id: Mapped[str] = mapped_column(sa.String(128))
    message: Mapped[str] = mapped_column(sa.Text, default="")
    requested_at: Mapped[datetime] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime)
    status: Mapped[str] = mapped_column(sa.String(16), default="pending")
    decision: Mapped[str | None] = mapped_column(sa.String(16))
    """'approve' or 'reject'."""
    decided_by: Mapped[str | None] = mapped_column(sa.String(255))
    comment: Mapped[str | None] = mapped_column(sa.Text)
    decided_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    required: Mapped[int] = mapped_column(sa.Integer, default=1, server_default="1")
    """How many distinct approvers must approve (approvals v2; 1 for a v1 approval)."""
    settings: Mapped[dict[str, Any] | None] = mapped_column(JsonDocument)
    """The v2 settings as requested: approvers, forbid_self, remind_every, escalate_at, escalate_to, notify_url."""
    reminders_sent: Mapped[int] = mapped_column(sa.Integer, default=0, server_default="0")
    escalated_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class ApprovalAttempt(Base):
    """Every decision attempt, accepted or refused (late, revoked key, no rights, already decided)."""

    __tablename__ = "approval_attempts"
    __table_args__ = (sa.Index("ix_approval_attempts_approval_id", "approval_id"),)

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    approval_id: Mapped[str] = mapped_column(sa.String(64))
    """Not a foreign key: attempts on unknown ids are recorded too."""
    actor: Mapped[str] = mapped_column(sa.String(255))
    decision: Mapped[str] = mapped_column(sa.String(16))
    outcome: Mapped[str] = mapped_column(sa.String(16))
    """'accepted' or 'refused'."""
    reason: Mapped[str | None] = mapped_column(sa.Text)
    attempted_at: Mapped[datetime] = mapped_column(UtcDateTime)
    comment: Mapped[str | None] = mapped_column(sa.Text)


class ApiKey(Base):
    """An API key: only its hash is stored."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(128), unique=True)
    key_hash: Mapped[str] = mapped_column(sa.String(128), unique=True)
    scopes: Mapped[list[str]] = mapped_column(JsonDocument, default=list)
    """Rights, e.g. ['runs:read', 'approvals:decide'] (`engine.approvals.keys.RIGHTS`)."""
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


@sa.event.listens_for(FlowVersion, "before_update")
def _refuse_version_change(_mapper: Any, _connection: Any, target: FlowVersion) -> None:
    raise ValueError(
        f'version {target.version} of flow "{target.flow_id}" is published and immutable; '
        "publish a new version instead of editing this one"
    )
