"""tokens per ai.model step and per run; the run's continue_on_fail errors

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tokens_in', sa.BigInteger(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('tokens_out', sa.BigInteger(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('errors', _JSON, nullable=True))
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tokens_in', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('tokens_out', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('steps', schema=None) as batch_op:
        batch_op.drop_column('tokens_out')
        batch_op.drop_column('tokens_in')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('errors')
        batch_op.drop_column('tokens_out')
        batch_op.drop_column('tokens_in')
