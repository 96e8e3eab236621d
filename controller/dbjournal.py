"""The journal in MariaDB or MySQL (StateStorageType=state/mysql, docs/ha.md).

The same tables and JSON records as the SQLite journal (``controller/journal.py``)
in a database every SlurmctldHost can reach, so a standby can take over without
shared storage. The same contract too: ``write`` commits one batch in one InnoDB
transaction (durable at commit with the server's default
``innodb_flush_log_at_trx_commit=1``) or raises ``JournalWriteError`` with
nothing of it written, and ``controller/durability.py`` puts it back and retries.
Every write also locks the cluster's lease row and checks this controller's
fencing token (``controller/lease.py``): a controller that lost the lease writes
nothing more.

Every statement is an upsert or a delete: a connection lost during COMMIT
leaves it unknown whether the batch is in, and writing it again must then be
harmless. SQLAlchemy with PyMySQL, as corral-dbd's MariaDB storage; the
database must exist (the journal makes its tables). The consistent copy of the
SQLite journal has no counterpart here: the database server's own backups and
replication keep copies.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.exc import DBAPIError, InterfaceError, InternalError, OperationalError

from controller.journal import (
    SCHEMA_VERSION,
    Batch,
    JournalError,
    JournalWriteError,
    Loaded,
    job_from_row,
    job_to_row,
    node_to_row,
    payload_from_row,
    payload_to_row,
)
from controller.lease import Lease
from controller.model import Payload
from corral.statestorage import StateStorage

log = logging.getLogger("corral.controller")

_TABLE = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
_SCHEMA = tuple(
    f"CREATE TABLE IF NOT EXISTS {table} ({columns}) {_TABLE}"
    for table, columns in (
        ("jobs", "job_id BIGINT PRIMARY KEY, record LONGTEXT NOT NULL"),
        ("payloads", "job_id BIGINT PRIMARY KEY, record LONGTEXT NOT NULL"),
        ("nodes", "name VARCHAR(255) PRIMARY KEY, record TEXT NOT NULL"),
        ("meta", "`key` VARCHAR(255) PRIMARY KEY, value LONGTEXT NOT NULL"),
        ("outbox", "seq BIGINT PRIMARY KEY, record LONGBLOB NOT NULL"),
        ("event_outbox", "seq BIGINT PRIMARY KEY, record LONGTEXT NOT NULL"),
        (
            "lease",
            "cluster VARCHAR(255) PRIMARY KEY, holder VARCHAR(255) NOT NULL, "
            "token BIGINT NOT NULL, expires DOUBLE NOT NULL",
        ),
    )
)

#: Errors of the server or the connection (unreachable, gone, lock timeouts):
#: a write is retried. Others (integrity, syntax) are bugs in the batch.
_TRANSIENT = (OperationalError, InterfaceError, InternalError)


def _upsert(table: str, key: str) -> str:
    return (
        f"INSERT INTO {table} (`{key}`, record) VALUES (:k, :v) "
        "ON DUPLICATE KEY UPDATE record = VALUES(record)"
    )


def holder_name() -> str:
    """Who holds the lease, in its row and log lines: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


class DatabaseJournal:
    """The cluster's state in one MariaDB/MySQL database; ``lease`` says whether
    this controller may write it."""

    def __init__(
        self, storage: StateStorage, cluster: str, holder: str | None = None, line: str = ""
    ) -> None:
        self.path = storage.where
        self._engine = create_engine(
            storage.url(),
            pool_pre_ping=True,
            pool_recycle=3600,
            # A server that stops answering fails the write (then retried), not hangs it.
            connect_args={"connect_timeout": 5, "read_timeout": 30, "write_timeout": 30},
        )
        lease_s = storage.lease_s
        self.lease = Lease(self._engine, cluster, holder or holder_name(), lease_s, line)
        try:
            with self._engine.begin() as connection:
                for statement in _SCHEMA:
                    connection.execute(text(statement))
                self.lease.create(connection)
                self._check_version(connection)
        except DBAPIError as exc:
            self._engine.dispose()
            raise JournalError(f"{self.path}: cannot use the state database: {exc.orig}") from None
        except JournalError:
            self._engine.dispose()
            raise

    def _check_version(self, connection: Connection) -> None:
        """Refuse state written in another layout rather than misread it."""
        row = connection.execute(text("SELECT value FROM meta WHERE `key` = 'schema'")).first()
        if row is None:
            connection.execute(
                text("INSERT IGNORE INTO meta VALUES ('schema', :v)"), {"v": str(SCHEMA_VERSION)}
            )
        elif row[0] != str(SCHEMA_VERSION):
            raise JournalError(
                f"{self.path}: state schema {row[0]}, this controller reads {SCHEMA_VERSION}"
            )

    def load(self) -> Loaded:
        """Every table, or ``JournalError`` when the database or a row cannot be read."""
        try:
            with self._engine.connect() as connection:
                return self._load(connection)
        except DBAPIError as exc:
            raise JournalError(f"{self.path}: cannot read the state: {exc.orig}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise JournalError(f"{self.path}: corrupt state ({exc})") from None

    def _load(self, connection: Connection) -> Loaded:
        def rows(query: str) -> Sequence[Any]:
            return connection.execute(text(query)).all()

        jobs = {int(jid): job_from_row(record) for jid, record in rows("SELECT * FROM jobs")}
        nodes = {name: json.loads(record) for name, record in rows("SELECT * FROM nodes")}
        meta = dict(rows("SELECT `key`, value FROM meta WHERE `key` != 'schema'"))
        outbox = {int(seq): bytes(r) for seq, r in rows("SELECT * FROM outbox ORDER BY seq")}
        events = dict(rows("SELECT seq, record FROM event_outbox ORDER BY seq"))
        return Loaded(jobs, nodes, meta, outbox, {int(seq): r for seq, r in events.items()})

    def payload(self, job_id: int) -> Payload | None:
        with self._engine.connect() as connection:
            row = connection.execute(
                text("SELECT record FROM payloads WHERE job_id = :j"), {"j": job_id}
            ).first()
        return None if row is None else payload_from_row(row[0])

    def write(self, batch: Batch) -> None:
        """Commit ``batch`` if this controller holds the lease, or raise
        ``JournalWriteError`` (``Fenced``: it no longer does) with nothing written."""
        try:
            with self._engine.begin() as connection:
                self.lease.check(connection)
                self._write(connection, batch)
        except _TRANSIENT as exc:
            raise JournalWriteError(str(exc.orig)) from exc

    def _write(self, connection: Connection, batch: Batch) -> None:
        def each(statement: str, values: Sequence[Mapping[str, Any]]) -> None:
            if values:
                connection.execute(text(statement), list(values))

        each(
            _upsert("jobs", "job_id"), [{"k": j, "v": job_to_row(x)} for j, x in batch.jobs.items()]
        )
        each(
            _upsert("payloads", "job_id"),
            [{"k": j, "v": payload_to_row(p)} for j, p in batch.payloads.items()],
        )
        each("DELETE FROM jobs WHERE job_id = :k", [{"k": j} for j in batch.deleted_jobs])
        each("DELETE FROM payloads WHERE job_id = :k", [{"k": j} for j in batch.deleted_payloads])
        each(
            _upsert("nodes", "name"),
            [{"k": name, "v": node_to_row(node)} for name, node in batch.nodes.items()],
        )
        each(
            "INSERT INTO meta VALUES (:k, :v) ON DUPLICATE KEY UPDATE value = VALUES(value)",
            [{"k": k, "v": v} for k, v in batch.meta.items()],
        )
        each(_upsert("outbox", "seq"), [{"k": s, "v": r} for s, r in batch.outbox.items()])
        if batch.delivered:
            each("DELETE FROM outbox WHERE seq <= :s", [{"s": batch.delivered}])
        each(_upsert("event_outbox", "seq"), [{"k": s, "v": r} for s, r in batch.events.items()])
        if batch.events_delivered:
            each("DELETE FROM event_outbox WHERE seq <= :s", [{"s": batch.events_delivered}])

    def backup(self) -> None:
        """Nothing to do: the database server's backups keep the copies."""

    def close(self) -> None:
        """Hand the lease back (a standby need not wait out its expiry) and disconnect."""
        try:
            self.lease.release()
        except DBAPIError as exc:
            log.warning("lease: not released (a standby waits for its expiry): %s", exc.orig)
        self._engine.dispose()
