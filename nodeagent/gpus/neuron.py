"""AWS Trainium and Inferentia (Neuron devices), as slurmd's gpu/nrt finds them.

The devices are the ``/dev/neuronN`` files. For each, the Neuron driver's
sysfs directory ``/sys/devices/virtual/neuron_device/neuronN`` gives, when
present: ``core_count`` (NeuronCores; 2 when absent), the name in
``info/architecture/device_name`` (slurmd's type; none means an untyped GPU),
``connected_devices`` (the Neuron devices it links to: Slurm's Links, 1 per
connected device) and, through ``device``, the PCI address and local CPUs.
"""

from __future__ import annotations

import logging
import os
import re

from nodeagent.gpus._sysfs import device_cpus, pci_slot, read_int, read_text
from nodeagent.gpus.model import GpuDevice, slurm_type

__all__ = ["DEFAULT_CORES", "probe_neuron"]

log = logging.getLogger(__name__)

DEFAULT_CORES = 2

_DEVICE = re.compile(r"neuron(\d+)")


def _links(text: str | None, index: int, numbers: list[int]) -> tuple[int, ...]:
    if text is None:
        return ()
    peers = set()
    for token in text.replace(",", " ").split():
        if token.isdigit():
            peers.add(int(token))
    return tuple(-1 if n == index else (1 if n in peers else 0) for n in numbers)


def probe_neuron(dev: str = "/dev", sysfs: str = "/sys") -> list[GpuDevice]:
    """The Neuron devices of the host ([] if none)."""
    try:
        names = os.listdir(dev)
    except OSError:
        return []
    numbers = sorted(int(m.group(1)) for name in names if (m := _DEVICE.fullmatch(name)))
    devices = []
    for number in numbers:
        base = os.path.join(sysfs, "devices", "virtual", "neuron_device", f"neuron{number}")
        name = read_text(os.path.join(base, "info", "architecture", "device_name")) or ""
        pci = os.path.join(base, "device")
        has_pci = os.path.isdir(pci)
        cores = read_int(os.path.join(base, "core_count"))
        devices.append(
            GpuDevice(
                vendor="aws",
                index=number,
                name=name,
                type=slurm_type(name),
                uuid="",
                memory_mib=0,
                pci_bus_id=pci_slot(pci) if has_pci else "",
                cpus=device_cpus(pci, sysfs) if has_pci else (),
                device_file=f"/dev/neuron{number}",
                links=_links(read_text(os.path.join(base, "connected_devices")), number, numbers),
                cores=cores if cores and cores > 0 else DEFAULT_CORES,
            )
        )
    return devices
