"""Licenses served from outside the clusters, and each cluster's share (``sacctmgr
add resource``).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resources",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("server", sa.String(64), nullable=False),
        sa.Column("description", sa.String(255), nullable=False),
        sa.Column("server_type", sa.String(64), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.UniqueConstraint("name", "server", name="uq_resources_identity"),
    )
    op.create_table(
        "resource_clusters",
        sa.Column("resource_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("percent_allowed", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("resource_clusters")
    op.drop_table("resources")
