"""GPU and CPU binding: which GPUs and CPUs a starting job gets on each node.

The core's plan says how many GPUs of which type a job takes on each node; the
indices, the CPUs near them and the environment of GPU shares are chosen as
the store commits the start, from what ``Holdings`` says is taken. Pure
functions of the holdings and the configuration, apart from the store, so the
rules that pick devices are read and tested without the ledger around them.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller import gpuaffinity, gpushare
from controller.admission import Capacity
from controller.holdings import Holdings
from controller.model import Job, NodeRuntime
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError


def gpu_indices(
    holdings: Holdings,
    capacity: Capacity,
    nodes: tuple[str, ...],
    gres: tuple[tuple[tuple[str, str, int], ...], ...],
) -> tuple[tuple[int, ...], ...] | None:
    """The lowest free GPU indices of each allocated type on each node (numbered as
    ``Capacity.gpus`` says), passing over GPUs held whole or in shared use; None if a
    node lacks them, or a share is asked of a GPU held whole (the core's plan does
    not couple the two within one pass)."""
    if not gres:
        return ()
    out = []
    for name, items in zip(nodes, gres, strict=True):
        taken = set(holdings.gpus(name))
        shared = gpushare.shared_gpus((n, k, c) for (n, k), c in holdings.gres(name).items())
        if gpushare.shared_gpus(items) & taken:
            return None
        numbered = capacity.gpus(name) if any(i[0] == "gpu" for i in items) else []
        chosen: list[int] = []
        for item_name, kind, count in items:
            if item_name != "gpu":
                continue
            free = [i for k, i in numbered if k == kind and i not in taken | shared]
            if len(free) < count:
                return None
            chosen += free[:count]
            taken.update(free[:count])
        out.append(tuple(sorted(chosen)))
    return tuple(out) if any(out) else ()


def cpus_near(
    holdings: Holdings,
    capacity: Capacity,
    conf: SlurmConfig,
    runtime: Mapping[str, NodeRuntime],
    nodes: tuple[str, ...],
    cpus: tuple[int, ...],
    gpus: tuple[tuple[int, ...], ...],
) -> tuple[tuple[int, ...], ...]:
    """The CPUs to pin a starting job to on each node, near its GPUs where gres.conf
    says which cores they are close to, else where the node's probe found them
    (``gpuaffinity``); () when on none."""
    if not gpus:
        return ()
    out = []
    for name, count, ids in zip(nodes, cpus, gpus, strict=True):
        near = (capacity.gpu_cpus(name) or dict(runtime[name].gpu_cpus)) if ids else {}
        pinned = holdings.pinned(name)
        total = conf.node(name).cpus
        out.append(gpuaffinity.near_cpus(near, ids, count, total, pinned) if near else ())
    return tuple(out) if any(out) else ()


def shares(capacity: Capacity, job: Job, index: int) -> gpushare.Shares:
    """``job``'s GPU shares on ``job.nodes[index]`` (none: empty)."""
    items = job.gres_alloc[index] if job.gres_alloc else ()
    if not gpushare.shared_gpus(items):
        return gpushare.Shares()
    node = capacity.nodes.get(job.nodes[index])
    totals = {(n, k): c for n, k, c in node.gres} if node is not None else {}
    return gpushare.shares(items, totals)


def check_fencing(
    conf: SlurmConfig, capacity: Capacity, runtime: Mapping[str, NodeRuntime], job: Job
) -> None:
    """Refuse a fraction by memory when the site demands it be enforced and no
    node of the job's partitions that has registered can (none runs MPS)."""
    if not gpushare.fenced_only(conf) or not gpushare.asks_fraction(job.gres):
        return
    names = {n for p in job.partitions for n in capacity.partitions[p].nodes}
    seen = [runtime[n] for n in names if runtime[n].ever_registered]
    if seen and not any(node.mps for node in seen):
        raise SlurmError(
            errors.ESLURM_INVALID_GRES,
            "GPU memory fractions cannot be enforced: no node of partition "
            f"{','.join(job.partitions)} runs MPS (SchedulerParameters=enforce_gpu_fractions)",
        )
