"""Cancelled runs' parked steps: a run cancelled while parked left the step it waited on `suspended`; they end
`cancelled` at the run's end, as the projector now writes them (and a rebuild from the events would)

Revision ID: 0008_cancelled_parked_steps
Revises: 0007_key_rights
Create Date: 2026-12-08
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008_cancelled_parked_steps"
down_revision: str | None = "0007_key_rights"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "UPDATE steps SET status = 'cancelled', "
        "finished_at = (SELECT runs.finished_at FROM runs WHERE runs.id = steps.run_id) "
        "WHERE status = 'suspended' AND run_id IN (SELECT id FROM runs WHERE status = 'cancelled')"
    )


def downgrade() -> None:
    """The steps stay `cancelled`: the code before this revision reads that status too."""
