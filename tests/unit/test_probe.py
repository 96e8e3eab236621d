"""Host probing (parsing of /proc and sysfs text, topology) and what nodes register."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.config import parse
from nodeagent.agent import (
    AgentError,
    is_emulated,
    registrations,
    select_nodes,
)
from nodeagent.probe import (
    CpuPlace,
    HostFacts,
    Topology,
    cpu_place,
    parse_boot_time,
    parse_meminfo,
    probe_host,
    read_places,
    topology,
)

MEMINFO = """MemTotal:       24683656 kB
MemFree:        23889676 kB
MemAvailable:   24078680 kB
"""

STAT = """cpu  1 2 3 4 5 6 7 0 0 0
cpu0 1 2 3 4 5 6 7 0 0 0
intr 12345
ctxt 678
btime 1796014929
processes 4242
"""


def test_parse_meminfo_gives_mib() -> None:
    assert parse_meminfo(MEMINFO) == 24683656 // 1024
    assert parse_meminfo("MemFree: 1 kB\n") == 0


def test_parse_boot_time() -> None:
    assert parse_boot_time(STAT) == 1796014929
    assert parse_boot_time("cpu 1 2\n") == 0


def grid(sockets: int, cores: int, threads: int) -> list[CpuPlace]:
    """Linux numbering: all first threads, then all second threads."""
    places = []
    cpu = 0
    for _ in range(threads):
        for socket in range(sockets):
            for core in range(cores):
                places.append(CpuPlace(cpu=cpu, package=socket, die=0, core=core))
                cpu += 1
    return places


def test_topology_of_a_two_socket_smt_machine() -> None:
    assert topology(grid(2, 4, 2)) == Topology(
        cpus=16, sockets=2, cores_per_socket=4, threads_per_core=2
    )


def test_topology_counts_cores_per_die() -> None:
    places = [CpuPlace(cpu=i, package=0, die=i // 2, core=i % 2) for i in range(4)]
    assert topology(places) == Topology(cpus=4, sockets=1, cores_per_socket=4, threads_per_core=1)


def test_irregular_affinity_becomes_single_thread_cores() -> None:
    three_of_four = grid(1, 2, 2)[:3]
    assert topology(three_of_four) == Topology(
        cpus=3, sockets=1, cores_per_socket=3, threads_per_core=1
    )


def test_cpu_place_reads_ids_and_defaults_missing_ones() -> None:
    assert cpu_place(3, {"physical_package_id": "1\n", "core_id": "7\n"}) == CpuPlace(3, 1, 0, 7)
    assert cpu_place(0, {"physical_package_id": "-1\n", "core_id": "?"}) == CpuPlace(0, -1, 0, 0)


def test_read_places_from_a_sysfs_tree(tmp_path: Path) -> None:
    for place in grid(2, 2, 2):
        topo = tmp_path / f"cpu{place.cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{place.package}\n")
        (topo / "die_id").write_text("0\n")
        (topo / "core_id").write_text(f"{place.core}\n")
    places = read_places(range(8), sysfs=str(tmp_path))
    assert places == grid(2, 2, 2)
    assert topology(places) == Topology(cpus=8, sockets=2, cores_per_socket=2, threads_per_core=2)


def test_probe_host_describes_this_machine() -> None:
    facts = probe_host()
    topo = facts.topology
    assert topo.cpus == len(os.sched_getaffinity(0))
    assert topo.sockets * topo.cores_per_socket * topo.threads_per_core == topo.cpus
    assert facts.real_memory > 0
    assert facts.tmp_disk > 0
    assert facts.boot_time > 0
    assert facts.os.startswith("Linux ")
    assert facts.arch == os.uname().machine
    assert "." not in facts.hostname


CONF = """ClusterName=c
SlurmctldHost=ctl
NodeName=big NodeHostname={host} CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=9
NodeName=e[1-2] CPUs=4 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=100 TmpDisk=7
"""


def facts_for(host: str) -> HostFacts:
    return HostFacts(
        hostname=host,
        topology=Topology(cpus=8, sockets=1, cores_per_socket=4, threads_per_core=2),
        real_memory=2048,
        tmp_disk=500,
        arch="x86_64",
        os="Linux 6.1 #1",
        boot_time=1700000000,
    )


def test_a_real_node_registers_what_the_host_is() -> None:
    conf = parse(CONF.format(host="h1"), "/etc/corral/slurm.conf")
    nodes = select_nodes(conf, None, "h1")
    assert [n.name for n in nodes] == ["big"]
    assert not is_emulated(nodes, "h1")
    (reg,) = registrations(nodes, facts_for("h1"))
    shape = (reg.cpus, reg.sockets, reg.cores_per_socket, reg.threads_per_core)
    assert (reg.name, shape) == ("big", (8, 1, 4, 2))
    assert (reg.real_memory, reg.tmp_disk, reg.hostname) == (2048, 500, "h1")


def test_emulated_nodes_register_their_configuration() -> None:
    conf = parse(CONF.format(host="h1"), "/etc/corral/slurm.conf")
    nodes = select_nodes(conf, ["e1", "e2"], "h1")
    assert is_emulated(nodes, "h1")
    regs = registrations(nodes, facts_for("h1"))
    assert [(r.name, r.cpus, r.cores_per_socket, r.real_memory, r.tmp_disk) for r in regs] == [
        ("e1", 4, 2, 100, 7),
        ("e2", 4, 2, 100, 7),
    ]
    assert {(r.hostname, r.arch, r.boot_time) for r in regs} == {("h1", "x86_64", 1700000000)}


def test_node_selection_errors() -> None:
    conf = parse(CONF.format(host="h1"), "/etc/corral/slurm.conf")
    with pytest.raises(AgentError, match="not in"):
        select_nodes(conf, ["nope"], "h1")
    with pytest.raises(AgentError, match="no node"):
        select_nodes(conf, None, "elsewhere")
    assert conf.controller_target.endswith(":6817")
