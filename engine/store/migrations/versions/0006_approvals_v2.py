"""approvals v2: quorum, reminders, escalation; who started a run (forbid_self); a decision's comment

Revision ID: 0006_approvals_v2
Revises: 0005_rerun
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006_approvals_v2"
down_revision: str | None = "0005_rerun"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("started_by", sa.String(length=255), nullable=True))
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("required", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(
            sa.Column(
                "settings", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=True
            )
        )
        batch_op.add_column(sa.Column("reminders_sent", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("escalated_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("approval_attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("comment", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approval_attempts", schema=None) as batch_op:
        batch_op.drop_column("comment")
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_column("escalated_at")
        batch_op.drop_column("reminders_sent")
        batch_op.drop_column("settings")
        batch_op.drop_column("required")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("started_by")
