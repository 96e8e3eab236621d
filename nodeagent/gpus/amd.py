"""AMD GPUs from sysfs (what slurmd's gpu/rsmi learns through ROCm SMI).

Each DRM card (``/sys/class/drm/cardN``) whose PCI device has vendor 0x1002
and a display class, in PCI bus order, with from its ``device`` directory:

* the name: ``product_name`` (the board's FRU name, e.g. "AMD Instinct
  MI250X"), else ``AMD GPU 0x<device id>``; ROCm SMI's brand can differ, so
  configure the type (``Gres=gpu:mi250x:8``) rather than rely on the name;
* ``mem_info_vram_total`` (bytes), ``unique_id`` (hex), the PCI address;
* the CPUs: ``local_cpulist``, else the CPUs of ``numa_node``;
* the render node (``drm/renderDN``): the device file ``/dev/dri/renderDN``.

Nothing is found without ``/dev/kfd`` (ROCm's compute interface), and a GPU
whose render node is missing from /dev is left out (logged). Links are
Slurm's placeholders for ROCm GPUs (-1 for the GPU itself, 0 elsewhere).
"""

from __future__ import annotations

import logging
import os

from nodeagent.gpus._sysfs import (
    MIB,
    device_cpus,
    drm_devices,
    empty_links,
    product_name,
    read_int,
    read_text,
    with_render_nodes,
)
from nodeagent.gpus.model import GpuDevice, slurm_type

__all__ = ["VENDOR", "probe_amd"]

log = logging.getLogger(__name__)

VENDOR = 0x1002


def probe_amd(sysfs: str = "/sys", dev: str = "/dev") -> list[GpuDevice]:
    """The AMD GPUs of the host ([] if none, or no ``/dev/kfd``)."""
    found = drm_devices(sysfs, VENDOR)
    if not found:
        return []
    if not os.path.exists(os.path.join(dev, "kfd")):
        log.warning("AMD GPUs present but no %s/kfd: none usable for compute", dev)
        return []
    usable = with_render_nodes(found, dev, "AMD")
    devices = []
    for index, (_, device, bus_id, render) in enumerate(usable):
        name = product_name(device, "AMD")
        vram = read_int(os.path.join(device, "mem_info_vram_total")) or 0
        devices.append(
            GpuDevice(
                vendor="amd",
                index=index,
                name=name,
                type=slurm_type(name),
                uuid=(read_text(os.path.join(device, "unique_id")) or "").lower(),
                memory_mib=vram // MIB,
                pci_bus_id=bus_id,
                cpus=device_cpus(device, sysfs),
                device_file=f"/dev/dri/{render}",
                links=empty_links(index, len(usable)),
            )
        )
    return devices
