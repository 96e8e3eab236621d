"""The durable record of everything the controller acknowledged.

SQLite in StateSaveLocation, WAL mode with ``synchronous=FULL``: a commit is
on disk before the RPC that caused it is answered, so ``kill -9`` loses
nothing acknowledged. Rows are current values (one per job and node plus a few
counters), not an event log, so a restart is one read of every table.

Writes come in batches from ``JobStore.flush``, which gathers every change made
since the previous flush into one transaction (group commit); the transaction
runs on a worker thread so the event loop keeps serving while SQLite fsyncs.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from controller.jobstate import JobState, Reason
from controller.model import Job, NodeRuntime, Payload, Step
from corral.errors import CorralError

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


class JournalError(CorralError):
    """The state directory cannot be used (unreadable, or another layout)."""


_NODE_KEEP = ("state", "drain", "reason", "reason_user", "reason_uid", "reason_time")


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


def job_from_row(text: str) -> Job:
    """A job from its row; a field this version no longer has is dropped, not fatal."""
    record: dict[str, Any] = {k: v for k, v in json.loads(text).items() if k in _JOB_NAMES}
    record["state"] = JobState[record["state"]]
    record["reason"] = Reason[record["reason"]]
    record["flags"] = frozenset(record.get("flags", ()))
    for key in ("partitions", "req_nodes", "exc_nodes", "nodes", "cpus", "alloc_mem", "usage"):
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
    for key in ("nodes", "tasks", "cpus", "done", "usage"):
        record[key] = tuple(record.get(key, ()))
    record["gpus"] = tuple(tuple(node) for node in record.get("gpus", ()))
    return Step(**record)


def node_to_row(node: NodeRuntime) -> str:
    """Only the administrator's decisions survive a restart; liveness does not."""
    return json.dumps({k: getattr(node, k) for k in _NODE_KEEP})


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


class Journal:
    """One SQLite database; used from one thread at a time."""

    def __init__(self, directory: str) -> None:
        # The directory holds the clients' socket too, so it must be reachable by
        # everyone; the database itself is private to the controller.
        os.makedirs(directory, mode=0o755, exist_ok=True)
        self.path = os.path.join(directory, "corral-state.db")
        with open(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600), "rb"):
            pass
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._check_version()

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
        record = json.loads(row[0])
        return Payload(
            record["script"], tuple(record["argv"]), tuple(map(tuple, record["environment"]))
        )

    def write(self, batch: Batch) -> None:
        """Commit ``batch`` durably (fsync) or raise."""
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
                    [
                        (
                            jid,
                            json.dumps(
                                {"script": p.script, "argv": p.argv, "environment": p.environment}
                            ),
                        )
                        for jid, p in batch.payloads.items()
                    ],
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
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._db.close()
