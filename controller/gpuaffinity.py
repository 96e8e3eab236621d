"""CPUs near a job's GPUs, where gres.conf says which cores each GPU is close to.

gres.conf's ``Cores=`` on a GPU line names the cores (usually one socket's)
that reach the GPU without crossing the inter-socket link. A job that was
given GPUs with such cores gets its CPUs there first, then on the node's
other free CPUs, and the node agent pins its batch script and step tasks to
them (``sched_setaffinity``). gres.conf's ``Links=`` says which GPUs are joined
by NVLink; the core gives a job GPUs linked among themselves first
(``controller/core/gpulinks.py``). Cores are numbered as Slurm numbers them: core
``c`` holds CPUs ``c*ThreadsPerCore .. c*ThreadsPerCore+ThreadsPerCore-1``.

Every job is given CPU ids (``controller/core/devices.py``): a job with GPUs
near known cores takes the free ones near them first, then the other free
ones, as every other job does (Slurm's distribution over sockets,
``controller/core/cpupick.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core.gpulinks import Links
from corral import arrayspec
from corral import gres as gres_syntax
from corral.config import ConfigError, SlurmConfig
from corral.gpunumbers import device_number

__all__ = ["gpu_cpus", "gpu_links", "gpu_sockets", "gres_with_sockets"]


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


def gpu_links(conf: SlurmConfig, node: str) -> Links:
    """The links gres.conf's ``Links=`` gives between ``node``'s GPUs, as (GPU a, GPU
    b, count) with a < b by GPU number. A Links list names the other GPUs by their
    place among the node's GPU devices (gres.conf(5): "device number 0 would be in
    the first position"); where two lines disagree on a pair, the larger count."""
    if conf.gres_conf is None:
        return ()
    try:
        devices = conf.gres_conf.devices_for(node)
    except ConfigError:
        return ()
    gpus = [d for d in devices if d.name == "gpu" and d.files]
    numbers = [device_number(d.files[0], d.index) for d in gpus]
    pairs: dict[tuple[int, int], int] = {}
    for mine, device in zip(numbers, gpus, strict=True):
        for place, count in enumerate(device.links or ()):
            if count > 0 and place < len(numbers) and numbers[place] != mine:
                key = (min(mine, numbers[place]), max(mine, numbers[place]))
                pairs[key] = max(pairs.get(key, 0), count)
    return tuple((a, b, count) for (a, b), count in sorted(pairs.items()))


def _probed_sockets(found: str) -> dict[str, str]:
    """``gpu:h100:8(S:0-1)`` (what an agent probed) as {"h100": "(S:0-1)"}."""
    out = {}
    for item in found.split(","):
        head, mark, tail = item.partition("(S:")
        if mark and head.startswith("gpu"):
            fields = head.split(":")
            out[fields[1] if len(fields) == 3 else ""] = f"(S:{tail}"
    return out


def gpu_sockets(conf: SlurmConfig, node: str) -> dict[str, str]:
    """Per GPU type of ``node`` ("" for all), the sockets gres.conf's ``Cores=`` put its
    GPUs near, as ``(S:0-1)`` (a core's socket by CoresPerSocket)."""
    if conf.gres_conf is None:
        return {}
    try:
        devices = conf.gres_conf.devices_for(node)
    except ConfigError:
        return {}
    cores_per_socket = max(conf.node(node).cores_per_socket, 1)
    by_type: dict[str, set[int]] = {}
    for d in devices:
        if d.name == "gpu" and d.cores:
            for kind in {d.type, ""}:
                by_type.setdefault(kind, set()).update(c // cores_per_socket for c in d.cores)
    return {kind: f"(S:{arrayspec.compress(sorted(s))})" for kind, s in by_type.items()}


def gres_with_sockets(text: str, sockets: Mapping[str, str], found: str = "") -> str:
    """A node's ``Gres=`` ``text`` as ``scontrol show node`` prints it: each GPU item
    with the sockets its GPUs are near (``gpu:h100:8(S:0-1)``), from ``sockets``
    (``gpu_sockets``) or else from what the node's agent probed (``found``)."""
    where = sockets or _probed_sockets(found)
    out = []
    for raw in filter(None, text.split(",")):
        try:
            ((name, kind, _),) = gres_syntax.parse_node(raw)
        except ValueError:
            out.append(raw)
            continue
        out.append(raw + where.get(kind, "") if name == "gpu" and "(" not in raw else raw)
    return ",".join(out)
