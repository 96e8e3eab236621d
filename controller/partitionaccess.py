"""Who may use a partition, and what a job may ask of it (slurm.conf's partition keys).

One set of rules for submission (``controller.admission``), ``scontrol update
job`` (``controller.service``) and ``corral why``: a job must not get by an
update what submission refuses, as moving a pending job into a restricted
partition, or onto an account or QOS the partition denies, would otherwise do.

Access (``access_refusal``), with Slurm's errors: ``RootOnly`` (root and
SlurmUser only: ESLURM_ACCESS_DENIED), ``AllowGroups``
(ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP; root and SlurmUser pass),
``AllowAccounts``/``DenyAccounts`` (ESLURM_INVALID_ACCOUNT) and
``AllowQos``/``DenyQos`` (ESLURM_INVALID_QOS).

Limits (``limit_refusal``): ``MaxTime`` (ESLURM_INVALID_TIME_LIMIT) and
``MaxNodes`` (ESLURM_INVALID_NODE_COUNT) refuse a job only as
``EnforcePartLimits`` says (``NO``, Slurm's default: the job waits with
PartitionTimeLimit or PartitionNodeLimit, which the scheduler keeps; ``ANY``
or ``YES``: refused unless some partition it names allows it; ``ALL``: refused
unless every one does). ``MaxCPUsPerNode`` always refuses a job that must have
more CPUs on a node (ESLURM_TOO_MANY_REQUESTED_CPUS), since no node of the
partition may give them. ``MaxMemPerCPU`` raises a job's CPUs per task to fit
its memory per CPU (``fit_mem_per_cpu``), as slurm.conf(5) describes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from corral import errors
from corral.config import PartitionConfig


class Caller(Protocol):
    """What the rules need to know of a caller (``controller.principal.Principal``)."""

    @property
    def is_admin(self) -> bool: ...

    @property
    def gid(self) -> int: ...

    @property
    def groups(self) -> frozenset[int]: ...


class Request(Protocol):
    """What the limits look at in a job (``controller.model.Job``)."""

    @property
    def time_limit(self) -> int: ...

    @property
    def min_nodes(self) -> int: ...

    @property
    def num_tasks(self) -> int: ...

    @property
    def cpus_per_task(self) -> int: ...

    @property
    def ntasks_per_node(self) -> int: ...

    @property
    def nodes_given(self) -> bool: ...

    @property
    def min_cpus(self) -> int: ...


def access_refusal(
    part: PartitionConfig,
    who: Caller,
    account: str,
    qos: str,
    group_names: Iterable[str],
) -> int:
    """Slurm's errno if ``who`` (in the groups named ``group_names``) may not use
    ``part`` under ``account`` and ``qos``; 0 if they may."""
    if part.root_only and not who.is_admin:
        return errors.ESLURM_ACCESS_DENIED
    groups = part.allow_groups
    if groups is not None and not who.is_admin and not set(groups) & set(group_names):
        return errors.ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP
    account = account.lower()
    allowed = part.allow_accounts
    if (allowed is not None and account not in allowed) or account in part.deny_accounts:
        return errors.ESLURM_INVALID_ACCOUNT
    if (part.allow_qos is not None and qos not in part.allow_qos) or qos in part.deny_qos:
        return errors.ESLURM_INVALID_QOS
    return 0


def cpus_per_node(job: Request) -> int:
    """The fewest CPUs the job must have on each of its nodes (``--mincpus`` at least)."""
    per_task = max(job.cpus_per_task, 1)
    if job.ntasks_per_node:
        least = job.ntasks_per_node * per_task
    elif job.nodes_given and job.min_nodes > 0:
        least = -(-max(job.num_tasks, job.min_nodes) // job.min_nodes) * per_task
    else:
        least = per_task
    return max(least, job.min_cpus)


def _limit(job: Request, part: PartitionConfig) -> int:
    """The limit (MaxTime, MaxNodes) ``part`` holds ``job`` back by, as an errno; 0: none."""
    if part.max_time >= 0 and (job.time_limit < 0 or job.time_limit > part.max_time):
        return errors.ESLURM_INVALID_TIME_LIMIT
    if part.max_nodes is not None and job.min_nodes > part.max_nodes:
        return errors.ESLURM_INVALID_NODE_COUNT
    return 0


def enforce_mode(settings: Iterable[tuple[str, str]]) -> str:
    """slurm.conf's EnforcePartLimits as ``NO``, ``ANY`` or ``ALL`` (``YES`` is ``ANY``)."""
    mode = dict(settings).get("EnforcePartLimits", "NO").upper()
    return "ANY" if mode == "YES" else mode if mode in ("ANY", "ALL") else "NO"


def limit_refusal(job: Request, parts: Sequence[PartitionConfig], mode: str) -> int:
    """Slurm's errno if ``job`` breaks the limits of the partitions it names, under
    EnforcePartLimits ``mode``; 0 if it may be queued."""
    for part in parts:
        cap = part.max_cpus_per_node
        if cap is not None and cpus_per_node(job) > cap:
            return errors.ESLURM_TOO_MANY_REQUESTED_CPUS
    if mode == "NO" or not parts:
        return 0
    found = [_limit(job, part) for part in parts]
    if mode == "ALL":
        return next((code for code in found if code), 0)
    return 0 if 0 in found else found[0]


def fit_mem_per_cpu(cpus_per_task: int, mem_per_cpu: int, max_mem_per_cpu: int) -> tuple[int, int]:
    """(CPUs per task, memory per CPU) within MaxMemPerCPU ``max_mem_per_cpu`` (MiB,
    0: none): CPUs per task multiplied by as much as the memory is over, and the
    memory per CPU divided by as much, so that each task keeps its memory."""
    if max_mem_per_cpu <= 0 or mem_per_cpu <= max_mem_per_cpu:
        return cpus_per_task, mem_per_cpu
    ratio = -(-mem_per_cpu // max_mem_per_cpu)
    return max(cpus_per_task, 1) * ratio, -(-mem_per_cpu // ratio)
