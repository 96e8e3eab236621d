"""The durable record of everything the controller acknowledged.

SQLite in StateSaveLocation, WAL mode with ``synchronous=FULL``: a commit is
on disk before the RPC that caused it is answered, so ``kill -9`` loses
nothing acknowledged. Rows are current values (one per job and node plus a few
counters), not an event log, so a restart is one read of every table.

Writes come in batches from ``JobStore.flush``, which gathers every change made
since the previous flush into one transaction (group commit); the transaction
runs on a worker thread so the event loop keeps serving while SQLite fsyncs.
A write that fails (disk full, I/O error) raises ``JournalWriteError`` with
nothing written; ``controller/durability.py`` puts the batch back and retries.

A journal SQLite cannot read stops the controller at start with one line
naming the file and the last good copy: ``backup`` keeps that copy beside the
journal (``corral-state.db.old``, as slurmctld keeps ``job_state.old``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sqlite3
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, Protocol, TypeVar

from controller.jobstate import JobState, Reason
from controller.model import Job, NodeRuntime, Payload, Step
from corral import errors
from corral.dirsync import replace_durably
from corral.errors import CorralError, SlurmError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (job_id INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS payloads (job_id INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox (seq INTEGER PRIMARY KEY, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS event_outbox (seq INTEGER PRIMARY KEY, record TEXT NOT NULL);
"""

#: Bump when a stored record changes shape; old state is then refused, not misread.
SCHEMA_VERSION = 1


#: The journal's file in StateSaveLocation, and its last consistent copy beside it.
STATE_FILE = "corral-state.db"
COPY_SUFFIX = ".old"


class JournalError(CorralError):
    """The state directory cannot be used (unreadable, or another layout)."""


class JournalWriteError(SlurmError):
    """A batch could not be written (disk full, I/O error); nothing of it is on disk.

    A Slurm error so that the client whose change it held is told in Slurm's
    words, as slurmctld refuses a job whose script it cannot save in a full
    StateSaveLocation; ``reason`` is SQLite's, for the log (not ``detail``, which a
    client prints before the errno's message: Slurm's client says nothing of it).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(errors.ESLURM_WRITING_TO_FILE)
        self.reason = reason


class Fenced(JournalWriteError):
    """Another controller holds the lease under a newer token: this one's write is
    refused (nothing of it written), and it must stop serving."""

    def __init__(self, mine: int, token: int, holder: str) -> None:
        super().__init__(f"lease lost: {holder} holds it under token {token}, ours was {mine}")
        self.token = token


_NODE_KEEP = (
    "state",
    "drain",
    "reason",
    "reason_user",
    "reason_uid",
    "reason_time",
    "reboot",
    "reboot_asap",
    "reboot_next",
    "reboot_time",
    "power",
    "power_time",
    "idle_since",
    "available_features",
    "active_features",
)


#: Derived anew by every backfill pass, or (``deps``) from ``dependency`` when a
#: job is made: never written, so journals stay as they were.
_DERIVED = frozenset({"expected_start", "expected_nodes", "deps"})
_JOB_FIELDS = tuple(f.name for f in fields(Job) if f.name not in _DERIVED)
_JOB_DEFAULTS = {f.name: f.default for f in fields(Job) if f.default is not MISSING}
_JOB_NAMES = frozenset(f.name for f in fields(Job)) - {"deps"}


def job_to_row(job: Job) -> str:
    """JSON of the fields that differ from their defaults (rows stay small and fast)."""
    record = {}
    for name in _JOB_FIELDS:
        value = getattr(job, name)
        if name not in _JOB_DEFAULTS or value != _JOB_DEFAULTS[name]:
            record[name] = value
    record["state"] = job.state.name
    record["reason"] = job.reason.name
    record["flags"] = sorted(job.flags)
    if job.steps:
        record["steps"] = [asdict(step) for step in job.steps]
    return json.dumps(record, separators=(",", ":"))


R = TypeVar("R")


def record_from_row(cls: type[R], row: dict[str, Any]) -> R:
    """A frozen record (a reservation, a trigger) from its ``asdict`` row in the
    journal's JSON: JSON's lists back to the tuples the record holds."""
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in row.items()})


def job_from_row(text: str) -> Job:
    """A job from its row; a field this version no longer has is dropped, not fatal."""
    record: dict[str, Any] = {k: v for k, v in json.loads(text).items() if k in _JOB_NAMES}
    record["state"] = JobState[record["state"]]
    record["reason"] = Reason[record["reason"]]
    record["flags"] = frozenset(record.get("flags", ()))
    tuples = ("partitions", "req_nodes", "exc_nodes", "nodes", "cpus", "alloc_mem", "usage")
    for key in (*tuples, "cpus_used", "gres_alternatives", "node_info_zeros"):
        if key in record:
            record[key] = tuple(record[key])
    for key in ("gpus", "cpu_ids"):
        if key in record:
            record[key] = tuple(tuple(int(i) for i in node) for node in record[key])
    if "gres_alloc" in record:
        record["gres_alloc"] = tuple(
            tuple((str(n), str(t), int(c)) for n, t, c in node) for node in record["gres_alloc"]
        )
    if "steps" in record:
        record["steps"] = tuple(_step(s) for s in record["steps"])
    return Job(**record)


def _step(record: dict[str, Any]) -> Step:
    for key in ("nodes", "tasks", "cpus", "done", "usage", "mem"):
        record[key] = tuple(record.get(key, ()))
    record["gpus"] = tuple(tuple(node) for node in record.get("gpus", ()))
    record["task_ids"] = tuple(tuple(node) for node in record.get("task_ids", ()))
    record["het_jobs"] = tuple(record.get("het_jobs", ()))
    record["het_offset"] = tuple(record.get("het_offset", (0, 0)))
    return Step(**record)


def node_to_row(node: NodeRuntime) -> str:
    """Only the administrator's decisions survive a restart; liveness does not."""
    return json.dumps({k: getattr(node, k) for k in _NODE_KEEP})


def payload_to_row(payload: Payload) -> str:
    record: dict[str, Any] = {
        "script": payload.script,
        "argv": payload.argv,
        "environment": payload.environment,
    }
    if payload.spec:
        record["spec"] = base64.b64encode(payload.spec).decode()
    return json.dumps(record)


def payload_from_row(text: str) -> Payload:
    record = json.loads(text)
    return Payload(
        record["script"],
        tuple(record["argv"]),
        tuple(map(tuple, record["environment"])),
        base64.b64decode(record.get("spec", "")),
    )


@dataclass
class Batch:
    """Changes to write in one transaction."""

    jobs: dict[int, Job] = field(default_factory=dict)
    deleted_jobs: set[int] = field(default_factory=set)
    deleted_payloads: set[int] = field(default_factory=set)  # an array's: when its last task goes
    payloads: dict[int, Payload] = field(default_factory=dict)
    nodes: dict[str, NodeRuntime] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    # Accounting records for corral-dbd (controller/accounting.py): new ones by
    # outbox sequence, and the sequence up to which dbd has them all.
    outbox: dict[int, bytes] = field(default_factory=dict)
    delivered: int = 0
    # Node events for dbd (JSON), the same way.
    events: dict[int, str] = field(default_factory=dict)
    events_delivered: int = 0

    def __bool__(self) -> bool:
        return bool(
            self.jobs
            or self.deleted_jobs
            or self.deleted_payloads
            or self.payloads
            or self.nodes
            or self.meta
            or self.outbox
            or self.delivered
            or self.events
            or self.events_delivered
        )


@dataclass
class Loaded:
    jobs: dict[int, Job]
    nodes: dict[str, dict[str, Any]]
    meta: dict[str, str]
    outbox: dict[int, bytes]
    events: dict[int, str]


class StateJournal(Protocol):
    """What the store and ``durability`` need of a journal, whichever backend
    StateStorageType selects: ``Journal`` (SQLite on local disk) or
    ``controller.dbjournal.DatabaseJournal`` (MariaDB/MySQL, docs/ha.md). Both keep
    the same tables and records, and fail a write the same way."""

    #: Where the state is, for log lines and errors (never a password).
    path: str

    def load(self) -> Loaded: ...
    def payload(self, job_id: int) -> Payload | None: ...
    def write(self, batch: Batch) -> None: ...
    def backup(self) -> None: ...
    def close(self) -> None: ...


class Journal:
    """One SQLite database; used from one thread at a time."""

    def __init__(self, directory: str) -> None:
        # The directory holds the clients' socket too, so it must be reachable by
        # everyone; the database itself is private to the controller.
        os.makedirs(directory, mode=0o755, exist_ok=True)
        self.path = os.path.join(directory, STATE_FILE)
        self.copy_path = self.path + COPY_SUFFIX
        with open(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600), "rb"):
            pass
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._check_intact()
            self._db.executescript(_SCHEMA)
            self._check_version()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise self.unreadable(exc) from None

    def _check_intact(self) -> None:
        """SQLite's quick check of every page: a damaged journal is refused at start,
        not found half-way through a restart (milliseconds for a live queue)."""
        problem = self._db.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise sqlite3.DatabaseError(problem)

    def unreadable(self, exc: Exception) -> JournalError:
        """The one-line reason to stop: the file, what is wrong, and the copy to use."""
        return JournalError(f"{self.path}: corrupt state ({exc}); {last_good_copy(self.copy_path)}")

    def _check_version(self) -> None:
        """Refuse state written in another layout rather than misread it."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None:
            if self._db.execute("SELECT 1 FROM jobs LIMIT 1").fetchone() is not None:
                raise JournalError(f"{self.path}: state from an older Corral (no schema version)")
            self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        elif row[0] != str(SCHEMA_VERSION):
            raise JournalError(
                f"{self.path}: state schema {row[0]}, this controller reads {SCHEMA_VERSION}"
            )

    def load(self) -> Loaded:
        """Every table, or ``JournalError`` when a row cannot be read back."""
        try:
            return self._load()
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as exc:
            raise self.unreadable(exc) from None

    def _load(self) -> Loaded:
        jobs = {
            jid: job_from_row(text)
            for jid, text in self._db.execute("SELECT job_id, record FROM jobs")
        }
        nodes = {
            name: json.loads(text)
            for name, text in self._db.execute("SELECT name, record FROM nodes")
        }
        meta = dict(self._db.execute("SELECT key, value FROM meta WHERE key != 'schema'"))
        outbox = dict(self._db.execute("SELECT seq, record FROM outbox ORDER BY seq"))
        events = dict(self._db.execute("SELECT seq, record FROM event_outbox ORDER BY seq"))
        return Loaded(jobs, nodes, meta, outbox, events)

    def payload(self, job_id: int) -> Payload | None:
        row = self._db.execute("SELECT record FROM payloads WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            return None
        return payload_from_row(row[0])

    def write(self, batch: Batch) -> None:
        """Commit ``batch`` durably (fsync), or raise ``JournalWriteError`` with
        nothing of it written."""
        try:
            self._write(batch)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
            raise  # a bug in the batch, not the disk: retrying it would not help
        except (sqlite3.DatabaseError, OSError) as exc:
            raise JournalWriteError(str(exc)) from exc

    def _write(self, batch: Batch) -> None:
        db = self._db
        db.execute("BEGIN")
        try:
            if batch.jobs:
                db.executemany(
                    "INSERT OR REPLACE INTO jobs VALUES (?, ?)",
                    [(jid, job_to_row(job)) for jid, job in batch.jobs.items()],
                )
            if batch.payloads:
                db.executemany(
                    "INSERT OR REPLACE INTO payloads VALUES (?, ?)",
                    [(jid, payload_to_row(p)) for jid, p in batch.payloads.items()],
                )
            if batch.deleted_jobs:
                gone = [(jid,) for jid in batch.deleted_jobs]
                db.executemany("DELETE FROM jobs WHERE job_id = ?", gone)
            if batch.deleted_payloads:
                gone = [(key,) for key in batch.deleted_payloads]
                db.executemany("DELETE FROM payloads WHERE job_id = ?", gone)
            if batch.nodes:
                db.executemany(
                    "INSERT OR REPLACE INTO nodes VALUES (?, ?)",
                    [(name, node_to_row(node)) for name, node in batch.nodes.items()],
                )
            if batch.meta:
                db.executemany(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)", list(batch.meta.items())
                )
            if batch.outbox:
                db.executemany("INSERT INTO outbox VALUES (?, ?)", list(batch.outbox.items()))
            if batch.delivered:
                db.execute("DELETE FROM outbox WHERE seq <= ?", (batch.delivered,))
            if batch.events:
                db.executemany("INSERT INTO event_outbox VALUES (?, ?)", list(batch.events.items()))
            if batch.events_delivered:
                db.execute("DELETE FROM event_outbox WHERE seq <= ?", (batch.events_delivered,))
            db.execute("COMMIT")
        except BaseException:
            # SQLite has already rolled back after SQLITE_FULL and some I/O errors;
            # a second ROLLBACK would hide the reason behind "no transaction is active".
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    def backup(self) -> None:
        """Write a consistent copy of the journal to ``copy_path``, atomically.

        SQLite's online backup reads one snapshot of the database; the copy is
        made under a temporary name, fsync'ed, renamed over the previous copy and
        the directory fsync'ed, so ``copy_path`` is always a whole, good copy.
        Raises ``OSError`` or ``sqlite3.Error`` (the previous copy stays).
        """
        tmp = self.copy_path + ".tmp"
        with open(os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600), "wb"):
            pass
        try:
            copy = sqlite3.connect(tmp, isolation_level=None)
            try:
                self._db.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            finally:
                copy.close()
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            replace_durably(tmp, self.copy_path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def close(self) -> None:
        self._db.close()


def last_good_copy(copy_path: str) -> str:
    """What a corrupt journal's message says of its copy: where it is, when it was
    made and how to start from it if SQLite reads it whole, else that there is none.
    The journal's -wal and -shm files go too: SQLite would replay a stale WAL onto
    the copy."""
    try:
        made = os.stat(copy_path).st_mtime
        copy = sqlite3.connect(f"file:{copy_path}?mode=ro", uri=True)
        try:
            intact = copy.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok"
        finally:
            copy.close()
    except (OSError, sqlite3.Error):
        intact = False
    if not intact:
        return "no good copy to start from"
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(made))
    state = copy_path.removesuffix(COPY_SUFFIX)
    return (
        f"last good copy: {copy_path} (from {when}); to start from it, remove "
        f"{state}-wal and {state}-shm and move the copy to {state}"
    )
