"""What a GPU probe finds, and Slurm's names and notations for it.

Type names follow slurmd's AutoDetect (``gpu_common_underscorify_tolower``):
the device's model name, lower-cased, with spaces made underscores, so
"NVIDIA H100 80GB HBM3" is ``nvidia_h100_80gb_hbm3`` and "Tesla V100-SXM2-16GB"
is ``tesla_v100-sxm2-16gb``. A MIG instance's type is the parent's type cut at
its first ``-`` plus ``_<slices>g.<GiB>gb`` (``nvidia_a100-sxm4-40gb`` → MIG
``nvidia_a100_1g.5gb``). Short types such as ``h100`` come from the
configuration: slurmd replaces a detected type by the configured type that is a
case-insensitive substring of it, longest configured type first
(``normalize_type``); slurm.conf's ``Gres=gpu:h100:8`` is what makes an
autodetected H100 a ``gpu:h100``.

CPU numbers here are the kernel's logical CPU ids (what NVML's affinity mask
and sysfs ``local_cpulist`` give); ``affinity_cores`` turns them into Slurm's
abstract core ids (gres.conf ``Cores=``) given the host's CPU placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from nodeagent.probe import CpuPlace

__all__ = [
    "GpuDevice",
    "GresRecord",
    "MigInstance",
    "Vendor",
    "affinity_cores",
    "format_gres",
    "format_ranges",
    "gres_records",
    "links_text",
    "mig_profile",
    "mig_type",
    "normalize_bus_id",
    "normalize_type",
    "parse_cpulist",
    "slurm_type",
]

Vendor = Literal["nvidia", "amd", "intel", "aws"]


@dataclass(frozen=True)
class MigInstance:
    """One MIG device (a compute instance inside a GPU instance) of a GPU."""

    index: int
    """MIG index on the parent GPU (NVML's ``nvmlDeviceGetMigDeviceHandleByIndex``)."""
    profile: str
    """``<slices>g.<GiB>gb``, e.g. ``1g.10gb``."""
    type: str
    """Slurm's type name, e.g. ``nvidia_h100_80gb_hbm3_1g.10gb``."""
    uuid: str
    """The driver's UUID of the MIG device (``MIG-...``; what CUDA_VISIBLE_DEVICES takes)."""
    unique_id: str
    """Slurm's UniqueId: ``MIG-<GPU UUID>/<GI id>/<CI id>`` ("" when the ids are unknown)."""
    memory_mib: int
    """Its memory in MiB (0 when unknown)."""
    gpu_instance: int | None
    compute_instance: int | None
    files: tuple[str, ...]
    """The parent's device file, then the GI and CI access capability files
    (``/dev/nvidia-caps/nvidia-capN``) when /proc/driver/nvidia-caps/mig-minors
    lists them: what a job using this instance must be allowed to open."""


@dataclass(frozen=True)
class GpuDevice:
    """One accelerator of the host, as a probe saw it."""

    vendor: Vendor
    index: int
    """The vendor library's (or PCI bus order's) index, from 0."""
    name: str
    """The model as the driver names it, e.g. ``NVIDIA H100 80GB HBM3``."""
    type: str
    """Slurm's autodetected type name (``slurm_type(name)``)."""
    uuid: str
    """Stable identity: NVIDIA ``GPU-...``, AMD ``unique_id`` in hex; "" if none."""
    memory_mib: int
    pci_bus_id: str
    """``dddd:bb:dd.f``, lower case (the sysfs form); "" when unknown."""
    cpus: tuple[int, ...]
    """Logical CPUs close to the device (its NUMA node's); () when unknown."""
    device_file: str
    """``/dev/nvidia0``, ``/dev/dri/renderD128``, ``/dev/neuron0``."""
    links: tuple[int, ...]
    """Slurm's ``Links``: per device index, -1 for this device, else the number of
    direct links (NVLink lanes) to that device; () when unknown."""
    mig_enabled: bool = False
    """MIG mode is currently enabled (NVIDIA)."""
    mig: tuple[MigInstance, ...] = ()
    cores: int | None = None
    """NeuronCores on the device (AWS Trainium/Inferentia); None for GPUs."""


@dataclass(frozen=True)
class GresRecord:
    """One device as a ``gres/gpu`` record (what ``slurmd -G`` lists)."""

    type: str
    files: tuple[str, ...]
    cpus: tuple[int, ...]
    links: tuple[int, ...]
    unique_id: str


def slurm_type(name: str) -> str:
    """slurmd's autodetected type of a device named ``name``."""
    return name.strip().lower().replace(" ", "_")


def mig_profile(slices: int, memory_mib: int) -> str:
    """``<slices>g.<GiB>gb``, the GiB rounded half up (C's ``roundl``), as slurmd names it."""
    return f"{slices}g.{(memory_mib + 512) // 1024}gb"


def mig_type(gpu_type: str, profile: str) -> str:
    """The type of a MIG instance: the GPU's type cut at its first ``-``, then the profile."""
    return f"{gpu_type.split('-', 1)[0]}_{profile}"


def normalize_type(detected: str, configured: Iterable[str]) -> str:
    """The configured type that is a case-insensitive substring of ``detected``.

    The longest such type wins (then the alphabetically first), as in slurmd,
    so ``k20m1`` is not taken for ``k20m``. With no match, ``detected`` itself.
    """
    lowered = detected.lower()
    for kind in sorted(set(configured), key=lambda t: (-len(t), t)):
        if kind and kind.lower() in lowered:
            return kind
    return detected


def normalize_bus_id(bus_id: str) -> str:
    """``00000000:1A:00.0`` (NVML, nvidia-smi) → ``0000:1a:00.0`` (sysfs)."""
    text = bus_id.strip().lower()
    domain, sep, rest = text.partition(":")
    if not sep or not rest or ":" not in rest:
        return text
    try:
        number = int(domain, 16)
    except ValueError:
        return text
    return f"{number:04x}:{rest}"


def parse_cpulist(text: str) -> tuple[int, ...]:
    """The kernel's CPU list (``0-3,8,10-11``) as sorted CPU ids; ValueError if malformed."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        if sep:
            low, high = int(first), int(last)
            if high < low:
                raise ValueError(f"bad CPU range '{part}'")
            cpus.update(range(low, high + 1))
        else:
            cpus.add(int(first))
    return tuple(sorted(cpus))


def format_ranges(values: Iterable[int]) -> str:
    """``0-3,8``: sorted integers as Slurm's ``bit_fmt`` writes them."""
    ordered = sorted(set(values))
    parts: list[str] = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        low, high = ordered[start], ordered[end]
        parts.append(f"{low}-{high}" if high > low else str(low))
        start = end + 1
    return ",".join(parts)


def links_text(links: Sequence[int]) -> str:
    """Slurm's ``Links=`` value: ``-1,6,2,0``."""
    return ",".join(str(n) for n in links)


def _socket_ranks(places: Iterable[CpuPlace]) -> dict[int, int]:
    """CPU id → Slurm socket index (the rank of its package id)."""
    places = list(places)
    packages = sorted({p.package for p in places})
    rank = {package: i for i, package in enumerate(packages)}
    return {p.cpu: rank[p.package] for p in places}


def affinity_cores(cpus: Iterable[int], places: Iterable[CpuPlace]) -> tuple[int, ...]:
    """Slurm's abstract core ids (gres.conf ``Cores=``) of the logical CPUs ``cpus``.

    Cores are numbered socket by socket, in (package, die, core id) order, as
    slurmd numbers them; CPUs not in ``places`` (offline, outside the agent's
    affinity) are ignored.
    """
    places = list(places)
    cores = sorted({(p.package, p.die, p.core) for p in places})
    number = {key: i for i, key in enumerate(cores)}
    core_of = {p.cpu: number[p.package, p.die, p.core] for p in places}
    return tuple(sorted({core_of[c] for c in cpus if c in core_of}))


def gres_records(devices: Iterable[GpuDevice]) -> list[GresRecord]:
    """The ``gres/gpu`` records slurmd would build: one per GPU, or per MIG instance.

    A GPU in MIG mode stands for its MIG instances (they share its CPUs and have
    no links); in MIG mode with no instance it is listed whole, as slurmd does.
    """
    records: list[GresRecord] = []
    for device in devices:
        if device.mig_enabled and device.mig:
            for mig in device.mig:
                records.append(
                    GresRecord(
                        type=mig.type,
                        files=mig.files,
                        cpus=device.cpus,
                        links=(),
                        unique_id=mig.unique_id,
                    )
                )
        else:
            records.append(
                GresRecord(
                    type=device.type,
                    files=(device.device_file,),
                    cpus=device.cpus,
                    links=device.links,
                    unique_id=device.uuid,
                )
            )
    return records


_SUFFIXES = ((1024**5, "P"), (1024**4, "T"), (1024**3, "G"), (1024**2, "M"), (1024, "K"))


def _count_text(count: int) -> str:
    for unit, suffix in _SUFFIXES:
        if count and count % unit == 0:
            return f"{count // unit}{suffix}"
    return str(count)


def format_gres(
    devices: Iterable[GpuDevice],
    places: Iterable[CpuPlace],
    *,
    types: Sequence[str] | None = None,
    name: str = "gpu",
) -> str:
    """A node's ``Gres=`` as ``scontrol show node`` prints it: ``gpu:h100:8(S:0-1)``.

    Records (``gres_records``) of the same type are added up, types in order of
    first appearance; ``(S:...)`` lists the sockets (ranks of the package ids in
    ``places``) holding any CPU of those records, and is left out when none is
    known. ``types`` are the node's configured GPU types (slurm.conf/gres.conf):
    ``None`` keeps the detected types, a sequence renames each detected type by
    ``normalize_type``, and an empty sequence drops types (``gpu:8``), as slurmd
    does when the configured Gres has none. Count suffixes (``1K``) as Slurm's.
    """
    socket_of = _socket_ranks(places)
    totals: dict[str, int] = {}
    sockets: dict[str, set[int]] = {}
    for record in gres_records(devices):
        if types is None:
            kind = record.type
        elif not types:
            kind = ""
        else:
            kind = normalize_type(record.type, types)
        totals[kind] = totals.get(kind, 0) + 1
        sockets.setdefault(kind, set()).update(socket_of[c] for c in record.cpus if c in socket_of)
    parts = []
    for kind, count in totals.items():
        where = f"(S:{format_ranges(sockets[kind])})" if sockets[kind] else ""
        label = f"{name}:{kind}" if kind else name
        parts.append(f"{label}:{_count_text(count)}{where}")
    return ",".join(parts)
