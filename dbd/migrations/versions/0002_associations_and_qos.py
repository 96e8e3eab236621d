"""Accounts, users, QOS and associations (sacctmgr's entities).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _limits() -> list[sa.Column[Any]]:
    texts = ("grp_tres", "grp_tres_mins", "grp_tres_run_mins")
    counts = ("grp_jobs", "grp_submit", "grp_wall")
    more_texts = ("max_tres", "max_tres_per_node", "max_tres_mins")
    more_counts = ("max_jobs", "max_submit", "max_wall")
    return [
        *(sa.Column(name, sa.Text, nullable=True) for name in texts),
        *(sa.Column(name, sa.Integer, nullable=True) for name in counts),
        *(sa.Column(name, sa.Text, nullable=True) for name in more_texts),
        *(sa.Column(name, sa.Integer, nullable=True) for name in more_counts),
    ]


def upgrade() -> None:
    op.create_table(
        "accounts",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("description", sa.String(255), nullable=False),
        sa.Column("organization", sa.String(255), nullable=False),
    )
    op.create_table(
        "users",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("default_account", sa.String(64), nullable=False),
        sa.Column("admin_level", sa.String(16), nullable=False),
    )
    op.create_table(
        "qos",
        *_limits(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.String(255), nullable=False),
        sa.Column("priority", sa.Integer, nullable=True),
        sa.Column("grace_time", sa.Integer, nullable=True),
        sa.Column("preempt", sa.Text, nullable=False),
        sa.Column("preempt_exempt_time", sa.Integer, nullable=True),
        sa.Column("preempt_mode", sa.String(32), nullable=False),
        sa.Column("flags", sa.Text, nullable=False),
        sa.Column("usage_threshold", sa.Float, nullable=True),
        sa.Column("usage_factor", sa.Float, nullable=False),
        sa.Column("max_tres_pu", sa.Text, nullable=True),
        sa.Column("max_jobs_pu", sa.Integer, nullable=True),
        sa.Column("max_submit_pu", sa.Integer, nullable=True),
        sa.Column("max_tres_pa", sa.Text, nullable=True),
        sa.Column("max_jobs_pa", sa.Integer, nullable=True),
        sa.Column("max_submit_pa", sa.Integer, nullable=True),
        sa.Column("min_tres", sa.Text, nullable=True),
    )
    op.create_table(
        "associations",
        *_limits(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("account", sa.String(64), nullable=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("partition", sa.String(64), nullable=False),
        sa.Column("parent", sa.String(64), nullable=False),
        sa.Column("shares", sa.Integer, nullable=False),
        sa.Column("priority", sa.Integer, nullable=True),
        sa.Column("qos", sa.Text, nullable=False),
        sa.Column("def_qos", sa.String(64), nullable=False),
        sa.UniqueConstraint("cluster", "account", "user", "partition", name="uq_associations"),
    )


def downgrade() -> None:
    for table in ("associations", "qos", "users", "accounts"):
        op.drop_table(table)
