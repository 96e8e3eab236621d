"""A job step spanning heterogeneous job components (``srun --het-group=0,1``,
``srun a : b``), as Slurm 22.05 runs one.

It is one step: srun sends one StepCreate whose ``het_parts`` are the later
components' parts, each naming its component's job. The store lays every part out
before it records any (all or none, so srun's retry while CPUs are busy leaves no
half step) and gives each the same step id, the highest next id among them. Each
component keeps its own record of its part (accounted as ``123+0.1``,
``123+1.1``); what the tasks see is numbered across the parts, component 0's first,
as a real 22.05's het step has it: SLURM_PROCID and SLURM_NODEID are global, the
counts and lists are the whole step's, the job id (also PMI_JOBID) the leader's, and
each part's own are repeated as ``NAME_HET_GROUP_N`` with SLURM_HET_SIZE. srun
hears from every part's runners on one socket, and since their node ids and task
ids are global, its PMI fence (``cli/srun/pmifence.py``) spans the components
unchanged; it reports a failed task by its id in its component, as Slurm's srun.
Each part keeps the step's job ids and where it falls in the whole step, so that a
cancel of the leader's part ends them all (``cancelled_with``) and sattach of a
later part counts its tasks from 0, as a real 22.05 does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.jobenv import run_length
from controller.model import Job, Step
from controller.steps import StepRequest
from corral import errors, hostlist
from corral.errors import SlurmError

#: The whole step's counts and lists, in every task of every part.
TOTALS = ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS")
NODE_TOTALS = ("SLURM_NNODES", "SLURM_STEP_NUM_NODES")
NODE_LISTS = ("SLURM_NODELIST", "SLURM_STEP_NODELIST")
TASK_LISTS = ("SLURM_TASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE")
#: Each part's variables repeated as NAME_HET_GROUP_N (and 17.11's NAME_PACK_GROUP_N)
#: in every task, as a real 22.05's het step has them: the part's job, its tasks, nodes.
PER_GROUP = tuple(
    f"SLURM_{name}"
    for name in ("JOBID", "JOB_CPUS_PER_NODE", "JOB_ID", "JOB_NAME", "JOB_NODELIST",
                 "JOB_NUM_NODES", "JOB_PARTITION", "NNODES", "NODELIST", "NPROCS", "NTASKS",
                 "TASKS_PER_NODE")
)  # fmt: skip
#: The per-group names of a step in srun's own heterogeneous job (``srun a : b`` outside
#: a job), as a real 22.05's tasks have them: these four, as ``NAME_PACK_GROUP_N`` only.
OWN_PER_GROUP = ("SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_ID", "SLURM_JOB_NODELIST",
                 "SLURM_JOB_PARTITION")  # fmt: skip
#: Taken from component 0's part by every task: the leader's job id, name, partition.
FROM_LEADER = ("SLURM_JOBID", "SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_JOB_PARTITION")


@dataclass(frozen=True)
class StepPart:
    """One component's part of a step, as StepCreate read it."""

    job_id: int
    request: StepRequest
    name: str
    time_limit: int
    line: str


@dataclass(frozen=True)
class HetPart:
    """What a part's launch adds to its own step: where its nodes and tasks fall in the
    whole step, the whole step's size, and the variables every task shares."""

    node_offset: int
    task_offset: int
    ntasks: int
    node_tasks: tuple[int, ...]
    environment: Mapping[str, str] = field(default_factory=dict)


def check_components(jobs: Sequence[Job]) -> None:
    """The parts' jobs must be distinct components of one heterogeneous job (srun
    names them from SLURM_JOB_ID_HET_GROUP_N; anything else is not one step)."""
    leaders = {job.het_job_id for job in jobs}
    if 0 in leaders or len(leaders) != 1 or len({job.job_id for job in jobs}) != len(jobs):
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)


def parts(
    made: Sequence[tuple[Job, Step]], envs: Sequence[Mapping[str, str]], own: bool = False
) -> list[HetPart]:
    """Each part's offsets and the variables all tasks share, given each part's own step
    variables (``controller.steps.step_environment``), component 0's first: as in a
    real 22.05's het step, the counts and lists are the whole step's (its jobs' for
    SLURM_JOB_*), the job id, name and partition the leader's, and each part's own
    repeated per group (``own``: srun's own heterogeneous job, ``OWN_PER_GROUP``)."""
    ntasks = sum(step.ntasks for _, step in made)
    node_tasks = tuple(count for _, step in made for count in step.tasks)
    nodes = [node for _, step in made for node in step.nodes]
    job_nodes = [node for job, _ in made for node in job.nodes]
    shared = {name: envs[0][name] for name in FROM_LEADER}
    shared.update(
        {
            "SLURM_HET_SIZE": str(len(made)),
            "SLURM_PACK_SIZE": str(len(made)),
            "SLURM_JOB_NODELIST": hostlist.compress(dict.fromkeys(job_nodes)),
            "SLURM_JOB_NUM_NODES": str(len(job_nodes)),
            "SLURM_JOB_CPUS_PER_NODE": run_length(
                [cpus for job, _ in made for cpus in job.usable_cpus]
            ),
        }
    )
    shared.update(dict.fromkeys(TOTALS, str(ntasks)))
    shared.update(dict.fromkeys(NODE_TOTALS, str(len(nodes))))
    shared.update(dict.fromkeys(NODE_LISTS, hostlist.compress(dict.fromkeys(nodes))))
    shared.update(dict.fromkeys(TASK_LISTS, run_length(list(node_tasks))))
    for index, env in enumerate(envs):
        if own:
            shared.update({f"{name}_PACK_GROUP_{index}": env[name] for name in OWN_PER_GROUP})
            continue
        for name in PER_GROUP:
            shared[f"{name}_HET_GROUP_{index}"] = shared[f"{name}_PACK_GROUP_{index}"] = env[name]
    return [HetPart(*step.het_offset, ntasks, node_tasks, shared) for _, step in made]


def cancelled_with(jobs: Mapping[int, Job], job: Job, step: Step) -> list[Job]:
    """The other components whose part of ``step`` a cancel of ``job``'s part ends.

    As a real Slurm 22.05's slurmctld does (measured: parts ended with srun stopped):
    scancel of the leader's part (``123.0``) ends every part, scancel of a later
    component's own (``124.0``) ends that part alone, and a signal, SIGKILL given with
    ``-s`` included, reaches only the part it names (the caller decides which)."""
    if not step.het_jobs or job.job_id != job.het_job_id:
        return []
    out = []
    for job_id in step.het_jobs:
        other = jobs.get(job_id)
        if other is None or job_id == job.job_id:
            continue
        if any(s.step_id == step.step_id and s.running for s in other.steps):
            out.append(other)
    return out
