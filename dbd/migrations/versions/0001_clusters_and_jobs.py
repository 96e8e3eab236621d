"""Clusters and job records.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from dbd.models import RECORD, ROW_ID

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("control_host", sa.String(255), nullable=False),
        sa.Column("control_port", sa.Integer, nullable=False),
        sa.Column("registered", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "jobs",
        sa.Column("id", ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("job_id", sa.BigInteger, nullable=False),
        sa.Column("submit_time", sa.BigInteger, nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("array_job_id", sa.BigInteger, nullable=False),
        sa.Column("array_task_id", sa.BigInteger, nullable=True),
        sa.Column("uid", sa.BigInteger, nullable=False),
        sa.Column("account", sa.String(64), nullable=False),
        sa.Column("partition", sa.String(64), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("nodes", sa.Text, nullable=False),
        sa.Column("eligible_time", sa.BigInteger, nullable=False),
        sa.Column("start_time", sa.BigInteger, nullable=False),
        sa.Column("end_time", sa.BigInteger, nullable=False),
        sa.Column("record", RECORD, nullable=False),
        sa.UniqueConstraint("cluster", "job_id", "submit_time", name="uq_jobs_identity"),
    )
    op.create_index("ix_jobs_cluster_uid_end", "jobs", ["cluster", "uid", "end_time"])
    op.create_index("ix_jobs_cluster_end", "jobs", ["cluster", "end_time"])
    op.create_index("ix_jobs_cluster_array", "jobs", ["cluster", "array_job_id"])


def downgrade() -> None:
    op.drop_table("jobs")
    op.drop_table("clusters")
