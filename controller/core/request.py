"""How much of a node a job needs: CPUs, memory and GRES per node, and node fit.

Shared by admission (reject what can never run: placement on an empty
cluster) and the scheduler (placement now), so "never" and "not now" use the
same arithmetic.

Which jobs share their CPUs is ``share`` (OverSubscribe); how many CPUs a
node has for a job, and what starting it takes, is ``core/nodefree.py``,
whose docstring states the OverSubscribe rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial

from controller.core import (
    cpupick,
    features,
    gpusockets,
    socketspread,
    taskspersocket,
    threads,
)
from controller.core.devices import enforced_gpus, gpu_indices
from controller.core.gpus import GpuAsk
from controller.core.nodefree import cpus_free
from controller.core.snapshot import Gres, NodeView, PartitionView
from controller.model import Job
from corral import gres as gres_syntax


def cpus_per_node(job: Job, nnodes: int) -> int:
    """CPUs the job needs on each of ``nnodes`` nodes (tasks spread evenly)."""
    if job.ntasks_per_node:
        tasks = job.ntasks_per_node
        if job.tasks_given:
            tasks = min(tasks, -(-job.num_tasks // nnodes))
    else:
        tasks = -(-job.num_tasks // nnodes)
    return max(tasks * job.cpus_per_task, job.min_cpus, 1)


def mem_per_node(
    job: Job,
    part: PartitionView,
    cpus: int,
    node_memory: int,
    gpus: int = 0,
    mem_per_gpu: int | None = None,
) -> int:
    """MiB the job needs on a node where it gets ``cpus`` CPUs and ``gpus`` GPUs
    (0 = no request); ``mem_per_gpu`` is its --mem-per-gpu or DefMemPerGPU
    (``gpus.ask``), which --mem and --mem-per-cpu override."""
    if job.mem_per_node is not None:
        return node_memory if job.mem_per_node == 0 else job.mem_per_node
    if job.mem_per_cpu is not None:
        return job.mem_per_cpu * cpus
    if mem_per_gpu is not None:
        return mem_per_gpu * gpus
    if part.def_mem_per_cpu:
        return part.def_mem_per_cpu * cpus
    return part.def_mem_per_node


def features_match(constraint: str, node_features: frozenset[str]) -> bool:
    """Whether a node with ``node_features`` may be in an allocation under ``-C constraint``.

    ``a&b`` all, ``a|b`` any, ``[a|b]`` one of them (the same on every node),
    counts (``a*2``) force nodes in but restrict none. False if malformed.
    """
    try:
        return features.parse(constraint).admits(node_features)
    except ValueError:
        return False


# ---------------------------------------------------------------- CPUs


def share(job: Job, part: PartitionView) -> int:
    """How many jobs may share each of ``job``'s CPUs in ``part``; 0 if it keeps them.

    Slurm's ``_get_job_node_req``: OverSubscribe=FORCE shares every job's CPUs,
    YES those of jobs that ask (``--oversubscribe``). Whole-node jobs never share.
    """
    if job.exclusive or part.exclusive:
        return 0
    if part.force or (part.max_share > 1 and job.oversubscribe):
        return part.max_share
    return 0


# ---------------------------------------------------------------- GRES


@lru_cache(maxsize=4096)
def gres_request(text: str) -> Gres:
    """A job's ``--gres`` as (name, type, count) items; ValueError if malformed."""
    return gres_syntax.parse_request(text)


@lru_cache(maxsize=1024)
def node_gres(text: str) -> Gres:
    """A node's configured ``Gres=``; () if malformed (the configuration check reports it)."""
    try:
        return gres_syntax.parse_node(text)
    except ValueError:
        return ()


def gres_fit(request: Gres, free: Gres) -> Gres | None:
    """The GRES ``request`` takes from ``free`` on one node, or None if they do not fit.

    A typed item takes its type; an untyped one takes any type of its name,
    in configuration order, and may spread over several types. A name shared
    in per-GPU pools (types ``<gpu type>#<index>``, see ``controller.gpushare``)
    takes from one pool of the GPU type asked, if any: the fullest that fits,
    so that shares pack onto GPUs already shared.
    """
    if not request:
        return ()
    left = {(name, kind): count for name, kind, count in free}
    pooled = {name for name, kind, _ in free if "#" in kind}
    for name, kind, count in request:
        if name in pooled:
            fits = [
                (n, k)
                for n, k in left
                if n == name and left[n, k] >= count and (not kind or k.split("#")[0] == kind)
            ]
            if not fits:
                return None
            best = min(fits, key=lambda key: left[key])
            left[best] -= count
        elif kind:
            if left.get((name, kind), 0) < count:
                return None
            left[name, kind] -= count
    for name, kind, count in request:
        if kind or name in pooled:
            continue
        for key in left:
            if key[0] == name and count:
                took = min(left[key], count)
                left[key] -= took
                count -= took
        if count:
            return None
    taken = ((name, kind, count - left[name, kind]) for name, kind, count in free)
    return tuple(item for item in taken if item[2] > 0)


def gres_left(total: Gres, used: Mapping[tuple[str, str | None], int]) -> Gres:
    """What is free of a node's ``total`` given ``used`` per (name, type).

    A type of None is use of "any type" (a job whose allocation names no
    type): it is taken from the node's types in configuration order, as
    ``gres_fit`` would have placed it.
    """
    free = {(name, kind): count - used.get((name, kind), 0) for name, kind, count in total}
    for (name, kind), count in used.items():
        if kind is not None:
            continue
        for key, left in free.items():
            if key[0] == name and count > 0 and left > 0:
                took = min(left, count)
                free[key] = left - took
                count -= took
    return tuple((name, kind, max(count, 0)) for (name, kind), count in free.items())


# ---------------------------------------------------------------- one node


@dataclass(frozen=True, slots=True)
class Fit:
    """What a job gets on one node."""

    cpus: int
    memory: int  # MiB
    gres: Gres
    used: int = 0  # of ``cpus``, those its tasks may use (core/threads.py); 0: all


def node_fits(
    job: Job,
    part: PartitionView,
    node: NodeView,
    cpus: int,
    *,
    stacking: bool = False,
    gpu: GpuAsk | None = None,
    gpus: int = 0,
    also: Gres = (),
) -> Fit | None:
    """What ``job`` gets on ``node`` if it can run there now with ``cpus`` CPUs, else None.

    ``gpu`` is the job's GPU request beyond a plain --gres (``gpus.ask``), and
    ``gpus`` the GPUs dealt to this node under it (``also``: of its further totals'
    types, ``("gpu", type, count)`` each): CPUs and memory follow the
    node's GPUs, and --gres-flags=enforce-binding wants its CPUs near them.
    Admission asks "can it *ever* fit?" by passing nodes that are empty and
    up. Features are the caller's business (they concern the whole job).
    """
    if not node.usable or job.sockets_per_node > node.sockets:
        return None
    room = socket_room(job, node)
    if room == 0:
        return None
    if job.ntasks_per_socket and cpus > socket_tasks(job, node, job.exclusive or part.exclusive):
        return None
    if gpu is not None:
        return _gpu_fits(job, part, node, cpus, stacking, gpu, gpus, also)
    exclusive = job.exclusive or part.exclusive
    if exclusive:
        if not node.idle:
            return None
        cpus = node.cpus
    else:
        if node.unit != 1:  # whole cores (CR_Core); one CPU at a time holds what it asks
            cpus = threads.held(cpus, node.unit, job.threads_per_core)
        if cpus > node.cpus or cpus > cpus_free(node, part.name, share(job, part), stacking):
            return None
        if part.max_cpus_per_node is not None and cpus > part.max_cpus_per_node:
            return None
        if room is not None and cpus > room:
            return None
    memory = _memory_here(job, part, node, cpus)
    if memory is None:
        return None
    taken: Gres = ()
    if job.gres:
        try:
            fit = gres_fit(gres_request(job.gres), node.gres)
        except ValueError:
            return None
        if fit is None:
            return None
        taken = fit
    # A whole node comes with all its GRES (sbatch --exclusive).
    kept = tuple(g for g in node.gres if g[2]) if exclusive else taken
    used = cpus if node.unit == 1 else threads.usable(cpus, node.unit, job.threads_per_core)
    return Fit(cpus, memory, kept, used)


#: ``node_fits`` with the job, partition and request bound: what a node gives ``cpus``.
NodeFit = Callable[[NodeView, int], Fit | None]


def fitter(
    job: Job, part: PartitionView, *, stacking: bool = False, gpu: GpuAsk | None = None
) -> NodeFit:
    """``node_fits(job, part, node, cpus, stacking=stacking, gpu=gpu)`` as a function of
    the node and CPUs, for placement's walks over many nodes with one request.

    A plain request (no GPUs, GRES, sockets, cores per socket, tasks per socket, whole
    node or shared CPUs: every trace replay's one-CPU tasks) gets ``_plain_fits``, which
    decides whether those checks matter once, not per node; any other, ``node_fits``.
    """
    general: NodeFit = partial(node_fits, job, part, stacking=stacking, gpu=gpu)
    if (
        gpu is not None
        or job.gres
        or job.exclusive
        or part.exclusive
        or share(job, part)
        or job.ntasks_per_socket
        or job.sockets_per_node > 1
        or job.cores_per_socket > 1
    ):
        return general
    return partial(_plain_fits, job, part, general)


def _plain_fits(
    job: Job, part: PartitionView, general: NodeFit, node: NodeView, cpus: int
) -> Fit | None:
    """``node_fits`` for a plain request (``fitter``), with the same answer on every node.

    Why it is the same: for such a request ``node_fits`` skips its GPU, GRES,
    tasks-per-socket and whole-node branches, and ``socket_room`` is None (neither
    sockets nor cores per socket above one). On a node that allocates one CPU at a
    time and has no sharing jobs (else: ``general``), ``threads.held`` is skipped,
    ``cpus_free`` without a share is the node's free CPUs, and its ``used`` is
    ``cpus``; what is left are the checks below, in the same order, and the same
    memory. ``Fit`` is frozen, so equal ones are shared (``_plain_fit``).
    """
    if node.unit != 1 or node.shared:
        return general(node, cpus)
    if not node.usable or job.sockets_per_node > node.sockets:
        return None
    if cpus > node.cpus or cpus > node.free_cpus:
        return None
    if part.max_cpus_per_node is not None and cpus > part.max_cpus_per_node:
        return None
    memory = _memory_here(job, part, node, cpus)
    if memory is None:
        return None
    return _plain_fit(cpus, memory)


@lru_cache(maxsize=4096)
def _plain_fit(cpus: int, memory: int) -> Fit:
    """What a plain request gets on a node (``_plain_fits``): all its CPUs usable, no GRES."""
    return Fit(cpus, memory, (), cpus)


def _memory_here(
    job: Job,
    part: PartitionView,
    node: NodeView,
    cpus: int,
    gpus: int = 0,
    mem_per_gpu: int | None = None,
) -> int | None:
    """The MiB ``job`` takes on ``node`` with ``cpus`` CPUs and ``gpus`` GPUs
    (``mem_per_node``), None where the node has not so much free or MaxMemPerNode
    is less."""
    memory = mem_per_node(job, part, cpus, node.real_memory, gpus, mem_per_gpu)
    if memory > node.real_memory or memory > node.free_memory:
        return None
    if part.max_mem_per_node and memory > part.max_mem_per_node:
        return None
    return memory


def socket_room(job: Job, node: NodeView) -> int | None:
    """The free CPUs ``job`` may use on ``node`` when it asks for sockets per node or
    cores per socket above one: those of the sockets with at least its cores per
    socket free, 0 when fewer sockets than it asks for have them (``cpupick.socket_room``);
    None when it asks for neither."""
    if job.sockets_per_node <= 1 and job.cores_per_socket <= 1:
        return None
    free = ~node.busy_ids & ((1 << node.cpus) - 1)
    count, mask = cpupick.socket_room(
        free, node.cpus, node.sockets, node.unit, job.cores_per_socket
    )
    if count < max(job.sockets_per_node, 1):
        return 0
    return (free & mask).bit_count()


def socket_tasks(job: Job, node: NodeView, whole: bool) -> int:
    """The CPUs of the tasks ``job`` may have on ``node`` under --ntasks-per-socket
    (``taskspersocket.room``): of its free cores, or of all of them where it takes the
    whole node."""
    every = (1 << node.cpus) - 1
    free = every if whole else ~node.busy_ids & every
    cpt = max(job.cpus_per_task, 1)
    tasks = taskspersocket.room(
        free, node.cpus, node.sockets, node.unit, cpt, job.ntasks_per_socket
    )
    return tasks * cpt


def _cpus_here(job: Job, part: PartitionView, node: NodeView, cpus: int, stacking: bool) -> int:
    """The CPUs ``job`` takes on ``node`` for a need of ``cpus``, 0 when they are not
    free: whole cores, or the whole node for an exclusive job."""
    if job.exclusive or part.exclusive:
        return node.cpus if node.idle else 0
    cpus = threads.held(cpus, node.unit, job.threads_per_core)  # whole cores (CR_Core)
    if cpus > node.cpus or cpus > cpus_free(node, part.name, share(job, part), stacking):
        return 0
    if part.max_cpus_per_node is not None and cpus > part.max_cpus_per_node:
        return 0
    return cpus


def _gpu_fits(
    job: Job,
    part: PartitionView,
    node: NodeView,
    cpus: int,
    stacking: bool,
    gpu: GpuAsk,
    gpus: int,
    also: Gres,
) -> Fit | None:
    """``node_fits`` under a GPU request: the node's GPUs (``gpu.per_node`` plus the
    ``gpus`` dealt here and ``also``) bring their memory, and those ``gpu.cpu_gpus``
    counts their CPUs."""
    dealt = gpus + sum(count for _, _, count in also)
    least = gpu.cpu_gpus(dealt) * gpu.cpus_per_gpu
    cpus = _cpus_here(job, part, node, max(cpus, least, 1), stacking)
    if not cpus:
        return None
    if gpu.per_socket:  # per socket of the job's CPUs where no GPU's cores are known
        here = gpusockets.on_node(
            gpu,
            node,
            cpus,
            job.cpus_per_task,
            cpupick.method_of(job.distribution),
            job.num_tasks <= 1 and cpus <= job.cpus_per_task,
            job.ntasks_per_socket,
        )
        if here is None:
            return None
        gpu = here
    on_node = gpu.per_node + dealt
    memory = _memory_here(job, part, node, cpus, on_node, gpu.mem_per_gpu)
    if memory is None:
        return None
    taken = gres_fit(gpu.request(gpus, also), node.gres)
    if taken is None:
        return None
    if gpu.enforce and enforced_gpus(node, taken, cpus) is None:
        return None
    spread = gpusockets.alone(gpu) and socketspread.knows_cores(node, gpu.kind)
    if gpu.per_socket and not spread and gpu_indices(node, taken, sockets=gpu.sockets) is None:
        return None
    if job.exclusive or part.exclusive:
        taken = tuple(g for g in node.gres if g[2])
    return Fit(cpus, memory, taken, threads.usable(cpus, node.unit, job.threads_per_core))
