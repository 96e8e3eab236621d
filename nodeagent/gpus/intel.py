"""Intel GPUs from sysfs (what slurmd's gpu/oneapi learns through Level Zero).

Each DRM card (``/sys/class/drm/cardN``) whose PCI device has vendor 0x8086
and a display class (0x03xxxx), in PCI bus order, whose render node exists in
/dev: the device file is ``/dev/dri/renderDN`` (as slurmd's), the CPUs are the
device's ``local_cpulist`` (else its NUMA node's), the memory is the card's
``lmem_total_bytes`` or ``prelim_lmem_total_bytes`` when the driver has one
(else 0). sysfs has no marketing name: the name is ``product_name`` when
present, else ``Intel GPU 0x<device id>`` (Level Zero's "Intel(R) Data Center
GPU Max 1550" is not known here), so configure the type in slurm.conf. Links
are Slurm's placeholders (-1 for the GPU itself, 0 elsewhere).
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
    with_render_nodes,
)
from nodeagent.gpus.model import GpuDevice, slurm_type

__all__ = ["VENDOR", "probe_intel"]

log = logging.getLogger(__name__)

VENDOR = 0x8086

_MEMORY_FILES = ("lmem_total_bytes", "prelim_lmem_total_bytes")


def probe_intel(sysfs: str = "/sys", dev: str = "/dev") -> list[GpuDevice]:
    """The Intel GPUs of the host ([] if none)."""
    usable = with_render_nodes(drm_devices(sysfs, VENDOR), dev, "Intel")
    devices = []
    for index, (card, device, bus_id, render) in enumerate(usable):
        name = product_name(device, "Intel")
        memory = 0
        for file_name in _MEMORY_FILES:
            size = read_int(os.path.join(card, file_name))
            if size:
                memory = size // MIB
                break
        devices.append(
            GpuDevice(
                vendor="intel",
                index=index,
                name=name,
                type=slurm_type(name),
                uuid="",
                memory_mib=memory,
                pci_bus_id=bus_id,
                cpus=device_cpus(device, sysfs),
                device_file=f"/dev/dri/{render}",
                links=empty_links(index, len(usable)),
            )
        )
    return devices
