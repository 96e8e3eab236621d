"""Probed GPUs matched to the controller's numbering: MIG instances bound by UUID,
and the device files isolation guards when gres.conf names none.

The controller allocates MIG instances as typed GPUs (``gpu:1g.10gb``) by the
node's GPU numbering (``corral.gpunumbers``) and sends their indices. CUDA
cannot address a MIG instance by an index: it takes the instance's UUID
(``MIG-...``). The agent, which probed the instances, maps each index to its
instance: the k-th GPU of a type in the numbering is the k-th probed record of
that type (one per whole GPU, or per MIG instance of a GPU in MIG mode, in
the probe's order, types matched as ``normalize_type`` matches them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from nodeagent.gpus.model import GpuDevice, normalize_type

__all__ = ["bind_mig", "mig_uuids", "probed_cpus", "probed_files", "probed_links"]


def _matched(
    devices: Iterable[GpuDevice], numbering: Sequence[tuple[str, int]]
) -> dict[int, tuple[tuple[str, ...], str, tuple[int, ...]]]:
    """Each GPU index of ``numbering`` -> its probed record: (device files, MIG UUID or
    "" for a whole GPU, the CPUs near it)."""
    configured = [kind for kind, _ in numbering if kind]
    records: dict[str, list[tuple[tuple[str, ...], str, tuple[int, ...]]]] = {}

    def add(detected: str, files: tuple[str, ...], uuid: str, cpus: tuple[int, ...]) -> None:
        kind = normalize_type(detected, configured) if configured else ""
        records.setdefault(kind, []).append((files, uuid, cpus))

    for device in devices:
        if device.mig_enabled and device.mig:
            for mig in device.mig:
                add(mig.type, mig.files or (device.device_file,), mig.uuid, device.cpus)
        else:
            add(device.type, (device.device_file,), "", device.cpus)
    out = {}
    seen: dict[str, int] = {}
    for kind, index in numbering:
        rank = seen.get(kind, 0)
        seen[kind] = rank + 1
        found = records.get(kind, [])
        if rank < len(found):
            out[index] = found[rank]
    return out


def mig_uuids(devices: Iterable[GpuDevice], numbering: Sequence[tuple[str, int]]) -> dict[int, str]:
    """Each MIG instance's GPU index in ``numbering`` -> its UUID (whole GPUs absent)."""
    return {i: uuid for i, (_, uuid, _) in _matched(devices, numbering).items() if uuid}


def probed_files(
    devices: Iterable[GpuDevice], numbering: Sequence[tuple[str, int]]
) -> list[tuple[int, tuple[str, ...]]]:
    """The device files of each GPU index, as the probe found them (a MIG instance's:
    its GPU's and its capability files): what isolation guards when gres.conf has
    no ``File=`` lines."""
    return [(i, files) for i, (files, _, _) in sorted(_matched(devices, numbering).items())]


def probed_cpus(
    devices: Iterable[GpuDevice], numbering: Sequence[tuple[str, int]]
) -> list[tuple[int, tuple[int, ...]]]:
    """The CPUs near each GPU index, as the probe found them (its NUMA node's): what
    the controller pins a job to when gres.conf gives no ``Cores=``."""
    matched = sorted(_matched(devices, numbering).items())
    return [(i, cpus) for i, (_, _, cpus) in matched if cpus]


def probed_links(
    devices: Sequence[GpuDevice], numbering: Sequence[tuple[str, int]]
) -> list[tuple[int, int, int]]:
    """The NVLinks the probe found between whole GPUs, as (GPU a, GPU b, lanes) by the
    controller's numbering, a < b: what it gives a job's GPUs by when gres.conf has no
    ``Links=``. A device's ``links`` name the others by their place in the probe."""
    index = {
        files[0]: i for i, (files, uuid, _) in _matched(devices, numbering).items() if not uuid
    }
    pairs: dict[tuple[int, int], int] = {}
    for device in devices:
        mine = index.get(device.device_file)
        for place, count in enumerate(device.links):
            other = index.get(devices[place].device_file) if place < len(devices) else None
            if mine is None or other is None or other == mine or count <= 0:
                continue
            key = (min(mine, other), max(mine, other))
            pairs[key] = max(pairs.get(key, 0), count)
    return [(a, b, count) for (a, b), count in sorted(pairs.items())]


def bind_mig(env: dict[str, str], uuids: Mapping[int, str]) -> None:
    """Name the MIG instances in ``env``'s CUDA_VISIBLE_DEVICES by UUID."""
    values = env.get("CUDA_VISIBLE_DEVICES", "").split(",")
    if not uuids or not all(v.isdigit() for v in values):
        return
    if any(int(v) in uuids for v in values):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(uuids.get(int(v), v) for v in values)
