"""MIG instances bound by UUID: what CUDA_VISIBLE_DEVICES must name for them.

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

__all__ = ["bind_mig", "mig_uuids"]


def mig_uuids(devices: Iterable[GpuDevice], numbering: Sequence[tuple[str, int]]) -> dict[int, str]:
    """Each MIG instance's GPU index in ``numbering`` -> its UUID (whole GPUs absent)."""
    configured = [kind for kind, _ in numbering if kind]
    records: dict[str, list[str]] = {}  # type -> per record, its MIG UUID or ""

    def add(detected: str, uuid: str) -> None:
        kind = normalize_type(detected, configured) if configured else ""
        records.setdefault(kind, []).append(uuid)

    for device in devices:
        if device.mig_enabled and device.mig:
            for mig in device.mig:
                add(mig.type, mig.uuid)
        else:
            add(device.type, "")
    out: dict[int, str] = {}
    seen: dict[str, int] = {}
    for kind, index in numbering:
        rank = seen.get(kind, 0)
        seen[kind] = rank + 1
        uuids = records.get(kind, [])
        if rank < len(uuids) and uuids[rank]:
            out[index] = uuids[rank]
    return out


def bind_mig(env: dict[str, str], uuids: Mapping[int, str]) -> None:
    """Name the MIG instances in ``env``'s CUDA_VISIBLE_DEVICES by UUID."""
    values = env.get("CUDA_VISIBLE_DEVICES", "").split(",")
    if not uuids or not all(v.isdigit() for v in values):
        return
    if any(int(v) in uuids for v in values):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(uuids.get(int(v), v) for v in values)
