"""API key rights: keys made before rights existed could use the whole API, so they keep every right

Revision ID: 0007_key_rights
Revises: 0006_approvals_v2
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007_key_rights"
down_revision: str | None = "0006_approvals_v2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVERY_RIGHT = '["runs:read", "runs:start", "flows:publish", "approvals:decide"]'
BEFORE = '["approvals:decide"]'


def upgrade() -> None:
    op.execute(f"UPDATE api_keys SET scopes = '{EVERY_RIGHT}'")


def downgrade() -> None:
    op.execute(f"UPDATE api_keys SET scopes = '{BEFORE}'")
