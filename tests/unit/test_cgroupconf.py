"""cgroup.conf (corral/cgroupconf.py): its keys as Slurm reads them, and the limits a
run's memory comes to; and slurm.conf's ProctrackType and TaskPlugin that turn them on."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import cgroupconf
from corral.cgroupconf import MIB, CgroupConf
from corral.config import load, parse
from corral.confsyntax import ConfigError

HEAD = "ClusterName=t\nSlurmctldHost=ctl\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=ALL\n"


def test_without_a_file_slurms_defaults_limit_nothing(tmp_path: Path) -> None:
    found = cgroupconf.load(str(tmp_path / "cgroup.conf"))
    assert found == CgroupConf()
    assert found.memory_limits(1000) == (0, 0)


def test_keys_are_read_in_any_case() -> None:
    found = cgroupconf.parse(
        "constrainramspace=YES\nConstrainSwapSpace=yes # and swap\nAllowedRAMSpace=110.5\n"
        "AllowedSwapSpace=20\nConstrainCores=yes\nMemorySwappiness=10\nPidsMax=100\n"
        "MinRAMSpace=10\nCgroupPlugin=cgroup/v1\n",
        "/etc/slurm/cgroup.conf",
    )
    assert found == CgroupConf(
        plugin="cgroup/v1",
        constrain_ram=True,
        constrain_swap=True,
        constrain_cores=True,
        allowed_ram=110.5,
        allowed_swap=20.0,
        min_ram_mib=10,
        swappiness=10,
        pids_max=100,
    )


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ("ConstrainRAMSpace=yes", (100, 0)),
        ("ConstrainRAMSpace=yes\nAllowedRAMSpace=50", (50, 0)),
        ("ConstrainRAMSpace=yes\nConstrainSwapSpace=yes", (100, 100)),
        ("ConstrainRAMSpace=yes\nConstrainSwapSpace=yes\nAllowedSwapSpace=50", (100, 150)),
        # Swap alone: RAM is held to the RAM-and-swap limit.
        ("ConstrainSwapSpace=yes\nAllowedSwapSpace=50", (150, 150)),
        ("ConstrainRAMSpace=yes\nAllowedRAMSpace=1", (30, 0)),  # MinRAMSpace's 30M
        ("ConstrainRAMSpace=no", (0, 0)),
    ],
)
def test_memory_limits_follow_task_cgroups_rules(text: str, limits: tuple[int, int]) -> None:
    """Of 100 MiB allocated: (RAM, RAM and swap) in MiB."""
    found = cgroupconf.parse(text, "cgroup.conf")
    ram, memsw = limits
    assert found.memory_limits(100) == (ram * MIB, memsw * MIB)
    assert found.memory_limits(0) == (0, 0)  # no memory allocated: not limited


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ConstrainKmemSpace=yes", "cgroup.conf:1: ConstrainKmemSpace=yes is not supported"),
        ("MaxRAMPercent=80", "cgroup.conf:1: MaxRAMPercent=80 is not supported"),
        ("CgroupMountpoint=/cg", "cgroup.conf:1: CgroupMountpoint=/cg is not supported"),
        ("ConstrainRAMSpace=maybe", "cgroup.conf:1: bad ConstrainRAMSpace value 'maybe'"),
        ("AllowedRAMSpace=lots", "cgroup.conf:1: bad AllowedRAMSpace value 'lots'"),
        ("MemorySwappiness=101", "cgroup.conf:1: bad MemorySwappiness value '101'"),
        ("CgroupPlugin=cgroup/v3", "cgroup.conf:1: bad CgroupPlugin value 'cgroup/v3'"),
    ],
)
def test_what_cannot_be_honoured_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        cgroupconf.parse(text, "cgroup.conf")
    assert message in str(caught.value)


def test_what_changes_nothing_is_warned_about() -> None:
    found = cgroupconf.parse(
        "CgroupAutomount=yes\nConstrainDevices=no\nFrobnicate=1\nMaxRAMPercent=100\n",
        "cgroup.conf",
    )
    assert found.warnings == (
        "cgroup.conf:1: CgroupAutomount has no effect: cgroup file systems are never mounted",
        "cgroup.conf:3: unknown key 'Frobnicate' ignored",
        "cgroup.conf:2: ConstrainDevices=no has no effect: the GPUs a job was not given "
        "are fenced all the same",
    )


def test_slurm_conf_loads_the_cgroup_conf_beside_it(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(HEAD + "TaskPlugin=task/affinity,task/cgroup\n")
    (tmp_path / "cgroup.conf").write_text("ConstrainRAMSpace=yes\nCgroupAutomount=yes\n")
    conf = load(str(tmp_path / "slurm.conf"))
    assert conf.cgroup_conf.constrain_ram
    assert conf.task_cgroup and conf.proctrack_cgroup and conf.cgroups_asked
    assert any("CgroupAutomount has no effect" in w for w in conf.warnings)
    assert conf.task_affinity  # steps' tasks bound to cores by default
    assert not any("TaskPlugin" in w for w in conf.warnings)


@pytest.mark.parametrize(
    ("lines", "proctrack", "task", "asked"),
    [
        ("", True, False, False),  # proctrack/cgroup by default, but not asked for
        ("ProctrackType=proctrack/cgroup\n", True, False, True),
        ("ProctrackType=proctrack/linuxproc\n", False, False, False),
        ("ProctrackType=proctrack/pgid\nTaskPlugin=task/cgroup\n", False, True, True),
    ],
)
def test_proctrack_and_task_plugins(lines: str, proctrack: bool, task: bool, asked: bool) -> None:
    conf = parse(HEAD + lines, "slurm.conf")
    assert (conf.proctrack_cgroup, conf.task_cgroup, conf.cgroups_asked) == (proctrack, task, asked)
    other = [w for w in conf.warnings if "ProctrackType" in w]
    assert bool(other) == ("linuxproc" in lines or "pgid" in lines)
