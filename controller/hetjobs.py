"""Heterogeneous jobs (sbatch/salloc ``:``, ``#SBATCH hetjob``), as Slurm 22.05 keeps them.

A heterogeneous job is one submission of several components, each a job of its own
with the next id: the first is the leader (``HetJobId``, the id sbatch prints), each
knows its offset and the whole id set, and clients show them as ``123+0``,
``123+1``. Only the leader carries the batch script; the other components are
allocations (``Job.interactive``) that the script reaches with ``srun
--het-group``. So what an allocation already does applies to them unchanged: no
launch, their end kills what runs on their nodes, their time limit ends them.

Here: the component specs and records at submission, the SLURM_*_HET_GROUP_N
environment of the batch script, and the rule that the components end with their
leader. That they start together is the scheduler core's (``core/hetgroup.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from controller.admission import Admitted
from controller.core import Start
from controller.jobenv import allocation_environment as allocation_environment_of
from controller.jobspec import JobSpec
from controller.jobstate import COMPLETING, Cancel, JobState
from controller.model import Job

if TYPE_CHECKING:
    from controller.store import JobStore

#: The allocation's variables Slurm 22.05 repeats per component as ``NAME_HET_GROUP_N``
#: (and, for scripts written for 17.11-19.05, ``NAME_PACK_GROUP_N``): those seen in a
#: real 22.05 batch script, where they are set, plus its account and QOS.
PER_GROUP = (
    "SLURM_CPUS_PER_TASK",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_QOS",
    "SLURM_MEM_PER_CPU",
    "SLURM_MEM_PER_NODE",
    "SLURM_NPROCS",
    "SLURM_NTASKS",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
)

#: How a leader's end reads for the components that end with it.
_OUTCOMES = {JobState.CANCELLED: "cancelled", JobState.TIMEOUT: "timeout"}


def component_specs(specs: Sequence[JobSpec]) -> list[JobSpec]:
    """The specs as recorded: the first keeps the script, the others are allocations."""
    return [specs[0], *(replace(s, script="", argv=(), interactive=True) for s in specs[1:])]


def component(admitted: Admitted, leader: int, size: int) -> Admitted:
    """``admitted`` marked a component of the heterogeneous job led by ``leader``.

    It is never requeued (``Requeue=0``): a leader requeued alone would wait for
    components that ended with it, and a component requeued alone could never start."""
    job = admitted.job
    id_set = f"{leader}-{leader + size - 1}"
    het = replace(
        job,
        het_job_id=leader,
        het_job_offset=job.job_id - leader,
        het_job_id_set=id_set,
        requeue=False,
    )
    return replace(admitted, job=het)


def ids(job: Job) -> range:
    """Every component's job id (``job`` alone when it is not heterogeneous)."""
    if not job.het_job_id:
        return range(job.job_id, job.job_id + 1)
    _, _, last = job.het_job_id_set.partition("-")
    return range(job.het_job_id, int(last or job.het_job_id) + 1)


def leader_of(jobs: Mapping[int, Job], job: Job) -> Job:
    """``job``'s leader (``job`` itself when it leads, is not heterogeneous, or its
    leader is gone): whose BatchFlag every component shows, as Slurm shows it."""
    return jobs.get(job.het_job_id, job) if job.het_job_offset else job


def components(jobs: Mapping[int, Job], job: Job) -> list[Job]:
    """The components of ``job``'s heterogeneous job still known, by offset."""
    return [jobs[i] for i in ids(job) if i in jobs]


def environment(members: Sequence[Job], cluster: str) -> dict[str, str]:
    """What the batch script of a heterogeneous job has beyond its leader's own
    variables: SLURM_HET_SIZE and each component's allocation as ``NAME_HET_GROUP_N``,
    with 22.05's older names (SLURM_PACK_SIZE, ``NAME_PACK_GROUP_N``) as well."""
    env = {"SLURM_HET_SIZE": str(len(members)), "SLURM_PACK_SIZE": str(len(members))}
    return env | _per_group(members, cluster, PER_GROUP)


def _per_group(members: Sequence[Job], cluster: str, names: Sequence[str]) -> dict[str, str]:
    """Each component's allocation variables among ``names``, as ``NAME_HET_GROUP_N`` and
    ``NAME_PACK_GROUP_N``."""
    env: dict[str, str] = {}
    for member in members:
        values = allocation_environment_of(member, cluster)
        for group in ("HET", "PACK"):
            suffix = f"_{group}_GROUP_{member.het_job_offset}"
            env.update({name + suffix: values[name] for name in names if name in values})
    return env


def whole(
    starts: Sequence[Start], jobs: Mapping[int, Job], holds: Callable[[Start], bool]
) -> list[Start]:
    """A plan's starts less every heterogeneous job any of whose components' start no
    longer ``holds`` (or is missing): the store's re-check keeps them all-or-nothing."""
    by_group: dict[int, list[Start]] = {}
    for start in starts:
        job = jobs.get(start.job_id)
        if job is not None and job.het_job_id:
            by_group.setdefault(job.het_job_id, []).append(start)
    broken = {
        leader
        for leader, group in by_group.items()
        if len(group) != len(ids(jobs[group[0].job_id])) or not all(holds(s) for s in group)
    }
    if not broken:
        return list(starts)
    return [s for s in starts if (j := jobs.get(s.job_id)) is None or j.het_job_id not in broken]


#: What salloc's command has per component besides ``PER_GROUP`` (Slurm 22.05's salloc
#: names the allocation by component only: no plain SLURM_JOB_NODELIST and the like).
SALLOC_PER_GROUP = (*PER_GROUP, "SLURM_JOBID", "SLURM_NNODES", "SLURM_NODELIST",
                    "SLURM_NODE_ALIASES")  # fmt: skip


def allocation_environment(members: Sequence[Job], cluster: str) -> dict[str, str]:
    """What salloc's command of a heterogeneous job sees, as Slurm 22.05's salloc sets
    it: the leader's id, each component's allocation as ``NAME_HET_GROUP_N`` (and
    ``_PACK_GROUP_N``) and no plain allocation variables, SLURM_NTASKS the sum."""
    leader = allocation_environment_of(members[0], cluster)
    env = {k: v for k, v in leader.items() if k not in SALLOC_PER_GROUP}
    env["SLURM_JOB_ID"] = str(members[0].job_id)
    total = str(sum(m.num_tasks for m in members))
    env.update(SLURM_NTASKS=total, SLURM_NPROCS=total)
    env["SLURM_HET_SIZE"] = env["SLURM_PACK_SIZE"] = str(len(members))
    return env | _per_group(members, cluster, SALLOC_PER_GROUP)


def followers(jobs: Mapping[int, Job], leader: Job) -> Iterator[Job]:
    """The components after ``leader`` that have not ended."""
    for member in components(jobs, leader):
        if member.job_id != leader.job_id and not member.state.finished:
            yield member


def end_with_leader(store: JobStore, leader: Job, now: int, by: int = -1) -> None:
    """End the components that outlive their leader: a pending one is cancelled with
    it; a running one ends as the leader ended (its nodes are told to kill)."""
    outcome = _OUTCOMES.get(leader.state, "cancelled" if by >= 0 else "exited")
    for member in list(followers(store.jobs, leader)):
        if member.state is JobState.PENDING:
            store.post(member.job_id, Cancel(now, by))
        elif COMPLETING not in member.flags:
            store.end_interactive(member, now, leader.exit_status, outcome)


def orphans(store: JobStore, now: int) -> list[Job]:
    """Components whose leader has ended or is completing (its script exited, it timed
    out, a node failed): ended with it, as Slurm ends a heterogeneous job as one."""
    done = []
    for leader_id in list(store.het_leaders):
        leader = store.jobs.get(leader_id)
        if leader is None:  # purged: nothing of it is left to end
            store.het_leaders.discard(leader_id)
            continue
        if not (leader.state.finished or COMPLETING in leader.flags):
            continue
        if any(True for _ in followers(store.jobs, leader)):
            end_with_leader(store, leader, now)
            done.append(leader)
    return done
