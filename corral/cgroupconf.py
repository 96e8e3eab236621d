"""cgroup.conf, read the way Slurm reads it (cgroup.conf(5)), and what it limits.

cgroup.conf sits beside slurm.conf and says what task/cgroup holds a job to:
its memory (``ConstrainRAMSpace``, ``AllowedRAMSpace``, ``MinRAMSpace``), its
swap (``ConstrainSwapSpace``, ``AllowedSwapSpace``, ``MemorySwappiness``), its
CPUs (``ConstrainCores``) and devices (``ConstrainDevices``). The syntax is
slurm.conf's (``corral.confsyntax``). Every key cgroup.conf(5) documents is
accepted; as in slurm.conf (``corral.confkeys``), one Corral does not
implement is a warning where ignoring it cannot change an outcome and refused
where it could, unless set to the value that asks for nothing; an unknown key
is a warning.

One key is Corral's own: ``PidsMax=<n>``, the most processes and threads one
run (a batch script, a step on a node) may have at once (pids.max), which Slurm
has no key for; 0, the default, is no limit.

:meth:`CgroupConf.memory_limits` turns a run's allocated memory into the byte
limits the node agent writes (memory.max, and RAM plus swap), as task/cgroup
works them out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from corral import confkeys
from corral.confsyntax import ConfigError, Reader, Where, boolean, integer, read_text

__all__ = ["CgroupConf", "load", "parse"]

MIB = 1 << 20

PLUGINS = ("autodetect", "cgroup/v1", "cgroup/v2")


@dataclass(frozen=True)
class CgroupConf:
    """cgroup.conf's settings (Slurm's defaults when there is no file); ``warnings``
    the ``path:line: ...`` notes about keys without effect."""

    plugin: str = "autodetect"
    constrain_ram: bool = False
    constrain_swap: bool = False
    constrain_cores: bool = False
    constrain_devices: bool = False
    allowed_ram: float = 100.0  # percent of the allocated memory
    allowed_swap: float = 0.0  # percent of the allocated memory, beyond the RAM limit
    min_ram_mib: int = 30
    swappiness: int | None = None
    pids_max: int = 0
    warnings: tuple[str, ...] = ()

    def memory_limits(self, alloc_mib: int) -> tuple[int, int]:
        """(RAM limit, RAM plus swap limit) in bytes of a run given ``alloc_mib`` MiB;
        0 for none. Nothing is limited without allocated memory (a job that asked for
        none where no DefMemPer* applies), as MaxRAMPercent cannot be but 100 here."""
        if alloc_mib <= 0 or not (self.constrain_ram or self.constrain_swap):
            return 0, 0
        ram_percent = self.allowed_ram if self.constrain_ram else 100.0
        ram = max(int(alloc_mib * MIB * ram_percent / 100), self.min_ram_mib * MIB)
        if not self.constrain_swap:
            return ram, 0
        memsw = max(int(alloc_mib * MIB * (ram_percent + self.allowed_swap) / 100), ram)
        # ConstrainSwapSpace alone: RAM is held to the RAM-and-swap limit (cgroup.conf(5)).
        return (ram if self.constrain_ram else memsw), memsw


def _percent(key: str, value: str, where: Where) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 10000:
        raise ConfigError(*where, f"bad {key} value '{value}': not a percentage")
    return number


class _Reader(Reader):
    def __init__(self) -> None:
        self.values: dict[str, tuple[str, Where]] = {}
        self.warnings: list[str] = []

    def cluster_name(self) -> str | None:
        return None

    def line(self, found: list[tuple[str, str]], where: Where) -> None:
        for key, value in found:
            row = confkeys.CGROUP.get(key.lower())
            if row is None:
                self.warnings.append(f"{where[0]}:{where[1]}: unknown key '{key}' ignored")
                continue
            confkeys.check(row, value, where, self.warnings)
            self.values[row.key] = (value, where)


def parse(text: str, path: str) -> CgroupConf:
    """cgroup.conf's settings from ``text`` (read from ``path``); ConfigError naming
    the file and line for a bad value or a refused key."""
    reader = _Reader()
    reader.feed(text, path, (os.path.abspath(path),))
    values = reader.values
    settings: dict[str, object] = {}
    for key, name in (
        ("ConstrainRAMSpace", "constrain_ram"),
        ("ConstrainSwapSpace", "constrain_swap"),
        ("ConstrainCores", "constrain_cores"),
        ("ConstrainDevices", "constrain_devices"),
    ):
        if key in values:
            settings[name] = boolean(key, *values[key])
    for key, name in (("AllowedRAMSpace", "allowed_ram"), ("AllowedSwapSpace", "allowed_swap")):
        if key in values:
            settings[name] = _percent(key, *values[key])
    if settings.get("constrain_devices") is False:
        where = values["ConstrainDevices"][1]
        reader.warnings.append(
            f"{where[0]}:{where[1]}: ConstrainDevices=no has no effect: the GPUs a job "
            "was not given are fenced all the same"
        )
    if "MinRAMSpace" in values:
        settings["min_ram_mib"] = integer("MinRAMSpace", *values["MinRAMSpace"])
    if "MemorySwappiness" in values:
        settings["swappiness"] = integer(
            "MemorySwappiness", *values["MemorySwappiness"], maximum=100
        )
    if "PidsMax" in values:
        settings["pids_max"] = integer("PidsMax", *values["PidsMax"])
    if "CgroupPlugin" in values:
        value, where = values["CgroupPlugin"]
        if value.lower() not in PLUGINS:
            raise ConfigError(*where, f"bad CgroupPlugin value '{value}': use {', '.join(PLUGINS)}")
        settings["plugin"] = value.lower()
    return CgroupConf(**settings, warnings=tuple(reader.warnings))  # type: ignore[arg-type]


def load(path: str) -> CgroupConf:
    """The cgroup.conf at ``path`` (Slurm's defaults when there is none)."""
    if not os.path.exists(path):
        return CgroupConf()
    return parse(read_text(path, (path, None), ""), path)
