"""Alembic revisions, one file each (a package so that installs ship them)."""
