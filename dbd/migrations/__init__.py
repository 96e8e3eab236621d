"""Alembic migrations of the accounting database (``dbd.schema.upgrade`` runs them)."""
