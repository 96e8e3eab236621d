"""Alembic's environment: always online, on the connection ``dbd.schema`` hands over."""

from __future__ import annotations

from alembic import context

from dbd.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():
    context.run_migrations()
