"""The agent's side of containment: whether runs go in cgroups here, and with which limits.

At start-up (:func:`setup`) the agent works out the cgroup layout of this host
(:func:`nodeagent.cgroups.detect`) and checks it can be used. As slurmd, it
does not start when slurm.conf asks for cgroups (ProctrackType=proctrack/cgroup
set, or TaskPlugin=task/cgroup) and they cannot be used (not root, no cgroup
file system); when they are only Corral's default, it says so once and runs
jobs in their process groups as before. Each launch's description then gets
its cgroups and limits (:meth:`Containment.describe`): memory from the job's
memory on the node as cgroup.conf says (with TaskPlugin=task/cgroup), its CPUs
when ConstrainCores=yes and the controller pinned them, pids.max from PidsMax.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from corral.cgroupconf import CgroupConf
from corral.config import SlurmConfig
from corral.confsyntax import ConfigError
from nodeagent import cgroups

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Containment:
    """Where runs' cgroups go here (``layout``) and what limits them (``limits``: with
    TaskPlugin=task/cgroup; ``conf``: cgroup.conf); ``unkillable``: slurm.conf's
    UnkillableStepTimeout, how long a run's processes may outlive their SIGKILL."""

    layout: cgroups.Layout
    conf: CgroupConf
    limits: bool
    unkillable: int = cgroups.UNKILLABLE_TIMEOUT

    def describe(
        self,
        node: str,
        job_id: int,
        leaf: str,
        mem_mib: int,
        cpu_ids: list[int],
        run_mem_mib: int = 0,
    ) -> dict[str, Any]:
        """The launch description's ``containment`` of run ``leaf`` of a job: ``mem_mib``
        the job's memory on the node, ``run_mem_mib`` the run's own (a step's ``srun
        --mem``; 0: the job's). cgroup.conf's percentages apply to each."""
        memory, memsw = self.conf.memory_limits(mem_mib) if self.limits else (0, 0)
        own = (memory, memsw)
        if run_mem_mib and self.limits:
            own = self.conf.memory_limits(run_mem_mib)
        swappiness = self.conf.swappiness
        return cgroups.describe(
            self.layout,
            node,
            job_id,
            leaf,
            memory=own[0],
            memsw=own[1],
            job_memory=memory,
            job_memsw=memsw,
            swappiness=-1 if swappiness is None or not self.limits else swappiness,
            cpus=cpu_ids if self.limits and self.conf.constrain_cores else (),
            pids=self.conf.pids_max if self.limits else 0,
            unkillable=self.unkillable,
        )


def setup(conf: SlurmConfig, top: str | None = None, name: str = cgroups.TOP) -> Containment | None:
    """This host's containment (None: runs are not contained); ``ConfigError`` when
    slurm.conf asks for cgroups and they cannot be used. ``name``: the cgroup runs
    go below in each hierarchy; ``top``: where the v2 cgroups go instead of below
    the agent's own cgroup (a test cluster's)."""
    if not conf.proctrack_cgroup and not conf.task_cgroup:
        return None
    layout = cgroups.detect(conf.cgroup_conf.plugin, top=top, name=name)
    reason = cgroups.unusable(layout)
    if reason is not None:
        if conf.cgroups_asked:
            raise ConfigError(
                "cgroup.conf", None, f"cannot contain jobs in cgroups ({reason}): not starting"
            )
        log.warning("jobs are not contained in cgroups here: %s", reason)
        return None
    found = cgroups.roles(layout)
    if conf.task_cgroup:
        _check(conf.cgroup_conf, found)
        v2_memory = any(v == cgroups.V2 and "memory" in names for v, _, names in layout)
        if v2_memory and conf.cgroup_conf.swappiness is not None:
            log.warning("MemorySwappiness has no effect: cgroup v2 has no per-cgroup swappiness")
    log.info(
        "jobs contained in cgroups: %s",
        ", ".join(f"{'/'.join(names)} v{version} under {base}" for version, base, names in layout),
    )
    return Containment(layout, conf.cgroup_conf, conf.task_cgroup, conf.unkillable_step_timeout)


def _check(conf: CgroupConf, found: set[str]) -> None:
    """Refuse to start when cgroup.conf asks for a limit no hierarchy here enforces."""
    asked = {
        "memory": conf.constrain_ram or conf.constrain_swap,
        "cpuset": conf.constrain_cores,
        "pids": conf.pids_max > 0,
    }
    missing = sorted(name for name, wanted in asked.items() if wanted and name not in found)
    if missing:
        raise ConfigError(
            "cgroup.conf",
            None,
            f"no cgroup hierarchy here has the {', '.join(missing)} controller it asks for",
        )
