"""Reservations, their hourly usage, and over-committed time in the cluster rollups.

Revision ID: 0006
Revises: 0005

Hours rolled up before this revision keep 0 as their planned and over-committed
time; hours rolled (or rolled again) from now on have them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from dbd.models import ROW_ID

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

PERIODS = ("hour", "day", "month")
ZERO = sa.text("0")


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("resv_id", sa.BigInteger, nullable=False),
        sa.Column("time_start", sa.BigInteger, nullable=False),
        sa.Column("time_end", sa.BigInteger, nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("nodes", sa.Text, nullable=False),
        sa.Column("node_count", sa.Integer, nullable=False),
        sa.Column("cpus", sa.Integer, nullable=False),
        sa.Column("flags", sa.Text, nullable=False),
        sa.Column("users", sa.Text, nullable=False),
        sa.Column("accounts", sa.Text, nullable=False),
        sa.Column("partition", sa.String(64), nullable=False),
        sa.Column("tres", sa.Text, nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("deleted", sa.Boolean, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("cluster", "resv_id", "time_start", name="uq_reservations_identity"),
    )
    op.create_table(
        "reservation_usage_hour",
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("period", sa.BigInteger, primary_key=True),
        sa.Column("resv_id", sa.BigInteger, primary_key=True),
        sa.Column("time_start", sa.BigInteger, primary_key=True),
        sa.Column("wall_secs", sa.BigInteger, nullable=False),
        sa.Column("alloc_secs", sa.BigInteger, nullable=False),
    )
    for period in PERIODS:
        op.add_column(
            f"cluster_usage_{period}",
            sa.Column("over_secs", sa.BigInteger, nullable=False, server_default=ZERO),
        )
    for name in ("resv_mark", "resv_seq_mark"):
        op.add_column(
            "usage_rollups", sa.Column(name, sa.BigInteger, nullable=False, server_default=ZERO)
        )


def downgrade() -> None:
    for name in ("resv_seq_mark", "resv_mark"):
        op.drop_column("usage_rollups", name)
    for period in PERIODS:
        op.drop_column(f"cluster_usage_{period}", "over_secs")
    op.drop_table("reservation_usage_hour")
    op.drop_table("reservations")
