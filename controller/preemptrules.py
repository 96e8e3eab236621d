"""What preemption does to one job: its PreemptMode, GraceTime and exempt time.

Slurm lets each partition and each QOS say how its jobs are preempted, and
which setting wins is a rule of its own (``slurm_job_preempt_mode``): with
``PreemptType=preempt/qos`` the job's QOS's PreemptMode if it sets one (not
``cluster``), else the partition's ``PreemptMode=``, else slurm.conf's.
GraceTime comes from the QOS under preempt/qos (Slurm's rule) and, where the
QOS gives none, from the partition's ``GraceTime=``; under
preempt/partition_prio from the partition. PreemptExemptTime is the QOS's if
set, else slurm.conf's. A SUSPEND victim has no GraceTime (Slurm's rule: it is
for jobs that end). This module says it once for the snapshot (which
victims, with what) and for ``scontrol show job`` (PreemptEligibleTime).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.associations import AssocSet, QosLimits
from controller.core.snapshot import PreemptPolicy
from controller.model import Job
from corral.config import SlurmConfig

__all__ = ["JobRules", "Rules", "policy"]


@dataclass(frozen=True, slots=True)
class JobRules:
    """One job's preemption: its mode (OFF, CANCEL, REQUEUE, SUSPEND), GraceTime and
    PreemptExemptTime, both in seconds."""

    mode: str
    grace: int
    exempt: int


class Rules:
    """The cluster's preemption settings, resolved per job."""

    def __init__(self, conf: SlurmConfig, assocs: AssocSet | None) -> None:
        self.conf = conf
        self.by_qos = conf.preempt_type == "PREEMPT/QOS"
        self.qos: Mapping[str, QosLimits] = assocs.qos if assocs is not None else {}
        self.parts = {p.name: p for p in conf.partitions}

    @property
    def active(self) -> bool:
        """Whether any job may be preempted at all."""
        if self.conf.preempt_type == "PREEMPT/NONE":
            return False
        modes = {self.conf.preempt_mode, *(p.preempt_mode for p in self.parts.values())}
        if self.by_qos:
            modes |= {_qos_mode(q) for q in self.qos.values()}
        return bool(modes - {"", "OFF"})

    def of(self, job: Job) -> JobRules:
        qos = self.qos.get(job.qos)
        part = self.parts.get(job.partition)
        mode = (_qos_mode(qos) if self.by_qos and qos is not None else "") or (
            part.preempt_mode if part is not None else ""
        )
        grace = qos.grace_time if self.by_qos and qos is not None else 0
        if not grace and part is not None:
            grace = part.grace_time
        exempt = self.conf.preemption.exempt_time
        if qos is not None and qos.preempt_exempt_time is not None:
            exempt = qos.preempt_exempt_time
        mode = mode or self.conf.preempt_mode
        if mode == "SUSPEND":
            grace = 0  # Slurm: a suspension is immediate; GraceTime is for ending jobs
        return JobRules(mode, grace, exempt)

    def eligible_time(self, job: Job) -> int:
        """PreemptEligibleTime: when the running ``job`` may first be a victim (0: never
        started, or preemption is off)."""
        if not job.start_time or not self.active:
            return 0
        return job.start_time + self.of(job).exempt


def _qos_mode(qos: QosLimits) -> str:
    """A QOS's own mode word ("" where it leaves it to the partition or slurm.conf:
    sacctmgr documents ``OFF``, ``Cluster`` and empty alike as unsetting it)."""
    words = {w.strip().upper() for w in qos.preempt_mode.split(",")}
    for word in ("CANCEL", "REQUEUE", "SUSPEND"):
        if word in words:
            return word
    return ""


def policy(conf: SlurmConfig, assocs: AssocSet | None) -> PreemptPolicy | None:
    """PreemptType as the core applies it (None: no job may be preempted)."""
    rules = Rules(conf, assocs)
    if not rules.active:
        return None
    requeue = conf.preempt_mode == "REQUEUE"
    exempt = conf.preemption.min_exempt_priority
    reclaim = conf.preemption.reclaim_licenses
    if rules.by_qos:
        return PreemptPolicy(
            "qos",
            requeue,
            qos={name: q.preempt for name, q in rules.qos.items()},
            within=frozenset(
                name for name, q in rules.qos.items() if "within" in q.preempt_mode.lower()
            ),
            within_all=conf.preemption.within,
            min_exempt_priority=exempt,
            reclaim_licenses=reclaim,
        )
    tiers = {p.name: p.priority_tier for p in conf.partitions}
    return PreemptPolicy(
        "partition_prio",
        requeue,
        tiers=tiers,
        min_exempt_priority=exempt,
        reclaim_licenses=reclaim,
    )
