"""Node choice for a job whose GPUs are dealt node by node (``gpus.GpuAsk.dealt``):
a total over its nodes (--gpus, Slurm's TresPerJob) or GPUs per task
(--gpus-per-task, --ntasks-per-gpu).

The same rules as ``placement._fixed`` and ``_packed`` (selection order, ``-N``
fixed or as few nodes as fit, required nodes first), with GPUs in the count:

* A total: with ``-N k``, k nodes that can each give the job a GPU and between
  them the total (the first in order, a node that can give more replacing the
  one that gives least while they fall short); without, nodes are added in
  order until they hold the tasks, ``-N``'s minimum and the total. The tasks are
  then laid out over those nodes as ``_packed`` lays them (each node at least
  one), and the GPUs dealt (``gpus.deal``) near the CPUs each node's tasks get.
* Per task: each node in order takes as many tasks as its free CPUs and GPUs hold,
  keeping one for each node still to come (``-N k``: k nodes; else at least
  ``-N``'s minimum), each with its tasks' GPUs. So ``-N2 -n6 --gpus-per-task=1`` on
  4-GPU nodes is 4 + 2, as in Slurm, and the job's tasks are laid out the same way
  (``jobenv.tasks_per_node`` over the CPUs each node got). With GPUs per node as
  well, every node holds the tasks its GPUs are for (per node / per task) and gets
  their CPUs, though fewer of the job's tasks may run there: Slurm's ``-N2 -n3
  --gres=gpu:2 --gpus-per-task=1`` is 2 + 2 CPUs (its NumTasks=4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controller.core import nodefree
from controller.core.gpus import GpuAsk, deal, deal_loose, for_tasks, free_gpus, near
from controller.core.gpusocketcap import confined_cpus
from controller.core.request import Fit, cpus_per_node, node_fits, share
from controller.core.snapshot import Gres, NodeView, PartitionView
from controller.model import Job

__all__ = ["choose"]

Alloc = tuple[str, Fit]  # node name, what the job gets there


def choose(
    job: Job,
    part: PartitionView,
    pool: Sequence[NodeView],
    gpu: GpuAsk,
    fixed: bool,
    least: int,
    stacking: bool,
) -> list[Alloc]:
    """Nodes and what the job gets on each, or [] when they do not fit now."""
    if gpu.by_tasks:
        return _by_tasks(job, part, pool, gpu, fixed, least, stacking)
    return _total(job, part, pool, gpu, fixed, least, stacking)


def _most(job: Job, part: PartitionView, pool: Sequence[NodeView]) -> int:
    return min(job.max_nodes or len(pool), part.max_nodes or len(pool))


def _usable_cpus(
    job: Job, part: PartitionView, node: NodeView, stacking: bool, gpu: GpuAsk | None = None
) -> int:
    """The CPUs of ``node`` the job could get now (as ``placement._packed`` counts them);
    with ``gpu``, only those of the sockets its GPU total needs, where that leaves some
    out (Slurm's first try, ``gpusocketcap``)."""
    if job.exclusive or part.exclusive:
        free = node.cpus
    else:
        free = nodefree.cpus_free(node, part.name, share(job, part), stacking)
    if part.max_cpus_per_node is not None:
        free = min(free, part.max_cpus_per_node)
    if gpu is not None and not (job.exclusive or part.exclusive):
        confined = confined_cpus(node, gpu)
        if confined is not None:
            free = min(free, confined)
    return free


def _capacity(
    job: Job, part: PartitionView, node: NodeView, gpu: GpuAsk, cpus: int, stacking: bool
) -> int:
    """How many GPUs of the kind asked ``node`` can give the job now, with the CPUs
    and memory that come with them, when its tasks there need ``cpus``; 0 when it
    cannot give one. A job whose dealt type is met by GPUs per node, dealing further
    types only (``--gpus=a100:2,v100:2 --gpus-per-node=a100:1``), is given 1 by a node
    that holds what it asks per node."""
    if gpu.lacks(node.gres):
        return 0
    dealt = 1 if gpu.per_job or gpu.per_task else 0
    if node_fits(job, part, node, cpus, stacking=stacking, gpu=gpu, gpus=dealt) is None:
        return 0
    if not dealt:
        return 1
    count = free_gpus(node.gres, gpu.kind)
    if gpu.cpus_per_gpu:
        count = min(count, _usable_cpus(job, part, node, stacking) // gpu.cpus_per_gpu)
    if gpu.mem_per_gpu:
        memory = min(node.free_memory, part.max_mem_per_node or node.free_memory)
        count = min(count, memory // gpu.mem_per_gpu)
    return count


def _short(picked: list[tuple[NodeView, int]], gpu: GpuAsk) -> list[str]:
    """The types whose total ``picked`` cannot give yet (the dealt type's, ``gpu.kind``,
    and the further totals')."""
    short = [gpu.kind] if sum(cap for _, cap in picked) < gpu.per_job else []
    for kind, count in gpu.also:
        if sum(free_gpus(node.gres, kind) for node, _ in picked) < count:
            short.append(kind)
    return short


def _enough(picked: list[tuple[NodeView, int]], gpu: GpuAsk) -> bool:
    return not _short(picked, gpu)


def _adds(node: NodeView, picked: list[tuple[NodeView, int]], gpu: GpuAsk) -> bool:
    """Whether ``node`` has GPUs of a type whose total ``picked`` falls short of: with
    totals of several types, Slurm leaves out a node that helps none (``--gpus=a100:1,
    v100:3`` is n1 and n3, not n2 of A100s only)."""
    return any(free_gpus(node.gres, kind) for kind in _short(picked, gpu))


def _fixed_nodes(
    job: Job, part: PartitionView, pool: Sequence[NodeView], gpu: GpuAsk, stacking: bool
) -> list[tuple[NodeView, int]]:
    """``-N k``: k nodes holding the total between them, as early in ``pool`` as can."""
    k = job.min_nodes
    cpus = cpus_per_node(job, k)
    picked: list[tuple[NodeView, int]] = []
    for node in pool:
        cap = _capacity(job, part, node, gpu, cpus, stacking)
        if cap < 1:
            continue
        picked.append((node, cap))
        if len(picked) > k:  # the node that gives least goes (the latest, among equals)
            weakest = min(range(len(picked)), key=lambda i: (picked[i][1], -i))
            del picked[weakest]
        if len(picked) == k and _enough(picked, gpu):
            return picked
    return []


def _packed_nodes(
    job: Job,
    part: PartitionView,
    pool: Sequence[NodeView],
    gpu: GpuAsk,
    least: int,
    stacking: bool,
    confine: GpuAsk | None = None,
) -> list[tuple[NodeView, int]]:
    """Nodes in order until they hold the tasks, ``least`` nodes and the total (with
    ``confine``, each node's tasks on the sockets its GPUs need)."""
    most = _most(job, part, pool)
    picked: list[tuple[NodeView, int]] = []
    room = 0
    one_task = max(job.cpus_per_task, job.min_cpus)
    for node in pool:
        cap = _capacity(job, part, node, gpu, one_task, stacking)
        if cap < 1:
            continue
        met = len(picked) >= least and room >= job.num_tasks
        if gpu.also and met and not _adds(node, picked, gpu):
            continue
        picked.append((node, cap))
        room += _usable_cpus(job, part, node, stacking, confine) // job.cpus_per_task
        if len(picked) >= least and room >= job.num_tasks and _enough(picked, gpu):
            return picked
        if len(picked) == most:
            break
    return []


def _task_cpus(
    job: Job,
    part: PartitionView,
    nodes: Sequence[NodeView],
    stacking: bool,
    confine: GpuAsk | None = None,
) -> list[int] | None:
    """The CPUs the job's tasks take on each of ``nodes``, laid out as ``_packed`` lays
    them (each node at least one task; with ``confine``, on the sockets its GPUs
    need); None when they do not fit."""
    remaining = job.num_tasks
    out = []
    for i, node in enumerate(nodes):
        room = _usable_cpus(job, part, node, stacking, confine) // job.cpus_per_task
        later = len(nodes) - i - 1
        tasks = max(min(remaining - later, room), 0)
        out.append(max(max(tasks, 1) * job.cpus_per_task, job.min_cpus))
        remaining -= tasks
    return None if remaining > 0 else out


def _total(
    job: Job,
    part: PartitionView,
    pool: Sequence[NodeView],
    gpu: GpuAsk,
    fixed: bool,
    least: int,
    stacking: bool,
) -> list[Alloc]:
    """--gpus: the nodes, then the GPUs dealt over them (``gpus.deal``); first with each
    node's tasks on the sockets its GPUs need, then, where that does not fit, on any
    of its CPUs (Slurm's two tries, ``gpusocketcap``)."""
    if job.ntasks_per_gpu:  # its tasks go with their GPUs: a confined node that cannot
        # hold them is passed over in Slurm's first try, so no socket is left out
        return _total_on(job, part, pool, gpu, fixed, least, stacking, None)
    first = _total_on(job, part, pool, gpu, fixed, least, stacking, gpu)
    if first or not any(confined_cpus(node, gpu) is not None for node in pool):
        return first
    return _total_on(job, part, pool, gpu, fixed, least, stacking, None)


def _lays_tasks(job: Job) -> bool:
    """Whether ``-n``'s tasks fill a fixed ``-N``'s nodes in order (as
    ``placement.packs``: not with ``--ntasks-per-node`` or ``--ntasks-per-gpu``)."""
    return job.tasks_given and not (job.ntasks_per_node or job.ntasks_per_gpu)


def _total_on(
    job: Job,
    part: PartitionView,
    pool: Sequence[NodeView],
    gpu: GpuAsk,
    fixed: bool,
    least: int,
    stacking: bool,
    confine: GpuAsk | None,
) -> list[Alloc]:
    """``_total``'s one try: ``confine`` as in ``_usable_cpus``."""
    if fixed:
        picked = _fixed_nodes(job, part, pool, gpu, stacking)
        chosen = sorted(picked, key=lambda p: pool.index(p[0]))
        cpus: list[int] | None = [cpus_per_node(job, job.min_nodes)] * len(chosen)
        if chosen and _lays_tasks(job):  # -N2 -n6 --gpus=2: 4 + 2, as tasks fill nodes
            cpus = _task_cpus(job, part, [node for node, _ in chosen], stacking, confine)
    else:
        chosen = _packed_nodes(job, part, pool, gpu, least, stacking, confine)
        cpus = _task_cpus(job, part, [node for node, _ in chosen], stacking, confine)
    if not chosen or cpus is None:
        return []
    if _over_total(gpu, chosen, confine):
        return []
    nears = [near(node, gpu, c) for (node, _), c in zip(chosen, cpus, strict=True)]
    dealer = deal_loose if gpu.also else deal
    given = dealer(gpu.per_job, [cap for _, cap in chosen], nears)
    nodes = [node for node, _ in chosen]
    also = _deal_also(gpu, nodes, cpus)
    if given is None or also is None:
        return []
    out: list[Alloc] = []
    for node, c, g, more in zip(nodes, cpus, given, also, strict=True):
        fit = node_fits(job, part, node, c, stacking=stacking, gpu=gpu, gpus=g, also=more)
        if fit is None:
            return []
        out.append((node.name, fit))
    return out


def _over_total(
    gpu: GpuAsk, chosen: Sequence[tuple[NodeView, int]], confine: GpuAsk | None
) -> bool:
    """Whether the first try's nodes, some confined, outnumber the GPU total: there
    Slurm 22.05 gave each node a GPU, over the total (a defect, docs/design.md); its
    second try, on any CPUs, keeps the total, and so does Corral."""
    if confine is None or gpu.also or gpu.per_job >= len(chosen):
        return False
    return any(confined_cpus(node, gpu) is not None for node, _ in chosen)


def _deal_also(gpu: GpuAsk, nodes: Sequence[NodeView], cpus: Sequence[int]) -> list[Gres] | None:
    """The further totals (``gpu.also``) dealt over ``nodes`` whose tasks take ``cpus``,
    each type on its own (``gpus.deal_loose``): each node's ``("gpu", type, count)``;
    None when the nodes do not hold them."""
    out: list[Gres] = [() for _ in nodes]
    for kind, count in gpu.also:
        mine = replace(gpu, kind=kind)
        caps = [free_gpus(node.gres, kind) for node in nodes]
        nears = [near(node, mine, c) for node, c in zip(nodes, cpus, strict=True)]
        given = deal_loose(count, caps, nears)
        if given is None:
            return None
        out = [(*gres, ("gpu", kind, g)) if g else gres for gres, g in zip(out, given, strict=True)]
    return out


def _task_room(job: Job, part: PartitionView, node: NodeView, gpu: GpuAsk, stacking: bool) -> int:
    """How many of the job's tasks ``node`` can hold now, by its CPUs and GPUs."""
    tasks = _usable_cpus(job, part, node, stacking) // job.cpus_per_task
    return min(tasks, gpu.task_room(free_gpus(node.gres, gpu.kind)))


def _by_tasks(
    job: Job,
    part: PartitionView,
    pool: Sequence[NodeView],
    gpu: GpuAsk,
    fixed: bool,
    least: int,
    stacking: bool,
) -> list[Alloc]:
    """--gpus-per-task, --ntasks-per-gpu: nodes in order, each with as many tasks as it
    holds (keeping one for each node still needed) and their GPUs."""
    most = job.min_nodes if fixed else _most(job, part, pool)
    least = job.min_nodes if fixed else least
    remaining = job.num_tasks
    chosen: list[Alloc] = []
    placed: list[tuple[NodeView, int, int]] = []  # node, its CPUs, its tasks
    for node in pool:
        if len(chosen) == most or (remaining == 0 and len(chosen) >= least):
            break
        later = max(least - len(chosen) - 1, 0)  # nodes that must still get a task
        room = _task_room(job, part, node, gpu, stacking)
        tasks = min(room, remaining - later)
        if tasks < 1:
            continue
        # With GPUs per node too, a node's CPUs are for all the tasks its GPUs hold,
        # as Slurm counts them (-n3 -N2 --gres=gpu:2 --gpus-per-task=1: 2 + 2 CPUs).
        held = room if gpu.per_node and gpu.per_task else tasks
        cpus = max(held * job.cpus_per_task, job.min_cpus)
        fit = node_fits(
            job, part, node, cpus, stacking=stacking, gpu=gpu, gpus=for_tasks(gpu, tasks)
        )
        if fit is not None:
            chosen.append((node.name, fit))
            placed.append((node, cpus, tasks))
            remaining -= tasks
    if remaining > 0 or len(chosen) < least:
        return []
    return _with_also(job, part, gpu, placed, stacking) if gpu.also else chosen


def _with_also(
    job: Job,
    part: PartitionView,
    gpu: GpuAsk,
    placed: Sequence[tuple[NodeView, int, int]],
    stacking: bool,
) -> list[Alloc]:
    """GPUs per task with further totals (``--gpus=a100:1 --gpus-per-task=v100:1``):
    the totals dealt over the nodes the tasks took, each node's fit again with them."""
    nodes = [node for node, _, _ in placed]
    also = _deal_also(gpu, nodes, [cpus for _, cpus, _ in placed])
    if also is None:
        return []
    out: list[Alloc] = []
    for (node, cpus, tasks), more in zip(placed, also, strict=True):
        gpus = for_tasks(gpu, tasks)
        fit = node_fits(job, part, node, cpus, stacking=stacking, gpu=gpu, gpus=gpus, also=more)
        if fit is None:
            return []
        out.append((node.name, fit))
    return out
