"""Create or upgrade the accounting database to the newest schema, with Alembic.

``corral-dbd`` calls ``upgrade`` at every start: a new database gets every
revision, an older one the revisions it lacks, a current one nothing. The
revisions live in dbd/migrations/versions; Alembic keeps the applied one in
its ``alembic_version`` table.
"""

from __future__ import annotations

import os

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    return config


def head() -> str:
    """The newest revision this dbd knows."""
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None
    return revision


def current(engine: Engine) -> str | None:
    """The revision the database is at (None: no schema yet)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine) -> None:
    """Bring the database at ``engine`` to ``head()``."""
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
