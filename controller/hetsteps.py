"""A job step spanning heterogeneous job components (``srun --het-group=0,1``,
``srun a : b``), as Slurm 22.05 runs one.

It is one step: srun sends one StepCreate whose ``het_parts`` are the later
components' parts, each naming its component's job. The store lays every part out
before it records any (all or none, so srun's retry while CPUs are busy leaves no
half step) and gives each the same step id, the highest next id among them. Each
component keeps its own record of its part (accounted as ``123+0.1``,
``123+1.1``); what the tasks see is numbered across the parts, component 0's first:
SLURM_PROCID and SLURM_NODEID are global, the step's task and node counts are the
whole step's, and every part's step variables are repeated as ``NAME_HET_GROUP_N``
with SLURM_HET_SIZE, so each task can tell where the others run. srun hears from
every part's runners on one socket, and since their node ids and task ids are
global, its PMI fence (``cli/srun/pmifence.py``) spans the components unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.model import Job, Step
from controller.steps import StepRequest
from corral import errors, hostlist
from corral.errors import SlurmError

#: The whole-step variables of a spanning step: its tasks and nodes in all parts.
TOTALS = ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_TASKS")
NODE_TOTALS = ("SLURM_NNODES", "SLURM_STEP_NUM_NODES")
NODE_LISTS = ("SLURM_NODELIST", "SLURM_STEP_NODELIST")


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


def parts(made: Sequence[tuple[Job, Step]], envs: Sequence[Mapping[str, str]]) -> list[HetPart]:
    """Each part's offsets and the shared variables, given each part's own step
    variables (``controller.steps.step_environment``), component 0's first."""
    ntasks = sum(step.ntasks for _, step in made)
    node_tasks = tuple(count for _, step in made for count in step.tasks)
    nodes = [node for _, step in made for node in step.nodes]
    shared = {"SLURM_HET_SIZE": str(len(made))}
    for index, env in enumerate(envs):
        own = {name: value for name, value in env.items() if name.startswith("SLURM_")}
        shared.update({f"{name}_HET_GROUP_{index}": value for name, value in own.items()})
    shared.update(dict.fromkeys(TOTALS, str(ntasks)))
    shared.update(dict.fromkeys(NODE_TOTALS, str(len(nodes))))
    shared.update(dict.fromkeys(NODE_LISTS, hostlist.compress(list(dict.fromkeys(nodes)))))
    out, node_offset, task_offset = [], 0, 0
    for _, step in made:
        out.append(HetPart(node_offset, task_offset, ntasks, node_tasks, shared))
        node_offset += len(step.nodes)
        task_offset += step.ntasks
    return out
