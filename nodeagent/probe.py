"""What this host really is: CPU topology, memory, disk, boot time, OS.

A node agent serving its own host registers these probed values, so the
controller can compare them with slurm.conf the way slurmctld does. The
parsing functions take file text rather than paths so tests can feed
fixtures from machines they do not run on; ``probe_host`` does the reading.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

MIB = 1024 * 1024
SYSFS_CPU = "/sys/devices/system/cpu"


@dataclass(frozen=True)
class CpuPlace:
    """Where one logical CPU sits: its package (socket), die and core ids."""

    cpu: int
    package: int
    die: int
    core: int


@dataclass(frozen=True)
class Topology:
    """Slurm's view of a node's processors (Boards is always 1 here)."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int


@dataclass(frozen=True)
class HostFacts:
    """Everything a node registration needs that only the host can tell."""

    hostname: str
    topology: Topology
    real_memory: int
    tmp_disk: int
    arch: str
    os: str
    boot_time: int
    places: tuple[CpuPlace, ...] = ()  # the CPUs in use (GPU affinity maps onto them)


def parse_meminfo(text: str) -> int:
    """MemTotal of /proc/meminfo in MiB (0 when the line is missing)."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            kib = int(fields[1])
            return kib // 1024
    return 0


def parse_boot_time(text: str) -> int:
    """The ``btime`` of /proc/stat: boot time in UNIX seconds (0 if absent)."""
    for line in text.splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    return 0


def topology(places: Iterable[CpuPlace]) -> Topology:
    """Sockets, cores and threads from per-CPU placement.

    When the usable CPUs do not form a regular grid (an affinity mask that
    covers half a core, say), the node is described as one socket of
    single-thread cores so that sockets x cores x threads still equals CPUs,
    which is what the controller's arithmetic relies on.
    """
    places = list(places)
    cpus = len(places)
    if cpus == 0:
        return Topology(cpus=1, sockets=1, cores_per_socket=1, threads_per_core=1)
    sockets = len({p.package for p in places})
    cores = len({(p.package, p.die, p.core) for p in places})
    cores_per_socket = cores // sockets
    threads_per_core = cpus // cores
    if sockets * cores_per_socket * threads_per_core != cpus:
        return Topology(cpus=cpus, sockets=1, cores_per_socket=cpus, threads_per_core=1)
    return Topology(
        cpus=cpus,
        sockets=sockets,
        cores_per_socket=cores_per_socket,
        threads_per_core=threads_per_core,
    )


def cpu_place(cpu: int, files: Mapping[str, str]) -> CpuPlace:
    """Placement of ``cpu`` from the text of its sysfs topology files.

    ``files`` maps a file name (``physical_package_id``, ``die_id``,
    ``core_id``) to its content; a missing file counts as id 0, which is what
    the kernel means on machines that do not have that level.
    """

    def ident(name: str) -> int:
        try:
            return int(files.get(name, "0"))
        except ValueError:
            return 0

    return CpuPlace(
        cpu=cpu, package=ident("physical_package_id"), die=ident("die_id"), core=ident("core_id")
    )


def short_hostname() -> str:
    """This host's name without its domain, as NodeHostname is usually written."""
    return socket.gethostname().split(".", 1)[0]


def os_string() -> str:
    """``Linux <release> <version>``, the form slurmd reports as OS."""
    uname = os.uname()
    return f"{uname.sysname} {uname.release} {uname.version}"


def _read(path: str) -> str | None:
    try:
        with open(path) as src:
            return src.read()
    except OSError:
        return None


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (affinity), in order."""
    return sorted(os.sched_getaffinity(0))


def read_places(cpus: Iterable[int], sysfs: str = SYSFS_CPU) -> list[CpuPlace]:
    """Read the sysfs topology of each CPU in ``cpus``."""
    places = []
    for cpu in cpus:
        base = os.path.join(sysfs, f"cpu{cpu}", "topology")
        files = {}
        for name in ("physical_package_id", "die_id", "core_id"):
            text = _read(os.path.join(base, name))
            if text is not None:
                files[name] = text
        places.append(cpu_place(cpu, files))
    return places


def tmp_disk_mib(path: str = "/tmp") -> int:
    """Size of the file system holding ``path`` in MiB (Slurm's TmpDisk)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_blocks * st.f_frsize // MIB


def probe_host() -> HostFacts:
    """Probe the running host."""
    meminfo = _read("/proc/meminfo") or ""
    stat = _read("/proc/stat") or ""
    places = tuple(read_places(usable_cpus()))
    facts = HostFacts(
        hostname=short_hostname(),
        topology=topology(places),
        real_memory=parse_meminfo(meminfo),
        tmp_disk=tmp_disk_mib(),
        arch=os.uname().machine,
        os=os_string(),
        boot_time=parse_boot_time(stat),
        places=places,
    )
    log.debug("probed host %s", facts)
    return facts
