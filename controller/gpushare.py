"""Sharing a GPU: MPS shares, shards and fractions by memory, as per-GPU pools.

Three GRES share one GPU between jobs instead of giving it whole:

* ``mps``: a share of a GPU's compute through NVIDIA MPS (``--gres=mps:50``;
  a GPU usually counts 100). The job gets ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``
  and the node agent runs an MPS server on the GPU while shares are in use.
* ``shard``: time-sliced sharing with no fencing (``--gres=shard:2``).
* ``gpumem``: a fraction by memory (``--gres=gpumem:20G``, counted in bytes as
  every GRES count with a suffix), enforced through MPS's pinned device memory
  limit where the node runs MPS. With ``SchedulerParameters=enforce_gpu_fractions``
  only nodes that run MPS offer fractions, and a job no node could enforce is
  refused at submission.

A node's ``Gres=mps:200`` on two GPUs is split evenly, as Slurm splits it
(gres.conf ``Name=mps Count=.. File=..`` lines give a count per GPU instead).
Each GPU's part becomes its own pool, a GRES item whose type is
``<gpu type>#<gpu index>`` (``("mps", "a100#1", 100)``). The scheduling core
then needs only one rule (``request.gres_fit``): a request for a pooled name
takes from a single pool, the fullest one that fits, so fractions pack onto
GPUs already shared. What couples pools to whole GPUs is applied here, to the
free resources the core sees: a GPU given whole offers no shares, and a GPU
with shares in use is not free to be given whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.devices import pool_gpu, shared_gpus
from controller.jobenv import gpu_environment
from corral import gres as gres_syntax
from corral.config import SlurmConfig
from corral.gpunumbers import device_number, gpu_numbering

__all__ = [
    "SHARED",
    "Shares",
    "asks_fraction",
    "couple",
    "fenced_only",
    "pool_gpu",
    "pools",
    "shared_gpus",
    "shares",
    "unfenced",
]

Gres = tuple[tuple[str, str, int], ...]

#: The GRES that share a GPU rather than take it.
SHARED = ("mps", "shard", "gpumem")


def _per_file_counts(conf: SlurmConfig, node: str, name: str) -> dict[int, int]:
    if conf.gres_conf is None:
        return {}
    return {
        device_number(d.files[0], d.index): d.count
        for d in conf.gres_conf.devices_for(node)
        if d.name == name and d.files
    }


def pools(conf: SlurmConfig, node: str, items: Gres) -> Gres:
    """A node's configured GRES with each shared item split into per-GPU pools.

    A shared item on a node without GPUs stays a plain count.
    """
    gpus = gpu_numbering(conf, node)
    if not gpus or not any(name in SHARED for name, _, _ in items):
        return items
    out: list[tuple[str, str, int]] = []
    for name, kind, count in items:
        if name not in SHARED:
            out.append((name, kind, count))
            continue
        per_file = _per_file_counts(conf, node, name)
        for position, (gpu_type, index) in enumerate(gpus):
            if per_file:
                share = per_file.get(index, 0)
            else:  # an even split; the first GPUs take the remainder
                share = count // len(gpus) + (position < count % len(gpus))
            if share:
                out.append((name, f"{gpu_type}#{index}", share))
    return tuple(out)


def couple(free: Gres, whole: set[int], shared: set[int], gpus: list[tuple[str, int]]) -> Gres:
    """``free`` (a node's GRES less what jobs use) as the core may take it: no pools
    of the GPUs given ``whole``, and GPUs with ``shared`` use not free to give whole."""
    if not shared and not whole:
        return free
    busy: dict[str, int] = {}
    for gpu_type, index in gpus:
        if index in shared and index not in whole:
            busy[gpu_type] = busy.get(gpu_type, 0) + 1
    out = []
    for name, kind, count in free:
        gpu = pool_gpu(kind)
        if gpu is not None and gpu[1] in whole:
            count = 0
        elif name == "gpu":
            count = max(count - busy.get(kind, 0), 0)
        out.append((name, kind, count))
    return tuple(out)


def fenced_only(conf: SlurmConfig) -> bool:
    """Whether the site demands that fractions by memory be enforced
    (``SchedulerParameters=enforce_gpu_fractions``): then only nodes that run
    MPS offer them."""
    return conf.scheduler_param("enforce_gpu_fractions") is not None


def asks_fraction(gres: str) -> bool:
    """Whether a job's ``--gres`` asks for a fraction of a GPU by memory."""
    try:
        return any(name == "gpumem" for name, _, _ in gres_syntax.parse_request(gres))
    except ValueError:
        return False


def unfenced(free: Gres) -> Gres:
    """A node's free GRES without its fractions by memory (it cannot enforce them)."""
    return tuple((n, k, 0 if n == "gpumem" and "#" in k else c) for n, k, c in free)


@dataclass(frozen=True)
class Shares:
    """A job's shares of GPUs on one node: what its launch grants the node agent
    (``GpuGrant``: the fence admits these GPUs, MPS serves them) and what binds its
    programs to them (:meth:`environment`), from one computation so the two agree."""

    gpus: tuple[int, ...] = ()  # the GPUs shared, by the node's index
    mps_percentage: int = 0  # of the GPU's compute, under MPS; 0: none
    pinned_mib: int = 0  # MPS's pinned device memory limit; 0: none
    shards: int | None = None  # time slices; None: no shard

    def environment(self) -> dict[str, str]:
        """The GPU (global index, as for whole GPUs), the MPS thread percentage, the
        pinned memory limit (of CUDA's device 0: the one GPU the job sees, in MiB)
        and the shard count."""
        env: dict[str, str] = {}
        if self.mps_percentage:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(self.mps_percentage)
        if self.pinned_mib:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={self.pinned_mib}M"
        if self.shards is not None:
            env["SLURM_SHARDS_ON_NODE"] = str(self.shards)
        if self.gpus:  # the whole-GPU binding variables, but for the count of whole GPUs
            binding = gpu_environment(self.gpus)
            del binding["SLURM_GPUS_ON_NODE"]
            env.update(binding)
        return env


def shares(items: Gres, totals: Mapping[tuple[str, str], int]) -> Shares:
    """A job's shares on one node from its GRES there (``items``); ``totals``: each
    pool's size. An mps share's percentage is its part of the pool, and its memory
    limit its part of the GPU's memory where the node's ``gpumem`` gives it; a
    fraction by memory's limit is its size, and its percentage its part of the
    memory. Where a job holds both, the mps share's percentage and the fraction's
    limit win."""
    gpus: set[int] = set()
    mps_percentage = memory_percentage = mps_mib = memory_mib = 0
    shards: int | None = None
    for name, kind, count in items:
        gpu = pool_gpu(kind)
        if gpu is None or name not in SHARED:
            continue
        gpus.add(gpu[1])
        size = totals.get((name, kind), 0)
        if name == "mps" and size:
            mps_percentage = max(count * 100 // size, 1)
            memory = totals.get(("gpumem", kind), 0)  # the GPU's, where gpumem says it
            if memory and not mps_mib:
                mps_mib = max((memory * count // size) >> 20, 1)
        elif name == "gpumem":
            memory_mib = max(count >> 20, 1)
            if size and not memory_percentage:
                memory_percentage = max(count * 100 // size, 1)
        elif name == "shard":
            shards = count
    return Shares(
        gpus=tuple(sorted(gpus)),
        mps_percentage=mps_percentage or memory_percentage,
        pinned_mib=memory_mib or mps_mib,
        shards=shards,
    )
