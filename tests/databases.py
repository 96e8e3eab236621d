"""Fresh accounting and controller-state databases for tests: SQLite in a temporary
file, or MariaDB.

The same tests run on both backends. MariaDB is the one at 127.0.0.1:3306
(user root, no password), as on the development machine and in CI; each test
gets its own database, dropped afterwards. Where MariaDB cannot be reached
its tests are skipped, except when ``CI`` is set: there they fail.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from corral.statestorage import StateStorage

MARIADB = "mysql+pymysql://root@127.0.0.1:3306"
BACKENDS = ("sqlite", "mariadb")


@contextmanager
def fresh_database(kind: str, directory: Path) -> Iterator[str]:
    """A SQLAlchemy URL of an empty database of ``kind``, removed afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'accounting.db'}"
        return
    server = create_engine(f"{MARIADB}/test", pool_pre_ping=True)
    name = f"corral_t_{secrets.token_hex(4)}"
    try:
        with server.begin() as connection:
            connection.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4"))
    except OperationalError as exc:
        server.dispose()
        message = f"MariaDB at 127.0.0.1:3306 is unreachable: {exc.orig}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    try:
        yield f"{MARIADB}/{name}?charset=utf8mb4"
    finally:
        with server.begin() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        server.dispose()


@contextmanager
def fresh_state_database(directory: Path) -> Iterator[StateStorage]:
    """StateStorageType=state/mysql on an empty MariaDB database, removed afterwards
    (a skip, or under CI a failure, where MariaDB cannot be reached)."""
    with fresh_database("mariadb", directory) as url:
        name = url.rsplit("/", 1)[1].split("?")[0]
        yield StateStorage(kind="mysql", host="127.0.0.1", port=3306, user="root", database=name)
