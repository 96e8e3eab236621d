"""Durability: what the store's changes become on disk and on their way out.

The store (``controller/store.py``) owns the live maps and tells this module
each value it changes; this module alone decides what that costs: the next
journal batch (group commit, ``flush``), a record in the accounting outbox
when a job changes in what dbd keeps, a node or reservation event in the
second outbox, and jobcomp/filetxt's line when a job ends. Keeping them here
leaves the store one job (the ledger) and gives every durable side effect
one place, beside the commit that makes it durable.

Both outboxes hold only committed records: a change joins them when its batch
is on disk, so dbd never learns of a change a crash could still undo.

A batch that cannot be written (disk full, I/O error) is put back under the
changes made since, with its effects, and retried with backoff until a write
succeeds; its waiters get ``JournalWriteError``. A write refused because another
controller took the leader lease (``Fenced``, docs/ha.md) is not retried: the
controller stops serving. While the journal cannot be
written ``failure`` says why: the service refuses changes before making them,
and the agents' results wait in memory (their acknowledgement with them).
Every ``BACKUP_EVERY_S`` a successful commit is followed by a consistent copy
of the journal (``Journal.backup``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from controller import jobcomp
from controller.effects import Effect
from controller.journal import Batch, Fenced, JournalWriteError, Loaded, StateJournal
from controller.model import Job, NodeRuntime, Payload
from controller.reservations import Reservation
from corral import hostlist
from corral.config import SlurmConfig

log = logging.getLogger("corral.controller")

#: A journal commit that took longer than this sends the next one to the writer thread.
INLINE_COMMIT_S = 0.002
#: A failed write is retried after this, doubling up to RETRY_MOST_S between tries.
RETRY_FIRST_S = 0.5
RETRY_MOST_S = 8.0
#: How often the journal's consistent copy is renewed (after a commit, never while failing).
BACKUP_EVERY_S = 300.0

#: What accounting records of a job: a change to one of these sends dbd a new record.
_ACCOUNTED = (
    "state",
    "held",
    "submit_time",
    "eligible_time",
    "start_time",
    "end_time",
    "partition",
    "nodes",
    "cpus",
    "exit_status",
    "restarts",
    "time_limit",
    "name",
    "account",
    "qos",
    "array_pending",
    "array_task_id",
    "comment",
    "work_dir",
    "std_out",
    "std_err",
    "reservation",
    "steps",
)
OUTBOX_SEQ_KEY = "outbox_seq"
EVENT_SEQ_KEY = "event_seq"


def accounting_changed(old: Job | None, new: Job) -> bool:
    """Whether ``new`` differs from ``old`` in what accounting records."""
    return old is None or any(getattr(old, f) != getattr(new, f) for f in _ACCOUNTED)


def _drop_through(outbox: dict[int, bytes] | dict[int, str], seq: int) -> None:
    """Forget an outbox's records up to ``seq``: its oldest, since it is in sequence order."""
    while outbox and (first := next(iter(outbox))) <= seq:
        del outbox[first]


def put_back(failed: Batch, newer: Batch) -> Batch:
    """One batch holding ``failed`` under ``newer``: what writing both in turn would do.

    A value ``newer`` sets wins; deletions are kept from both (a purged job is
    never made again, so a deletion never hides a later row); outbox records keep
    their sequences, which the two batches never share.
    """
    merged = Batch(
        jobs={**failed.jobs, **newer.jobs},
        deleted_jobs=failed.deleted_jobs | newer.deleted_jobs,
        deleted_payloads=failed.deleted_payloads | newer.deleted_payloads,
        payloads={**failed.payloads, **newer.payloads},
        nodes={**failed.nodes, **newer.nodes},
        meta={**failed.meta, **newer.meta},
        outbox={**failed.outbox, **newer.outbox},
        delivered=max(failed.delivered, newer.delivered),
        events={**failed.events, **newer.events},
        events_delivered=max(failed.events_delivered, newer.events_delivered),
    )
    for job_id in merged.deleted_jobs:
        merged.jobs.pop(job_id, None)
    return merged


def event_state(node: NodeRuntime) -> str:
    """What sacctmgr show event calls a node that is out of service ("" when it is not)."""
    down = node.state == "DOWN"
    if down and node.drain:
        return "DOWN+DRAIN"
    return "DOWN" if down else "DRAIN" if node.drain else ""


class Durability:
    """The journal batch in the making, group commit, and the two outboxes to dbd."""

    def __init__(self, conf: SlurmConfig, journal: StateJournal) -> None:
        self.conf = conf  # the store's: jobcomp's settings and the cluster's name
        self.journal = journal
        self.batch = Batch()
        self._batch_seq = 1
        self._committed_seq = 0
        self._lock = asyncio.Lock()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._in_flight: Batch | None = None
        self._commit_s = 0.0  # how long the last journal commit took
        # Accounting (controller/accounting.py sets ``recorder`` when it is on):
        # records committed but not yet delivered to dbd, by outbox sequence.
        self.recorder: Callable[[Job], bytes] | None = None
        self.outbox: dict[int, bytes] = {}
        self.outbox_ready = asyncio.Event()
        self._outbox_seq = 0
        self._outbox_of_job: dict[int, int] = {}  # this batch's record of a job
        self.event_outbox: dict[int, str] = {}  # node events (JSON), the same way
        self._event_seq = 0
        # What the agents must hear once this batch is on disk (controller/effects.py),
        # and who tells them (``AgentLink.dispatch``; none in a store without agents).
        self.effects: list[Effect] = []
        self.dispatch: Callable[[Sequence[Effect]], None] | None = None
        # Called when a write finds another controller holding the lease (docs/ha.md).
        self.lost: Callable[[], None] | None = None
        # Why the journal cannot be written now (None: it can), and what waits for it.
        self.failure: str | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._retrying: asyncio.Task[None] | None = None
        self._backed_up = 0.0  # monotonic time of the last copy; 0: none since start
        self._backing_up: asyncio.Task[None] | None = None

    def restore(self, loaded: Loaded) -> None:
        """Take back the outboxes a restart found in the journal."""
        self.outbox = loaded.outbox
        self._outbox_seq = max(int(loaded.meta.get(OUTBOX_SEQ_KEY, 0)), max(self.outbox, default=0))
        self.event_outbox = loaded.events
        self._event_seq = max(
            int(loaded.meta.get(EVENT_SEQ_KEY, 0)), max(self.event_outbox, default=0)
        )
        if self.outbox or self.event_outbox:
            self.outbox_ready.set()

    # ------------------------------------------------------------ changes

    def job(self, old: Job | None, job: Job) -> None:
        """``job`` replaces ``old`` (None: it is new) in the store."""
        if self.recorder is not None and accounting_changed(old, job):
            self._record(job)
        ended = job.state.finished and (old is None or not old.state.finished)
        if ended and self.conf.accounting.jobcomp == "filetxt":
            line = jobcomp.line(job, self.conf.cluster_name)
            jobcomp.append(self.conf.accounting.jobcomp_loc, line)
        self.batch.jobs[job.job_id] = job

    def _record(self, job: Job) -> None:
        """Queue ``job``'s accounting record (replacing one this batch already has)."""
        assert self.recorder is not None
        earlier = self._outbox_of_job.get(job.job_id)
        if earlier is not None:
            del self.batch.outbox[earlier]
        self._outbox_seq += 1
        self.batch.outbox[self._outbox_seq] = self.recorder(job)
        self.batch.meta[OUTBOX_SEQ_KEY] = str(self._outbox_seq)
        self._outbox_of_job[job.job_id] = self._outbox_seq

    def closed_record(self, job: Job) -> None:
        """The last accounting record of ``job`` at a size it no longer has (a resize:
        ``RESIZING``, docs/design.md "Elastic jobs"), or of a run a requeue ended. dbd
        files it under the key of that size or run, apart from the record of the job
        as it is now, so it is queued beside the job's current record rather than
        replacing it."""
        if self.recorder is None:
            return
        self._outbox_seq += 1
        self.batch.outbox[self._outbox_seq] = self.recorder(job)
        self.batch.meta[OUTBOX_SEQ_KEY] = str(self._outbox_seq)

    def forget_jobs(self, job_ids: list[int], payloads: set[int]) -> None:
        """Purged jobs (and the payloads no job left needs) leave the journal."""
        for job_id in job_ids:
            self.batch.jobs.pop(job_id, None)
            self.batch.deleted_jobs.add(job_id)
        self.batch.deleted_payloads.update(payloads)

    def add_payload(self, key: int, payload: Payload) -> None:
        self.batch.payloads[key] = payload

    def payload(self, key: int) -> Payload | None:
        """A job's script and environment: from a batch not yet on disk, else the journal."""
        for batch in (self.batch, self._in_flight):
            if batch is not None and key in batch.payloads:
                return batch.payloads[key]
        return self.journal.payload(key)

    def keep(self, key: str, value: str) -> None:
        """A journal meta value (counters, associations, reservations, usage)."""
        self.batch.meta[key] = value

    def node(self, old: NodeRuntime | None, new: NodeRuntime, cpus: int) -> None:
        """``new`` replaces ``old`` in the store; ``cpus``: its configured count."""
        if self.recorder is not None and old is not None:
            self._node_events(old, new, cpus)
        self.batch.nodes[new.name] = new

    def _node_events(self, old: NodeRuntime, new: NodeRuntime, cpus: int) -> None:
        """Accounting's node events: one starts as a node goes down or is drained
        (or its reason changes), and ends as it comes back."""
        was, now = event_state(old), event_state(new)
        if was == now and (not now or old.reason_time == new.reason_time):
            return
        stamp = int(time.time())
        if was:
            self._event(old, was, old.reason_time or stamp, stamp, cpus)
        if now:
            self._event(new, now, new.reason_time or stamp, 0, cpus)

    def _event(self, node: NodeRuntime, state: str, start: int, end: int, cpus: int) -> None:
        self._event_seq += 1
        self.batch.events[self._event_seq] = json.dumps(
            {
                "node": node.name,
                "start": start,
                "end": end,
                "state": state,
                "reason": node.reason,
                "reason_uid": node.reason_uid,
                "cpus": cpus,
            }
        )
        self.batch.meta[EVENT_SEQ_KEY] = str(self._event_seq)

    def reservation(self, resv: Reservation, *, deleted: bool, now: int) -> None:
        """dbd's record of a reservation made, changed, deleted or ended."""
        if self.recorder is None:
            return
        self._event_seq += 1
        info = {
            "name": resv.name,
            "id": resv.id,
            "nodes": hostlist.compress(resv.nodes),
            "node_count": len(resv.nodes),
            "core_count": resv.cores,
            "start": resv.start,
            "end": min(resv.end, now) if deleted else resv.end,
            "flags": ",".join(resv.flags),
            "users": ",".join(resv.users),
            "accounts": ",".join(resv.accounts),
            "partition": resv.partition,
            "tres": f"cpu={resv.cores}",
            "deleted": deleted,
        }
        self.batch.events[self._event_seq] = json.dumps({"reservation": info})
        self.batch.meta[EVENT_SEQ_KEY] = str(self._event_seq)

    # ------------------------------------------------------------ delivery

    def delivered(self, seq: int) -> None:
        """dbd holds every record up to ``seq``: drop them (from disk at the next flush)."""
        _drop_through(self.outbox, seq)
        self.batch.delivered = max(self.batch.delivered, seq)

    def events_delivered(self, seq: int) -> None:
        """dbd holds every node event up to ``seq``."""
        _drop_through(self.event_outbox, seq)
        self.batch.events_delivered = max(self.batch.events_delivered, seq)

    def emit(self, effects: Iterable[Effect]) -> None:
        """Queue ``effects`` for dispatch after the next commit."""
        self.effects.extend(effects)

    async def flush(self, *, inline: bool = False) -> None:
        """Return once every change made before the call is on disk, then dispatch
        the effects of those changes (never before: an agent must not act on what the
        journal could still lose). Raise ``JournalWriteError`` if the write failed:
        the batch and its effects are then back in the next one, retried in the
        background, and nothing of it has been acknowledged or dispatched.

        Commits normally run in the writer thread, so that the loop admits
        other requests meanwhile and they share the next commit (group
        commit). A caller that knows nothing else is waiting (``inline``) gets
        the commit on the loop instead when the disk is fast: the hand-off to
        the thread and back costs more than the fsync itself. Once a commit
        has taken longer than ``INLINE_COMMIT_S`` (a slow or busy disk), every
        commit goes to the thread until one is fast again.
        """
        target = self._batch_seq
        if self._committed_seq >= target:
            return
        async with self._lock:
            if self._committed_seq >= target:
                return
            batch, self.batch = self.batch, Batch()
            effects, self.effects = self.effects, []
            self._outbox_of_job = {}
            self._batch_seq += 1
            if batch:
                try:
                    await self._write(batch, inline=inline)
                except JournalWriteError as exc:
                    self.batch = put_back(batch, self.batch)
                    self.effects = effects + self.effects
                    if isinstance(exc, Fenced):
                        self._fenced(exc)
                    else:
                        self._failed(exc)
                    raise
                if batch.outbox or batch.events:  # on disk now: dbd may have them
                    self.outbox.update(batch.outbox)
                    self.event_outbox.update(batch.events)
                    self.outbox_ready.set()
                self._written()
            self._committed_seq = target
            if effects and self.dispatch is not None:
                self.dispatch(effects)

    async def _write(self, batch: Batch, *, inline: bool) -> None:
        self._in_flight = batch
        try:
            began = time.perf_counter()
            if inline and self._commit_s < INLINE_COMMIT_S:
                self.journal.write(batch)
            else:
                await asyncio.get_running_loop().run_in_executor(
                    self._writer, self.journal.write, batch
                )
            self._commit_s = time.perf_counter() - began
        finally:
            self._in_flight = None

    async def kept(self) -> None:
        """Return once every change made before the call is on disk, however long
        the disk refuses: for what must be acknowledged in the end (an agent's
        result), never for a client waiting on its reply."""
        target = self._batch_seq
        while self._committed_seq < target:
            try:
                await self.flush()
            except JournalWriteError:
                await self._writable.wait()

    def _fenced(self, exc: Fenced) -> None:
        """Another controller took the lease: refuse changes for good (no retry can
        succeed) and tell the controller to stop serving (``lost``)."""
        if self.failure is None:
            log.error(
                "journal: %s: %s; this controller stops serving", self.journal.path, exc.reason
            )
        self.failure = exc.reason
        self._writable.clear()
        if self.lost is not None:
            self.lost()

    def _failed(self, exc: JournalWriteError) -> None:
        """Enter (or stay in) the failing state, with a retry under way."""
        if self.failure is None:
            log.error(
                "journal: cannot write %s: %s; refusing changes until it can",
                self.journal.path,
                exc.reason,
            )
        self.failure = exc.reason
        self._writable.clear()
        if self._retrying is None:
            self._retrying = asyncio.create_task(self._retry())

    async def _retry(self) -> None:
        """Write the put-back batch again, waiting longer after each failure."""
        wait = RETRY_FIRST_S
        try:
            while self.failure is not None:
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MOST_S)
                try:
                    await self.flush()
                except JournalWriteError:
                    continue
                self._written()  # nothing left to write also ends the failure
        finally:
            self._retrying = None

    def _written(self) -> None:
        """A commit succeeded: leave the failing state, and renew the copy when due."""
        if self.failure is not None:
            log.info("journal: %s written again; accepting changes", self.journal.path)
            self.failure = None
            self._writable.set()
        due = not self._backed_up or time.monotonic() - self._backed_up >= BACKUP_EVERY_S
        if due and self._backing_up is None:
            self._backed_up = time.monotonic()
            self._backing_up = asyncio.create_task(self.backup())

    async def backup(self) -> None:
        """Renew the journal's consistent copy in the writer thread, between commits
        (the lock): a failure is logged, and the previous copy stays."""
        try:
            async with self._lock:
                await asyncio.get_running_loop().run_in_executor(self._writer, self.journal.backup)
        except (OSError, sqlite3.Error) as exc:
            log.warning("journal: copy of %s not renewed: %s", self.journal.path, exc)
        finally:
            self._backing_up = None
