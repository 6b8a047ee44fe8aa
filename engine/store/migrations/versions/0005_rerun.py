"""a run's origin when it reruns another run from one of its nodes

Revision ID: 0005_rerun
Revises: 0004_flow_call
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005_rerun'
down_revision: str | None = '0004_flow_call'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('rerun_of', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('from_node', sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('from_node')
        batch_op.drop_column('rerun_of')
