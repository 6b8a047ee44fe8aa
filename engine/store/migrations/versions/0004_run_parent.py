"""a run's parent run (flow.call) and its call depth

Revision ID: 0004_flow_call
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004_flow_call'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('parent_run_id', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('call_depth', sa.Integer(), nullable=False, server_default='0'))
        batch_op.create_index('ix_runs_parent_run_id', ['parent_run_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_parent_run_id')
        batch_op.drop_column('call_depth')
        batch_op.drop_column('parent_run_id')
