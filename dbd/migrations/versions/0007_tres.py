"""The TRES clusters register beyond Slurm's fixed ones (``sacctmgr show tres``).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tres",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.UniqueConstraint("type", "name", name="uq_tres_identity"),
    )


def downgrade() -> None:
    op.drop_table("tres")
