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
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
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
from controller.warmstate import WarmCopy
from corral.statestorage import StateStorage

log = logging.getLogger("corral.controller")

#: The longest pause between a starting controller's tries of a server it cannot reach.
UNREACHABLE_RETRY_MAX_S = 10.0
#: MySQL client errors that mean the server could not be reached (can't connect, gone
#: away, lost during a query): a controller starting meanwhile waits rather than exits.
_UNREACHABLE = frozenset({2003, 2006, 2013})


def _unreachable(exc: DBAPIError) -> bool:
    args: tuple[object, ...] = tuple(getattr(exc.orig, "args", ()))
    return isinstance(exc, OperationalError) and bool(args) and args[0] in _UNREACHABLE


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
        # Which batch (meta's change counter) last wrote each job and node, deleted
        # jobs included: what a standby re-reads (controller/warmstate.py).
        ("job_changes", "job_id BIGINT PRIMARY KEY, seq BIGINT NOT NULL, KEY (seq)"),
        ("node_changes", "name VARCHAR(255) PRIMARY KEY, seq BIGINT NOT NULL, KEY (seq)"),
        (
            "lease",
            "cluster VARCHAR(255) PRIMARY KEY, holder VARCHAR(255) NOT NULL, "
            "token BIGINT NOT NULL, expires DOUBLE NOT NULL",
        ),
    )
)

#: The meta rows of the journal's own, not the store's: the layout, the change
#: counter (bumped by each batch), the counter below which a standby cannot catch
#: up from the change rows (deleted jobs' rows pruned, or batches written without
#: them) and must read everything again, and the lease token of the last batch.
_SCHEMA_KEY, _CHANGE_KEY, _PRUNED_KEY, _TOKEN_KEY = (
    "schema",
    "change",
    "change_pruned",
    "change_token",
)
_OWN_KEYS = f"('{_SCHEMA_KEY}', '{_CHANGE_KEY}', '{_PRUNED_KEY}', '{_TOKEN_KEY}')"
#: Every this many batches, deleted jobs' change rows older than this many batches go.
PRUNE_EVERY = 1000

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
        # A standby's copy of the jobs and nodes (``follow``), handed to ``load``.
        self._warm: WarmCopy | None = None
        self._loaded = False  # then a late ``follow`` (a cancelled poll's thread) reads nothing
        self._warm_lock = threading.Lock()  # ``follow`` runs on worker threads
        wait = 1.0
        while True:
            try:
                with self._engine.begin() as connection:
                    for statement in _SCHEMA:
                        connection.execute(text(statement))
                    self.lease.create(connection)
                    self._check_version(connection)
                    change = f"INSERT IGNORE INTO meta VALUES ('{_CHANGE_KEY}', '0')"
                    connection.execute(text(change))
                return
            except DBAPIError as exc:
                if _unreachable(exc):  # the server away: wait for it, as a standby would
                    log.warning(
                        "%s: state database unreachable (%s); trying again", self.path, exc.orig
                    )
                    time.sleep(wait)
                    wait = min(wait * 2, UNREACHABLE_RETRY_MAX_S)
                    continue
                self._engine.dispose()
                raise JournalError(
                    f"{self.path}: cannot use the state database: {exc.orig}"
                ) from None
            except JournalError:
                self._engine.dispose()
                raise

    def _check_version(self, connection: Connection) -> None:
        """Refuse state written in another layout rather than misread it."""
        row = connection.execute(
            text(f"SELECT value FROM meta WHERE `key` = '{_SCHEMA_KEY}'")
        ).first()
        if row is None:
            connection.execute(
                text(f"INSERT IGNORE INTO meta VALUES ('{_SCHEMA_KEY}', :v)"),
                {"v": str(SCHEMA_VERSION)},
            )
        elif row[0] != str(SCHEMA_VERSION):
            raise JournalError(
                f"{self.path}: state schema {row[0]}, this controller reads {SCHEMA_VERSION}"
            )

    def load(self) -> Loaded:
        """Every table, or ``JournalError`` when the database or a row cannot be read.
        A standby that followed the state (``follow``) catches its copy up instead of
        reading every job again, and gives it away: the store owns it from now on."""
        with self._warm_lock, self._reading(), self._engine.begin() as connection:
            self._loaded = True
            warm, self._warm = self._warm or WarmCopy(), None
            self._catch_up(connection, warm, self.lease.token)
            loaded = self._load_rest(connection, warm)
        return loaded

    def follow(self) -> int:
        """Bring the warm copy up to the database's latest batch (a standby, every
        second: controller/warmstate.py); its change counter now. ``JournalError``
        when the database or a row cannot be read; -1 once the state is loaded."""
        with self._warm_lock, self._reading():
            if self._loaded:
                return -1
            # Kept when a read fails half-way: its ``seq`` is still the last one it
            # had whole, so the next catch-up reads every row changed since again.
            warm = self._warm = self._warm or WarmCopy()
            with self._engine.begin() as connection:
                self._catch_up(connection, warm)
            return warm.seq

    @contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except DBAPIError as exc:
            raise JournalError(f"{self.path}: cannot read the state: {exc.orig}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise JournalError(f"{self.path}: corrupt state ({exc})") from None

    def _catch_up(self, connection: Connection, warm: WarmCopy, taking: int = 0) -> None:
        """``warm`` as of the latest batch, in one snapshot (the transaction's first
        read): the rows changed since its batch, or all of them when it has none, or
        is older than the pruned change rows (a deleted job might be missed).
        ``taking``: the token of the lease just taken; unless the last batch was
        written under the one before it, a holder in between may have written
        without change rows (an older controller): everything is read again."""
        query = text(f"SELECT `key`, value FROM meta WHERE `key` IN {_OWN_KEYS}")
        counters = {str(key): int(value) for key, value in connection.execute(query)}
        now, pruned = counters.get(_CHANGE_KEY, 0), counters.get(_PRUNED_KEY, 0)
        if taking and counters.get(_TOKEN_KEY, 0) != taking - 1:
            warm.seq = -1
        if now == warm.seq:
            return
        if warm.seq < pruned or warm.seq > now:
            warm.seq = -1
        if warm.seq < 0:
            warm.jobs.clear()
            warm.nodes.clear()
            jobs = connection.execute(text("SELECT job_id, record FROM jobs")).all()
            nodes = connection.execute(text("SELECT name, record FROM nodes")).all()
        else:
            jobs = connection.execute(
                text(
                    "SELECT c.job_id, j.record FROM job_changes c "
                    "LEFT JOIN jobs j USING (job_id) WHERE c.seq > :since"
                ),
                {"since": warm.seq},
            ).all()
            nodes = connection.execute(
                text(
                    "SELECT c.name, n.record FROM node_changes c "
                    "LEFT JOIN nodes n USING (name) WHERE c.seq > :since"
                ),
                {"since": warm.seq},
            ).all()
        for job_id, record in jobs:
            if record is None:
                warm.jobs.pop(int(job_id), None)
            else:
                warm.jobs[int(job_id)] = job_from_row(record)
        for name, record in nodes:
            if record is not None:
                warm.nodes[name] = json.loads(record)
        warm.seq = now

    def _load_rest(self, connection: Connection, warm: WarmCopy) -> Loaded:
        def rows(query: str) -> Sequence[Any]:
            return connection.execute(text(query)).all()

        meta = dict(rows(f"SELECT `key`, value FROM meta WHERE `key` NOT IN {_OWN_KEYS}"))
        outbox = {int(seq): bytes(r) for seq, r in rows("SELECT * FROM outbox ORDER BY seq")}
        events = dict(rows("SELECT seq, record FROM event_outbox ORDER BY seq"))
        return Loaded(
            warm.jobs, warm.nodes, meta, outbox, {int(seq): r for seq, r in events.items()}
        )

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
                self._record_changes(connection, batch)
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

    def _record_changes(self, connection: Connection, batch: Batch) -> None:
        """Bump the change counter and say which jobs and nodes this batch wrote, for
        the standbys; now and then drop the change rows of jobs long deleted. The
        lease row, locked by ``check``, keeps two writers from racing on the counter.
        The first batch under a token whose predecessor wrote none (an older
        controller may have, without change rows) makes every standby read all."""
        query = text(f"SELECT `key`, value FROM meta WHERE `key` IN {_OWN_KEYS} FOR UPDATE")
        counters = {str(key): int(value) for key, value in connection.execute(query)}
        seq = counters.get(_CHANGE_KEY, 0) + 1
        token = self.lease.token
        update = {_CHANGE_KEY: seq}
        if counters.get(_TOKEN_KEY, 0) != token:
            update[_TOKEN_KEY] = token
            if counters.get(_TOKEN_KEY, 0) != token - 1:
                update[_PRUNED_KEY] = seq
        if seq % PRUNE_EVERY == 0:
            self._prune(connection, seq - PRUNE_EVERY)
            update[_PRUNED_KEY] = max(
                update.get(_PRUNED_KEY, counters.get(_PRUNED_KEY, 0)), seq - PRUNE_EVERY
            )
        connection.execute(
            text("INSERT INTO meta VALUES (:k, :v) ON DUPLICATE KEY UPDATE value = VALUES(value)"),
            [{"k": key, "v": str(value)} for key, value in update.items()],
        )
        jobs = batch.jobs.keys() | batch.deleted_jobs
        if jobs:
            connection.execute(
                text(
                    "INSERT INTO job_changes VALUES (:k, :s) "
                    "ON DUPLICATE KEY UPDATE seq = VALUES(seq)"
                ),
                [{"k": job_id, "s": seq} for job_id in jobs],
            )
        if batch.nodes:
            connection.execute(
                text(
                    "INSERT INTO node_changes VALUES (:k, :s) "
                    "ON DUPLICATE KEY UPDATE seq = VALUES(seq)"
                ),
                [{"k": name, "s": seq} for name in batch.nodes],
            )

    @staticmethod
    def _prune(connection: Connection, below: int) -> None:
        """Drop the change rows of jobs deleted in batches ``below - PRUNE_EVERY``
        to ``below`` (earlier ones went at earlier prunes); standbys behind ``below``
        read everything again (``_record_changes`` says so in meta)."""
        connection.execute(
            text(
                "DELETE c FROM job_changes c LEFT JOIN jobs j USING (job_id) "
                "WHERE j.job_id IS NULL AND c.seq > :after AND c.seq <= :below"
            ),
            {"after": below - PRUNE_EVERY, "below": below},
        )

    def backup(self) -> None:
        """Nothing to do: the database server's backups keep the copies."""

    def close(self) -> None:
        """Hand the lease back (a standby need not wait out its expiry) and disconnect."""
        try:
            self.lease.release()
        except DBAPIError as exc:
            log.warning("lease: not released (a standby waits for its expiry): %s", exc.orig)
        self._engine.dispose()
