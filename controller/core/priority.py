"""Slurm's multifactor job priority (``priority_multifactor.c``), as pure functions.

For a pending job at ``now``, in one of its partitions::

    priority = W_age * age + W_assoc * assoc + W_fs * fairshare + W_js * job_size
             + W_part * partition + W_qos * qos + sum over TRES t of W_t * tres_t
             + site - nice

Every factor is normalised to 0..1 (unless a ``NO_NORMAL_*`` flag asks for
the raw value); a result below 1 becomes 1 (0 is reserved for held jobs),
one above 2**32-1 is clipped to it, and the sum is truncated to an integer
as Slurm's ``(uint32_t)`` cast does. An administrator's ``--priority`` (or
``scontrol update priority=``) replaces the formula; a held job's priority is 0.

The factors, as ``set_priority_factors`` computes them:

* age: ``min(now - accrue_time, PriorityMaxAge) / PriorityMaxAge``; 0 until the
  job accrues age (``accrue_time`` 0), from submission with ``ACCRUE_ALWAYS``.
* job size, over the active nodes and the cluster's CPUs:
  favour large (default) ``(min_nodes/nodes + cpus/cluster_cpus) / 2``;
  PriorityFavorSmall ``((nodes - min_nodes)/nodes + (cluster_cpus - cpus)/cluster_cpus) / 2``
  (the node term 0 when min_nodes >= nodes); ``SMALL_RELATIVE_TO_TIME``
  ``max(min_nodes * cluster_cpus/nodes, cpus) / time_limit_minutes / cluster_cpus``
  (``1 -`` that when favouring small); clamped to 0..1.
* partition: the partition's PriorityJobFactor over the largest one of any partition.
* QOS: the QOS's priority over the largest QOS priority (0 while every QOS has 0).
* fair share: from ``controller.core.fairshare`` (Fair Tree or classic).
* TRES: per weighted TRES, the job's request over the partition's total.
* assoc and site: 0 (no association priorities or site factor plugin yet).

Priority/basic is Slurm's FIFO: ``basic_priority`` gives each new job one
less than the last, and the controller keeps that number instead of calling
``job_priorities``.

The scheduler does not read a priority off the job: ``rank`` computes every
pending job's at one PriorityCalcPeriod's tick, and the ``Ranking`` it
returns is an input of the snapshot, replaced whole at the next tick.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from controller.model import Job
from corral.config import PriorityConfig, SlurmConfig

__all__ = [
    "MAX_PRIORITY",
    "NO_RANKING",
    "TRES_ORDER",
    "Cluster",
    "PartitionFacts",
    "PriorityFactors",
    "PriorityJob",
    "Ranking",
    "Weights",
    "account_of",
    "basic_priority",
    "factors",
    "job_priorities",
    "job_priority",
    "rank",
]

#: The largest priority (Slurm keeps priorities in 32 bits).
MAX_PRIORITY = 0xFFFFFFFF
#: Slurm's INFINITE time limit, which SMALL_RELATIVE_TO_TIME divides by.
_INFINITE = 0xFFFFFFFF
#: The first priority priority/basic gives (``0xffff0000``, minus one per job).
_BASIC_TOP = 0xFFFF0000
#: The order Slurm keeps TRES in (their ids); others (gres/..., license/...) follow by name.
TRES_ORDER = ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")


@dataclass(frozen=True, slots=True)
class Weights:
    """The PriorityWeight* settings; ``tres`` is (TRES name, weight) in Slurm's order."""

    age: int = 0
    assoc: int = 0
    fairshare: int = 0
    job_size: int = 0
    partition: int = 0
    qos: int = 0
    tres: tuple[tuple[str, float], ...] = ()
    tres_text: str = ""

    @classmethod
    def from_config(cls, config: PriorityConfig) -> Weights:
        return cls(
            age=config.weight_age,
            assoc=config.weight_assoc,
            fairshare=config.weight_fairshare,
            job_size=config.weight_job_size,
            partition=config.weight_partition,
            qos=config.weight_qos,
            tres=tuple(sorted(config.weight_tres, key=lambda item: _tres_key(item[0]))),
            tres_text=config.weight_tres_text,
        )


def _tres_key(name: str) -> tuple[int, str]:
    return (TRES_ORDER.index(name), "") if name in TRES_ORDER else (len(TRES_ORDER), name)


@dataclass(frozen=True, slots=True)
class PriorityJob:
    """What the formula reads of a job (``from_job`` builds it from a ``Job``).

    ``account`` is the job's association account (``account_of``);
    ``accrue_time`` 0 means it does not accrue age (held); ``tres`` its
    request: ``cpu``, ``mem`` (MiB), ``node``, ``billing``, ``gres/<name>``.
    ``time_limit`` is minutes, -1 for none given (the partition's MaxTime).
    """

    job_id: int
    user: str
    account: str
    partitions: tuple[str, ...]
    qos: str = "normal"
    nice: int = 0
    held: bool = False
    admin_priority: int | None = None
    accrue_time: int = 0
    submit_time: int = 0
    min_nodes: int = 1
    cpus: int = 1
    time_limit: int = -1
    tres: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_job(cls, job: Job) -> PriorityJob:
        """The priority inputs of a pending ``Job``; it accrues age from its eligible time."""
        cpus = job.cpus_needed
        memory = 0
        if job.mem_per_node:
            memory = job.mem_per_node * job.min_nodes
        elif job.mem_per_cpu:
            memory = job.mem_per_cpu * cpus
        tres = [("cpu", cpus), ("mem", memory), ("node", job.min_nodes), ("billing", cpus)]
        return cls(
            job_id=job.job_id,
            user=job.user,
            account=account_of(job),
            partitions=job.partitions,
            qos=job.qos,
            nice=job.nice,
            held=bool(job.held),
            admin_priority=job.admin_priority,
            accrue_time=0 if job.held else job.eligible_time,
            submit_time=job.submit_time,
            min_nodes=job.min_nodes,
            cpus=cpus,
            time_limit=job.time_limit,
            tres=tuple((name, count) for name, count in tres if count),
        )

    def requested(self, name: str) -> int:
        return next((count for tres, count in self.tres if tres == name), 0)


def account_of(job: Job) -> str:
    """The account of a job's association: ``--account``, else the user's group."""
    return job.account or job.group


@dataclass(frozen=True, slots=True)
class PartitionFacts:
    """What the partition and TRES factors need of a partition.

    ``tres`` holds its totals: ``cpu``, ``mem`` (MiB), ``node``, ``billing``,
    ``gres/<name>``. ``max_time`` is minutes, -1 UNLIMITED.
    """

    name: str
    priority_job_factor: int = 1
    max_time: int = -1
    tres: tuple[tuple[str, int], ...] = ()

    def total(self, name: str) -> int:
        return next((count for tres, count in self.tres if tres == name), 0)


@dataclass(frozen=True, slots=True)
class Cluster:
    """Everything beyond the job that its priority depends on.

    ``nodes`` counts the active nodes and ``cpus`` the cluster's CPUs (the
    job-size denominators); ``fairshare`` maps (account, user) to the factor
    (``fairshare.ShareTree.factors``); ``qos_priority`` the QOS priorities
    (sacctmgr's QOS Priority; none without accounting: every QOS has 0).
    """

    config: PriorityConfig
    nodes: int
    cpus: int
    partitions: Mapping[str, PartitionFacts]
    fairshare: Mapping[tuple[str, str], float] = field(default_factory=dict)
    qos_priority: Mapping[str, int] = field(default_factory=dict)
    weights: Weights = field(init=False)
    max_partition_factor: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", Weights.from_config(self.config))
        factor = max((p.priority_job_factor for p in self.partitions.values()), default=0)
        object.__setattr__(self, "max_partition_factor", factor)

    @classmethod
    def from_config(
        cls,
        conf: SlurmConfig,
        fairshare: Mapping[tuple[str, str], float] | None = None,
        *,
        active_nodes: int | None = None,
        qos_priority: Mapping[str, int] | None = None,
    ) -> Cluster:
        """The cluster slurm.conf describes; ``active_nodes`` defaults to every node.

        Partition TRES totals are the sums over their nodes: CPUs, RealMemory,
        nodes, billing (= CPUs without TRESBillingWeights) and ``gres/<name>``.
        """
        cpus = {node.name: node.cpus for node in conf.nodes}
        memory = {node.name: node.real_memory for node in conf.nodes}
        gres = {node.name: _gres_counts(node.gres) for node in conf.nodes}
        partitions = {}
        for part in conf.partitions:
            part_cpus = sum(cpus[name] for name in part.nodes)
            totals: dict[str, int] = {
                "cpu": part_cpus,
                "mem": sum(memory[name] for name in part.nodes),
                "node": len(part.nodes),
                "billing": part_cpus,
            }
            for name in part.nodes:
                for kind, count in gres[name]:
                    totals[kind] = totals.get(kind, 0) + count
            partitions[part.name] = PartitionFacts(
                part.name,
                priority_job_factor=part.priority_job_factor,
                max_time=part.max_time,
                tres=tuple(sorted(totals.items(), key=lambda item: _tres_key(item[0]))),
            )
        return cls(
            config=conf.priority,
            nodes=len(conf.nodes) if active_nodes is None else active_nodes,
            cpus=sum(cpus.values()),
            partitions=partitions,
            fairshare=fairshare or {},
            qos_priority=qos_priority or {},
        )


def _gres_counts(text: str) -> list[tuple[str, int]]:
    """``gpu:a100:2,nic:1`` as [("gres/gpu", 2), ("gres/nic", 1)] (a missing count is 1)."""
    counts: dict[str, int] = {}
    for item in text.split(","):
        fields = item.split("(", 1)[0].split(":")
        if not fields[0]:
            continue
        last = fields[-1]
        count = int(last) if len(fields) > 1 and last.isdigit() else 1
        key = f"gres/{fields[0]}"
        counts[key] = counts.get(key, 0) + count
    return list(counts.items())


@dataclass(frozen=True, slots=True)
class PriorityFactors:
    """A job's priority in one partition and every factor of it (what sprio shows).

    The factors are normalised (0..1 without ``NO_NORMAL_*`` flags); the
    ``weighted_*`` properties are factor x weight, the terms Slurm sums.
    ``direct`` is an administrator's priority, which replaces the formula.
    """

    job_id: int
    partition: str
    qos: str
    weights: Weights
    age: float = 0.0
    assoc: float = 0.0
    fairshare: float = 0.0
    job_size: float = 0.0
    partition_factor: float = 0.0
    qos_factor: float = 0.0
    tres: tuple[tuple[str, float], ...] = ()
    site: int = 0
    nice: int = 0
    direct: int | None = None
    held: bool = False

    @property
    def weighted_age(self) -> float:
        return self.age * self.weights.age

    @property
    def weighted_assoc(self) -> float:
        return self.assoc * self.weights.assoc

    @property
    def weighted_fairshare(self) -> float:
        return self.fairshare * self.weights.fairshare

    @property
    def weighted_job_size(self) -> float:
        return self.job_size * self.weights.job_size

    @property
    def weighted_partition(self) -> float:
        return self.partition_factor * self.weights.partition

    @property
    def weighted_qos(self) -> float:
        return self.qos_factor * self.weights.qos

    @property
    def weighted_tres(self) -> tuple[tuple[str, float], ...]:
        weight = dict(self.weights.tres)
        return tuple((name, factor * weight.get(name, 0.0)) for name, factor in self.tres)

    @property
    def priority(self) -> int:
        """The job's priority in this partition, as ``_get_priority_internal`` sums it."""
        if self.held:
            return 0
        if self.direct is not None:
            return self.direct
        total = (
            self.weighted_age
            + self.weighted_assoc
            + self.weighted_fairshare
            + self.weighted_job_size
            + self.weighted_partition
            + self.weighted_qos
            + sum(value for _, value in self.weighted_tres)
            + self.site
            - self.nice
        )
        if total < 1:
            return 1
        return min(int(total), MAX_PRIORITY)


def job_priorities(job: PriorityJob, now: int, cluster: Cluster) -> tuple[PriorityFactors, ...]:
    """The job's priority factors in each of its partitions, in its partition order.

    Slurm keeps one priority per partition for a job submitted to several
    (``priority_array``) and sprio prints a row for each.
    """
    names = job.partitions or ("",)
    return tuple(factors(job, name, now, cluster) for name in names)


def job_priority(job: PriorityJob, now: int, cluster: Cluster) -> int:
    """The job's priority: the one in its first partition (Slurm's ``part_ptr``)."""
    if job.held:
        return 0
    if job.admin_priority is not None:
        return job.admin_priority
    return factors(job, job.partitions[0] if job.partitions else "", now, cluster).priority


@dataclass(frozen=True, slots=True)
class Ranking:
    """Pending jobs' priorities as one calculation (``rank`` at ``at``) left them.

    Slurm's priority thread recomputes pending jobs every PriorityCalcPeriod and
    a job keeps its number between passes; so the ranking is one value, replaced
    whole at each tick, that the scheduler gets inside its snapshot. A job the
    calculation did not see (submitted, requeued or split off an array since)
    has the priority recorded on it (``Job.calc_priority``: worked out at
    submission, and the ranked one it started with).
    """

    at: int = 0
    values: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))

    def computed(self, job: Job) -> int:
        """``job``'s priority by the formula, before holds and an administrator's value."""
        return self.values.get(job.job_id, job.calc_priority)

    def of(self, job: Job) -> int:
        """``job``'s priority: 0 while held, else an administrator's value, else computed."""
        if job.held:
            return 0
        if job.admin_priority is not None:
            return job.admin_priority
        return self.values.get(job.job_id, job.calc_priority)

    def __deepcopy__(self, memo: dict[int, object]) -> Ranking:
        """Immutable (``rank`` keeps no handle on the mapping it wraps): its own copy."""
        return self


#: Before the first calculation: every job has its recorded priority.
NO_RANKING = Ranking()


def rank(pending: Iterable[Job], now: int, cluster: Cluster) -> Ranking:
    """Every pending job's multifactor priority at ``now``."""
    return Ranking(
        now,
        MappingProxyType(
            {j.job_id: job_priority(PriorityJob.from_job(j), now, cluster) for j in pending}
        ),
    )


def factors(job: PriorityJob, partition: str, now: int, cluster: Cluster) -> PriorityFactors:
    """Every factor of ``job``'s priority in ``partition`` at ``now``."""
    if job.admin_priority is not None and not job.held:
        return PriorityFactors(
            job_id=job.job_id,
            partition=partition,
            qos=job.qos,
            weights=cluster.weights,
            nice=job.nice,
            direct=job.admin_priority,
        )
    part = cluster.partitions.get(partition)
    return PriorityFactors(
        job_id=job.job_id,
        partition=partition,
        qos=job.qos,
        weights=cluster.weights,
        age=_age(job, now, cluster.config),
        fairshare=cluster.fairshare.get((job.account, job.user), 0.0),
        job_size=_job_size(job, part, cluster),
        partition_factor=_partition(part, cluster),
        qos_factor=_qos(job, cluster),
        tres=_tres(job, part, cluster),
        nice=job.nice,
        held=job.held,
    )


def _age(job: PriorityJob, now: int, config: PriorityConfig) -> float:
    """``min(now - accrue_time, max_age) / max_age`` (1 once max_age is reached)."""
    since = job.submit_time if config.flag("ACCRUE_ALWAYS") else job.accrue_time
    if since <= 0:
        return 0.0
    waited = max(now - since, 0)
    if waited < config.max_age:
        return waited / config.max_age
    return 1.0


def _job_size(job: PriorityJob, part: PartitionFacts | None, cluster: Cluster) -> float:
    """Slurm's job-size factor over the active nodes and the cluster's CPUs."""
    nodes, cluster_cpus = cluster.nodes, cluster.cpus
    if nodes <= 0 or cluster_cpus <= 0:
        return 0.0
    config = cluster.config
    cpus, min_nodes = job.cpus, job.min_nodes
    if config.flag("SMALL_RELATIVE_TO_TIME"):
        size = max(min_nodes * cluster_cpus / nodes, float(cpus))
        limit = job.time_limit
        if limit < 0 and part is not None:
            limit = part.max_time
        size /= _INFINITE if limit < 0 else max(limit, 1)
        size /= cluster_cpus
        if config.favor_small:
            size = 1.0 - size
    elif config.favor_small:
        size = (nodes - min_nodes) / nodes if nodes > min_nodes else 0.0
        if cpus:
            size = (size + (cluster_cpus - cpus) / cluster_cpus) / 2
    else:
        size = min_nodes / nodes
        if cpus:
            size = (size + cpus / cluster_cpus) / 2
    return min(max(size, 0.0), 1.0)


def _partition(part: PartitionFacts | None, cluster: Cluster) -> float:
    """PriorityJobFactor over the largest of any partition (raw with NO_NORMAL_PART)."""
    if part is None or not part.priority_job_factor:
        return 0.0
    if cluster.config.flag("NO_NORMAL_PART"):
        return float(part.priority_job_factor)
    return part.priority_job_factor / cluster.max_partition_factor


def _qos(job: PriorityJob, cluster: Cluster) -> float:
    """The QOS priority over the largest QOS priority (raw with NO_NORMAL_QOS)."""
    priority = cluster.qos_priority.get(job.qos, 0)
    if not priority:
        return 0.0
    if cluster.config.flag("NO_NORMAL_QOS"):
        return float(priority)
    return priority / max(cluster.qos_priority.values())


def _tres(
    job: PriorityJob, part: PartitionFacts | None, cluster: Cluster
) -> tuple[tuple[str, float], ...]:
    """Per weighted TRES, the request over the partition's total (raw with NO_NORMAL_TRES)."""
    raw = cluster.config.flag("NO_NORMAL_TRES")
    out = []
    for name, _ in cluster.weights.tres:
        wanted = job.requested(name)
        total = 0 if part is None else part.total(name)
        if raw:
            out.append((name, float(wanted)))
        else:
            out.append((name, wanted / total if wanted and total else 0.0))
    return tuple(out)


def basic_priority(lowest: int | None, nice: int = 0) -> int:
    """priority/basic: one less than the lowest priority given so far, minus ``nice``.

    ``lowest`` is None for the first job since the controller started
    (Slurm starts at 0xffff0000, so the first job gets 4294901759). The
    controller keeps ``lowest`` and updates it only with jobs that have no
    nice value and no administrator priority, as Slurm's ``set_job_prio``.
    """
    top = _BASIC_TOP if lowest is None else lowest
    return max(min(top - 1 - nice, MAX_PRIORITY), 1)
