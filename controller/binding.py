"""GPU and CPU binding: which GPUs and CPUs a starting job gets on each node.

The core's plan names a start's GPUs by index and the CPUs near them
(``core/devices.py``, which the store's commit also re-checks them with); what is
left here is the GPU shares a launch carries and the check that a fraction by
memory can be enforced. Pure functions of the holdings and the configuration, apart
from the store, so the rules are read and tested without the ledger around them.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller import gpushare
from controller.admission import Capacity
from controller.model import Job, NodeRuntime
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError


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
