"""applied_events: the projector's per-run sequence (unique per run, none for dead letters) and the live change

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('applied_events', schema=None) as batch_op:
        batch_op.drop_index('ix_applied_events_run_id')
        batch_op.alter_column('seq', existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column('change', sa.Text(), nullable=True))
    # Sequences stored before 0003 were the producers' counts and may repeat within a run: renumber each run's
    # recorded events 1..n in the order they were stored (then apply time, then event id).
    bind = op.get_bind()
    table = sa.table('applied_events', sa.column('event_id', sa.String()), sa.column('run_id', sa.String()),
                     sa.column('seq', sa.Integer()), sa.column('applied_at', sa.DateTime()))
    rows = bind.execute(sa.select(table.c.event_id, table.c.run_id)
                        .order_by(table.c.run_id, table.c.seq, table.c.applied_at, table.c.event_id)).all()
    places: dict[str, int] = {}
    updates = []
    for event_id, run_id in rows:
        places[run_id] = places.get(run_id, 0) + 1
        updates.append({'b_event_id': event_id, 'b_seq': places[run_id]})
    if updates:
        bind.execute(sa.update(table).where(table.c.event_id == sa.bindparam('b_event_id'))
                     .values(seq=sa.bindparam('b_seq')), updates)
        # The projector numbers a run's next event after runs.last_seq: it must be the renumbered count.
        runs = sa.table('runs', sa.column('id', sa.String()), sa.column('last_seq', sa.Integer()))
        bind.execute(sa.update(runs).where(runs.c.id == sa.bindparam('b_id')).values(last_seq=sa.bindparam('b_last')),
                     [{'b_id': run_id, 'b_last': last} for run_id, last in places.items()])
    with op.batch_alter_table('applied_events', schema=None) as batch_op:
        batch_op.create_unique_constraint(batch_op.f('uq_applied_events_run_id_seq'), ['run_id', 'seq'])


def downgrade() -> None:
    with op.batch_alter_table('applied_events', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('uq_applied_events_run_id_seq'), type_='unique')
        batch_op.drop_column('change')
    op.execute("UPDATE applied_events SET seq = 0 WHERE seq IS NULL")
    with op.batch_alter_table('applied_events', schema=None) as batch_op:
        batch_op.alter_column('seq', existing_type=sa.Integer(), nullable=False)
        batch_op.create_index('ix_applied_events_run_id', ['run_id'], unique=False)
