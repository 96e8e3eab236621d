"""Usage rollups (sreport): hourly, daily and monthly usage, and each cluster's CPUs.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

PERIODS = ("hour", "day", "month")
CLUSTER_SECONDS = (
    "alloc_secs",
    "down_secs",
    "planned_down_secs",
    "idle_secs",
    "planned_secs",
    "reported_secs",
)


def _keys() -> list[sa.Column[Any]]:
    return [
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("period", sa.BigInteger, primary_key=True),
    ]


def upgrade() -> None:
    op.add_column(
        "clusters", sa.Column("cpus", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
    op.create_index("ix_jobs_cluster_seq", "jobs", ["cluster", "seq"])
    for period in PERIODS:
        op.create_table(
            f"assoc_usage_{period}",
            *_keys(),
            sa.Column("account", sa.String(64), primary_key=True),
            sa.Column("user", sa.String(64), primary_key=True),
            sa.Column("alloc_secs", sa.BigInteger, nullable=False),
        )
        op.create_table(
            f"cluster_usage_{period}",
            *_keys(),
            sa.Column("cpus", sa.Integer, nullable=False),
            *(sa.Column(name, sa.BigInteger, nullable=False) for name in CLUSTER_SECONDS),
        )
    op.create_table(
        "usage_rollups",
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("since", sa.BigInteger, nullable=False),
        sa.Column("hour_end", sa.BigInteger, nullable=False),
        sa.Column("job_mark", sa.BigInteger, nullable=False),
        sa.Column("seq_mark", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "usage_running",
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("job", sa.BigInteger, primary_key=True),
        sa.Column("start_time", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("usage_running")
    op.drop_table("usage_rollups")
    for period in PERIODS:
        op.drop_table(f"cluster_usage_{period}")
        op.drop_table(f"assoc_usage_{period}")
    op.drop_index("ix_jobs_cluster_seq", table_name="jobs")
    op.drop_column("clusters", "cpus")
