"""Which jobs a JobFilter selects (squeue, scancel, scontrol)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.jobstate import COMPLETING, JobState
from controller.model import Job
from controller.principal import uid_for
from corral import arrayspec, errors
from corral.errors import SlurmError

_ACTIVE = frozenset({JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED})
_ID = re.compile(r"^(\d+)(?:_(\*|\d+|\[[0-9,\-%]+\]))?$")
_HET_ID = re.compile(r"^(\d+)\+(\d+)$")
_COMPACT = {s.value: s for s in JobState}


@dataclass(frozen=True, slots=True)
class IdSelector:
    """One job id as typed: ``123``, ``123_4``, ``123_[1-3]``, ``123_*`` or a
    heterogeneous job's component ``123+1``."""

    text: str
    job_id: int
    tasks: frozenset[int] | None  # None = the job or the whole array
    het_offset: int | None = None  # ``123+1``: that component alone

    def matches(self, job: Job) -> bool:
        if self.het_offset is not None:
            return job.het_job_id == self.job_id and job.het_job_offset == self.het_offset
        if self.tasks is None:
            return self.job_id in (job.job_id, job.array_job_id, job.het_job_id)
        if job.array_job_id != self.job_id:
            return False
        if job.array_pending:
            return bool(arrayspec.intersection(job.array_pending, self.tasks))
        return job.array_task_id in self.tasks


def named_tasks(array: Job, flt: Mapping[str, Any]) -> list[int] | None:
    """Which of an array record's pending tasks the filter's ids name; None for all."""
    tasks: set[int] = set()
    for text in flt.get("job_ids", []):
        selector = parse_id(text)
        if not selector.matches(array):
            continue
        if selector.tasks is None:
            return None
        tasks.update(arrayspec.intersection(array.array_pending, selector.tasks))
    return sorted(tasks) if flt.get("job_ids") else None


def parse_id(text: str) -> IdSelector:
    het = _HET_ID.match(text.strip())
    if het:
        return IdSelector(text, int(het[1]), None, int(het[2]))
    match = _ID.match(text.strip())
    if not match:
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    job_id = int(match[1])
    task = match[2]
    if task is None or task == "*":
        return IdSelector(text, job_id, None)
    if task.isdigit():
        return IdSelector(text, job_id, frozenset({int(task)}))
    tasks: set[int] = set()
    for part in task.strip("[]").split("%", 1)[0].split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
        tasks.update(range(int(lo), int(hi or lo) + 1))
    return IdSelector(text, job_id, frozenset(tasks))


def _state_names(states: Iterable[str]) -> set[JobState] | None:
    wanted: set[JobState] = set()
    for raw in states:
        name = raw.strip().upper()
        if name == "ALL":
            return None
        if name in JobState.__members__:
            wanted.add(JobState[name])
        elif name in _COMPACT:
            wanted.add(_COMPACT[name])
        elif name in ("COMPLETING", "CG"):
            wanted.add(JobState.RUNNING)
        else:
            raise SlurmError(errors.ESLURM_INVALID_JOB_STATE)
    return wanted


def _in(job: Job, wanted: set[JobState] | frozenset[JobState]) -> bool:
    return job.state in wanted or (COMPLETING in job.flags and JobState.RUNNING in wanted)


def in_states(jobs: Iterable[Job], states: Iterable[str]) -> list[Job]:
    """The ``jobs`` in one of ``states`` (names, abbreviations or ``ALL``).

    Apart from ``select`` so that the Jobs RPC can first tell whether named ids exist
    at all (Slurm's "Invalid job id specified") and then filter them by state: squeue
    asks for its default states even for ids, and prints nothing for a job that ended.
    """
    wanted = _state_names(states)
    if wanted is None:
        return list(jobs)
    return [j for j in jobs if _in(j, wanted)]


def select(
    jobs: Mapping[int, Job], flt: Mapping[str, Any], *, default_active: bool = True
) -> list[Job]:
    """Jobs matching every given criterion. Raises for ids that match nothing."""
    ids = [parse_id(t) for t in flt.get("job_ids", [])]
    if ids:
        pool = [j for j in jobs.values() if any(s.matches(j) for s in ids)]
    else:
        pool = list(jobs.values())
    states = flt.get("states", [])
    if states:
        pool = in_states(pool, states)
    elif default_active and not ids:
        pool = [j for j in pool if _in(j, _ACTIVE)]
    users = flt.get("users", [])
    if users:
        uids = {uid_for(u) for u in users}
        pool = [j for j in pool if j.uid in uids]
    for key, attr in (
        ("partitions", "partition"),
        ("names", "name"),
        ("accounts", "account"),
        ("qos", "qos"),
        ("reservations", "reservation"),
    ):
        values = set(flt.get(key, []))
        if values:
            if key == "partitions":
                pool = [
                    j
                    for j in pool
                    if (j.partition in values) or (not j.partition and values & set(j.partitions))
                ]
            else:
                pool = [j for j in pool if getattr(j, attr) in values]
    nodes = set(flt.get("nodes", []))
    if nodes:
        pool = [j for j in pool if nodes & set(j.nodes)]
    return sorted(pool, key=lambda j: j.job_id)
