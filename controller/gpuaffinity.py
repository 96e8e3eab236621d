"""CPUs near a job's GPUs, where gres.conf says which cores each GPU is close to.

gres.conf's ``Cores=`` on a GPU line names the cores (usually one socket's)
that reach the GPU without crossing the inter-socket link. A job that was
given GPUs with such cores gets its CPUs there first, then on the node's
other free CPUs, and the node agent pins its batch script and step tasks to
them (``sched_setaffinity``). Cores are numbered as Slurm numbers them: core
``c`` holds CPUs ``c*ThreadsPerCore .. c*ThreadsPerCore+ThreadsPerCore-1``.

CPUs are otherwise counted, not named: a job without GPUs near known cores is
not pinned and may run on any CPU, so pinning places GPU jobs well without
confining anyone. The store keeps which CPUs pinned jobs hold, so two GPU
jobs are not pinned to the same CPUs while others are free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from corral.config import ConfigError, SlurmConfig
from corral.gpunumbers import device_number

__all__ = ["gpu_cpus", "near_cpus"]


def gpu_cpus(conf: SlurmConfig, node: str) -> dict[int, tuple[int, ...]]:
    """Each GPU index of ``node`` whose gres.conf line gives ``Cores=`` -> its CPUs."""
    if conf.gres_conf is None:
        return {}
    try:
        devices = conf.gres_conf.devices_for(node)
    except ConfigError:
        return {}  # the configuration check reports it
    threads = max(conf.node(node).threads_per_core, 1)
    return {
        device_number(d.files[0], d.index): tuple(
            c * threads + t for c in d.cores for t in range(threads)
        )
        for d in devices
        if d.name == "gpu" and d.files and d.cores
    }


def near_cpus(
    near: Mapping[int, tuple[int, ...]],
    gpus: Iterable[int],
    count: int,
    cpus: int,
    pinned: set[int],
) -> tuple[int, ...]:
    """``count`` CPUs of a node of ``cpus`` for a job given ``gpus``: free ones near
    them first, lowest first, then the other free ones; () when none of the GPUs has
    known cores, or the free CPUs are too few (the job then runs unpinned)."""
    close = sorted({c for g in gpus for c in near.get(g, ()) if c < cpus} - pinned)
    if not close and not any(g in near for g in gpus):
        return ()
    rest = [c for c in range(cpus) if c not in pinned and c not in set(close)]
    chosen = (close + rest)[:count]
    return tuple(sorted(chosen)) if len(chosen) == count else ()
