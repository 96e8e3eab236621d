"""scrontab in the controller: each user's crontab, its jobs, and their recurrence.

As in Slurm, a crontab is durable controller state (the journal's meta row
``crontabs``): the file as its user wrote it, the job each entry became with the
lines it spans, and the lines ``scancel`` disabled. Each entry is one job for
good: held with Reason=BeginTime until its next time, run as its user, and when
it ends requeued under the same job id for the time after (``recur``, called by
``JobStore.post`` as the run ends). ``scancel`` of a cron job disables its entry
(``disable``: ``scrontab -l`` shows its lines as ``#DISABLED:``) so that it ends
for good. A new crontab, or ``scrontab -r``, cancels the pending jobs of the old
one; those running finish their run and do not recur (scrontab(1)).

Gated, as in Slurm, by ``ScronParameters=enable`` in slurm.conf (``enabled``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from controller import jobstate
from controller.admission import admit
from controller.jobspec import JobSpec
from controller.jobstate import JobState
from controller.model import Job
from controller.principal import Principal
from corral import arrayspec, errors
from corral.config import SlurmConfig
from corral.crontab import CronError, parse_times
from corral.errors import SlurmError

if TYPE_CHECKING:
    from controller.store import JobStore

log = logging.getLogger(__name__)

#: The journal's meta key the crontabs are kept under (JSON, ``CronBook.to_json``).
CRONTABS_KEY = "crontabs"


def enabled(conf: SlurmConfig) -> bool:
    """``ScronParameters=enable`` (Slurm looks for the word anywhere in the value)."""
    return "enable" in dict(conf.settings).get("ScronParameters", "").lower()


@dataclass(frozen=True, slots=True)
class Crontab:
    """One user's crontab: the text, ``(job id, first line, last line)`` of each
    entry (lines from 1), and the lines scancel disabled."""

    text: str
    jobs: tuple[tuple[int, int, int], ...] = ()
    disabled: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class NewEntry:
    """An entry of a crontab being installed: its job, its times as written, its lines."""

    spec: JobSpec
    times: str
    line_start: int
    line_end: int


class EntryRefused(SlurmError):
    """An entry's job was refused; ``lines`` (``3-5``) are the entry's, as Slurm's
    reply names them for the client to mark ``#BAD:``."""

    def __init__(self, lines: str, cause: SlurmError) -> None:
        super().__init__(cause.code, cause.message)
        self.lines = lines


class CronBook:
    """Every user's crontab by uid."""

    def __init__(self, tabs: dict[int, Crontab] | None = None) -> None:
        self.tabs: dict[int, Crontab] = tabs or {}

    def to_json(self) -> str:
        return json.dumps(
            {
                str(uid): {"text": t.text, "jobs": t.jobs, "disabled": sorted(t.disabled)}
                for uid, t in self.tabs.items()
            }
        )

    @classmethod
    def from_json(cls, text: str) -> CronBook:
        return cls(
            {
                int(uid): Crontab(
                    tab["text"],
                    tuple((int(j), int(a), int(b)) for j, a, b in tab["jobs"]),
                    frozenset(int(n) for n in tab["disabled"]),
                )
                for uid, tab in json.loads(text).items()
            }
        )

    def entry_of(self, job: Job) -> tuple[int, int] | None:
        """The lines of the live entry ``job`` is, or None (not one, or disabled)."""
        tab = self.tabs.get(job.uid)
        if tab is None:
            return None
        for job_id, first, last in tab.jobs:
            if job_id == job.job_id and first not in tab.disabled:
                return first, last
        return None

    def disabled_lines(self, uid: int) -> str:
        """The disabled lines as Slurm sends them (``3-4,9``)."""
        tab = self.tabs.get(uid)
        return arrayspec.compress(sorted(tab.disabled)) if tab else ""


def install(
    store: JobStore, owner: Principal, text: str, entries: list[NewEntry], now: int
) -> list[int]:
    """Make ``text`` ``owner``'s crontab: the old one's pending jobs cancelled, a job
    per entry held until its next time. A refused entry (``EntryRefused``) leaves the
    old crontab in place: every entry is admitted in a dry run first, so that no job
    is made unless all can be; one the store refuses after that (an accounting limit)
    cancels those made before it, as Slurm purges them."""
    specs = [_checked(store, owner, entry, now) for entry in entries]
    made: list[Job] = []
    try:
        for entry, spec in zip(entries, specs, strict=True):
            made.append(_submit(store, owner, entry, spec, now))
    except EntryRefused:
        for job in made:
            store.post(job.job_id, jobstate.Cancel(now, owner.uid))
        raise
    _drop(store, owner.uid, now)
    jobs = tuple((j.job_id, e.line_start, e.line_end) for j, e in zip(made, entries, strict=True))
    store.crontabs.tabs[owner.uid] = Crontab(text, jobs)
    _keep(store)
    log.info("crontab of uid=%d installed: %d entries", owner.uid, len(made))
    return [job.job_id for job in made]


def _checked(store: JobStore, owner: Principal, entry: NewEntry, now: int) -> JobSpec:
    """The entry's job, due at its next time, as admission would take it."""
    try:
        times = parse_times(entry.times)
        if entry.spec.array:  # one job id recurs: an array's tasks would not
            raise SlurmError(errors.ESLURM_INVALID_ARRAY)
        spec = replace(entry.spec, begin_time=times.next_after(now))
        conf, states, capacity = store.conf, store.partition_state, store.capacity
        admit(spec, owner, conf, states, store.next_job_id, now, 0, capacity)
    except CronError as exc:
        raise _refused(entry, SlurmError(errors.EINVAL, str(exc))) from None
    except SlurmError as exc:
        raise _refused(entry, exc) from None
    return spec


def _submit(store: JobStore, owner: Principal, entry: NewEntry, spec: JobSpec, now: int) -> Job:
    try:
        admitted = store.submit(spec, owner, now)
    except SlurmError as exc:
        raise _refused(entry, exc) from None
    job = replace(admitted.job, cron_spec=parse_times(entry.times).text())
    store.update(job)
    return job


def _refused(entry: NewEntry, cause: SlurmError) -> EntryRefused:
    return EntryRefused(f"{entry.line_start}-{entry.line_end}", cause)


def remove(store: JobStore, uid: int, now: int) -> None:
    """``scrontab -r``: the crontab forgotten, its pending jobs cancelled."""
    _drop(store, uid, now)
    _keep(store)


def _drop(store: JobStore, uid: int, now: int) -> None:
    old = store.crontabs.tabs.pop(uid, None)
    for job_id, _, _ in old.jobs if old else ():
        job = store.jobs.get(job_id)
        if job is not None and job.state is JobState.PENDING:
            store.post(job_id, jobstate.Cancel(now, uid))


def disable(store: JobStore, job: Job) -> None:
    """scancel of a cron job: its entry's lines disabled, so that it does not recur."""
    lines = store.crontabs.entry_of(job)
    tab = store.crontabs.tabs.get(job.uid)
    if lines is None or tab is None:
        return
    first, last = lines
    store.crontabs.tabs[job.uid] = replace(
        tab, disabled=tab.disabled | frozenset(range(first, last + 1))
    )
    _keep(store)
    log.info("job_id=%d cancelled: its crontab lines %d-%d disabled", job.job_id, first, last)


def recur(store: JobStore, job: Job, now: int) -> None:
    """A cron job's run ended: back to PENDING under its id, held until its next time."""
    if store.crontabs.entry_of(job) is None:
        return
    due = parse_times(job.cron_spec).next_after(now)
    requeued = store.post(job.job_id, jobstate.Requeue(now))
    store.update(replace(requeued, begin_time=due, eligible_time=due))
    log.info("job_id=%d cron job requeued for %d", job.job_id, due)


def _keep(store: JobStore) -> None:
    store.durable.keep(CRONTABS_KEY, store.crontabs.to_json())
