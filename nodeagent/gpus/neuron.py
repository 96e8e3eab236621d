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
from collections.abc import Iterable

from corral import arrayspec
from nodeagent.gpus._sysfs import device_cpus, pci_slot, read_int, read_text
from nodeagent.gpus.model import GpuDevice, slurm_type

__all__ = ["DEFAULT_CORES", "NeuronBinding", "probe_neuron", "visible_cores"]

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


def visible_cores(devices: Iterable[int], sysfs: str = "/sys") -> str:
    """NEURON_RT_VISIBLE_CORES for a process given the Neuron ``devices``.

    The Neuron runtime numbers NeuronCores across the host device by device:
    device d's cores follow those of devices 0..d-1, each with its sysfs
    ``core_count`` (2 when absent). "" for no device.
    """
    wanted = set(devices)
    if not wanted:
        return ""
    cores: list[int] = []
    first = 0
    for number in range(max(wanted) + 1):
        base = os.path.join(sysfs, "devices", "virtual", "neuron_device", f"neuron{number}")
        count = read_int(os.path.join(base, "core_count"))
        count = count if count and count > 0 else DEFAULT_CORES
        if number in wanted:
            cores.extend(range(first, first + count))
        first += count
    return arrayspec.compress(cores)


class NeuronBinding:
    """NEURON_RT_VISIBLE_CORES for the jobs and steps of nodes whose accelerators are
    Neuron devices: the cores of the devices they were given."""

    def __init__(self, nodes: Iterable[str], sysfs: str = "/sys") -> None:
        self.nodes = frozenset(nodes)
        self.sysfs = sysfs

    def environment(self, node: str, devices: Iterable[int]) -> dict[str, str]:
        """The variable for a launch on ``node`` granted ``devices`` whole (its
        SLURM_JOB_GPUS or SLURM_STEP_GPUS); {} elsewhere or without devices."""
        if node not in self.nodes:
            return {}
        cores = visible_cores(list(devices), self.sysfs)
        return {"NEURON_RT_VISIBLE_CORES": cores} if cores else {}
