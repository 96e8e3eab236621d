"""``srun a : b`` inside an ordinary (not heterogeneous) job, as Slurm 22.05 runs it.

Slurm's srun then runs one step of several parts in the one job (MPMD): srun gives
each ``:`` group the next nodes of the job (``cli/srun/hetstep.py``), each part runs
its own program with its own options there, and every task sees one ordinary step:
SLURM_PROCID and SLURM_NODEID numbered across the parts, the step's counts and lists
the whole step's, no SLURM_HET_SIZE (measured on a real 22.05: slurmctld and two
``slurmd -N``). Slurm records each part as a step of its own under the one step id,
with its component index (``123.1+0``, ``123.1+1``: ``squeue -s``, ``scontrol show
step``, sacct's records, each with its own nodes, tasks and CPUs), and so does Corral
(``Step.het_comp``); the whole step (``joined``) is what srun and every task see, and
each part's nodes are launched with that part's request, placed in the whole step as a
part of a step spanning heterogeneous job components is (``controller/hetsteps.HetPart``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from controller import tasklayout
from controller.hetsteps import NODE_LISTS, NODE_TOTALS, TASK_LISTS, TOTALS, HetPart
from controller.model import Job, Step
from corral import errors
from corral.errors import SlurmError

#: The whole step's variables every part's tasks take.
WHOLE = (*TOTALS, *NODE_TOTALS, *NODE_LISTS, *TASK_LISTS)


def joined(job: Job, made: Sequence[Step], step_id: int) -> Step:
    """The one step the parts ``made`` (laid out each on its own nodes) make, numbered
    ``step_id``: their nodes, tasks, CPUs, GPUs and memory in order, task ids across
    them. Parts that share a node are refused (srun gives each its own)."""
    nodes = [node for step in made for node in step.nodes]
    if len(set(nodes)) != len(nodes):
        raise SlurmError(errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)
    ids: list[tuple[int, ...]] = []
    offset = 0
    for step in made:
        ids += [tuple(task + offset for task in node_ids) for node_ids in step.ids]
        offset += step.ntasks
    tasks = tuple(task for step in made for task in step.tasks)
    has_gpus, has_mem = any(s.gpus for s in made), any(s.mem for s in made)
    return replace(
        made[0],
        step_id=step_id,
        nodes=tuple(nodes),
        tasks=tasks,
        cpus=tuple(cpus for step in made for cpus in step.cpus),
        # A part that asked for none has none of its own on its nodes.
        gpus=tuple(g for s in made for g in (s.gpus or ((),) * len(s.nodes))) if has_gpus else (),
        mem=tuple(m for s in made for m in (s.mem or (0,) * len(s.nodes))) if has_mem else (),
        task_ids=() if tuple(ids) == tuple(tasklayout.by_block(tasks)) else tuple(ids),
    )


def recorded(whole: Step, made: Sequence[Step]) -> list[Step]:
    """The parts as the job records them: the whole step's id, each its index and where
    its nodes and tasks fall in the whole step (sattach of a part counts from there)."""
    out, node_offset, task_offset = [], 0, 0
    for comp, step in enumerate(made):
        offset = (node_offset, task_offset)
        out.append(replace(step, step_id=whole.step_id, het_comp=comp, het_offset=offset))
        node_offset += len(step.nodes)
        task_offset += step.ntasks
    return out


def parts(whole: Step, made: Sequence[Step], env: Mapping[str, str]) -> list[tuple[Step, HetPart]]:
    """Each part as launched (``made``: as ``recorded`` gives them): where its nodes and
    tasks fall in the whole step, and the whole step's variables (``env``: the whole
    step's ``controller.steps.step_environment``)."""
    shared = {name: env[name] for name in WHOLE}
    return [(step, HetPart(*step.het_offset, whole.ntasks, whole.tasks, shared)) for step in made]
