"""How a node's GPUs are numbered, as the controller allocates them and every
binding variable (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES) names them.

With gres.conf ``File=`` lines a GPU's number is its device file's
(``/dev/nvidia3`` is 3), in the file's order; otherwise the node's GPUs are
0..N-1 in the order its ``Gres=`` lists their types. The controller and the
node agents must agree, so both use this module.
"""

from __future__ import annotations

from corral import gres as gres_syntax
from corral.config import SlurmConfig

__all__ = ["device_number", "gpu_numbering"]


def device_number(path: str, fallback: int) -> int:
    """The number a device file ends with (``/dev/nvidia3``: 3), else ``fallback``."""
    digits = len(path) - len(path.rstrip("0123456789"))
    return int(path[-digits:]) if digits else fallback


def gpu_numbering(conf: SlurmConfig, name: str) -> list[tuple[str, int]]:
    """Node ``name``'s GPUs as (type, index), in allocation order."""
    if conf.gres_conf is not None:
        devices = [d for d in conf.gres_conf.devices_for(name) if d.name == "gpu" and d.files]
        if devices:
            return [(d.type, device_number(d.files[0], d.index)) for d in devices]
    numbered: list[tuple[str, int]] = []
    try:
        items = gres_syntax.parse_node(conf.node(name).gres)
    except ValueError:
        return []
    for _, kind, count in (item for item in items if item[0] == "gpu"):
        numbered += [(kind, i) for i in range(len(numbered), len(numbered) + count)]
    return numbered
