"""Node events (nodes down or drained, with their reasons).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from dbd.models import ROW_ID

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("node", sa.String(64), nullable=False),
        sa.Column("time_start", sa.BigInteger, nullable=False),
        sa.Column("time_end", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("reason_uid", sa.BigInteger, nullable=False),
        sa.Column("cpus", sa.Integer, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("cluster", "node", "time_start", name="uq_events_identity"),
    )


def downgrade() -> None:
    op.drop_table("events")
