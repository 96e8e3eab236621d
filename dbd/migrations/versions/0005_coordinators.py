"""Account coordinators.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "coordinators",
        sa.Column("user", sa.String(64), primary_key=True),
        sa.Column("account", sa.String(64), primary_key=True),
    )


def downgrade() -> None:
    op.drop_table("coordinators")
