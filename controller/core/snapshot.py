"""What the scheduler sees: an immutable picture of the cluster at ``now``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.gpulinks import Links
from controller.core.limits import Gate
from controller.core.priority import NO_RANKING, Ranking
from controller.core.quota import Amounts, RunningJob, Shares
from controller.core.topomodel import Topology
from controller.model import Job
from corral.queueconf import QueueConf

#: Generic resources: (name, type, count) items; type "" = untyped.
Gres = tuple[tuple[str, str, int], ...]


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """A node's GPUs as the core names a start's devices: its GPUs as (type, index),
    those given whole and those with shares in use, the CPUs near each GPU
    (gres.conf Cores= or the probe) and the links between them (gres.conf Links=
    or the probe: ``core/gpulinks.py``)."""

    numbers: tuple[tuple[str, int], ...]
    whole: frozenset[int] = frozenset()
    shared: frozenset[int] = frozenset()
    near: tuple[tuple[int, tuple[int, ...]], ...] = ()
    links: Links = ()


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node as the scheduler sees it.

    ``free_cpus`` are the idle CPUs; jobs that share CPUs (OverSubscribe) are
    listed per partition in ``shared``, and ``unshared`` says a job keeps its
    CPUs here. How starts and ends change them, and when a job fits, is
    ``core/nodefree.py`` (its docstring has the OverSubscribe rules).
    """

    name: str
    cpus: int
    real_memory: int
    weight: int
    features: frozenset[str]
    free_cpus: int
    free_memory: int
    usable: bool  # responding, not DOWN, not DRAIN
    idle: bool  # no job on it (needed by --exclusive)
    gres: Gres = ()  # free count per (name, type), in configuration order
    # A job that does not share its CPUs runs here: jobs that share may not join
    # (Slurm's node_state NODE_CR_ONE_ROW or NODE_CR_RESERVED).
    unshared: bool = False
    # Jobs sharing CPUs, per partition: (partition, CPUs asked in all, most CPUs of one job).
    shared: tuple[tuple[str, int, int], ...] = ()
    # CPUs a job is given at a time on this node: ThreadsPerCore when
    # SelectTypeParameters allocates cores (CR_Core*, the default), else 1.
    unit: int = 1
    # The node's place in the configuration: with Weight, its position in the
    # node bitmap (nodeindex.NodeOrder); equal ranks keep the snapshot's order.
    rank: int = 0
    # Its GPUs, for naming a start's devices (core/devices.py); None on a node
    # without GPUs. One field, so that copying a view stays cheap.
    devices: NodeDevices | None = None
    # The CPU ids jobs hold here, as bitmasks (bit c: CPU c): those of jobs that keep
    # their CPUs, and, per load, those of jobs that share them (OverSubscribe):
    # ``shared_ids[k]`` has the CPUs more than k sharing jobs were given. core/devices.py
    # names a start's CPUs from them; ints, so a view stays cheap to make and copy.
    kept_ids: int = 0
    shared_ids: tuple[int, ...] = ()
    sockets: int = 1  # what --sockets-per-node asks a node to have

    @property
    def busy_ids(self) -> int:
        """The CPUs no new job may take whole: those jobs keep, and those sharing jobs
        were given."""
        return self.kept_ids | (self.shared_ids[0] if self.shared_ids else 0)


@dataclass(frozen=True, slots=True)
class PartitionView:
    name: str
    nodes: tuple[str, ...]
    state: str
    max_time: int  # minutes, -1 UNLIMITED
    max_nodes: int | None
    min_nodes: int
    priority_tier: int
    def_mem_per_cpu: int
    def_mem_per_node: int
    max_mem_per_node: int
    exclusive: bool  # OverSubscribe=EXCLUSIVE
    max_share: int = 1  # OverSubscribe=YES:n or FORCE:n: jobs that may share a CPU
    force: bool = False  # OverSubscribe=FORCE: every job shares (YES: jobs that ask)
    # The nodes in selection order (Weight, then configuration order), computed once per
    # configuration; empty: place() sorts ``nodes`` itself.
    order: tuple[str, ...] = ()
    # MaxCPUsPerNode: the most CPUs a job of the partition gets on one node (None: all).
    max_cpus_per_node: int | None = None
    # Its nodes' switches or blocks (TopologyPlugin=topology/tree or topology/block;
    # core/topology.py); None: one flat list of nodes.
    topology: Topology | None = None
    # DefCpuPerGPU, DefMemPerGPU (MiB): what a GPU job that sets neither -c nor
    # --cpus-per-gpu (nor --mem, --mem-per-cpu, --mem-per-gpu) gets per GPU; 0: nothing.
    def_cpu_per_gpu: int = 0
    def_mem_per_gpu: int = 0


def oversubscribe(value: str) -> tuple[bool, int, bool]:
    """A partition's OverSubscribe as (exclusive, max_share, force).

    ``NO`` -> (False, 1, False), ``EXCLUSIVE`` -> (True, 1, False), ``YES:4``
    -> (False, 4, False), ``FORCE:2`` -> (False, 2, True); the count defaults to 4.
    """
    mode, _, count = value.upper().partition(":")
    if mode in ("YES", "FORCE"):
        return False, int(count or 4), mode == "FORCE"
    return mode == "EXCLUSIVE", 1, False


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What dependency checks need to know about another job."""

    state: str  # JobState name
    exit_status: int
    name: str
    uid: int
    array_job_id: int
    array_task_id: int | None
    start_time: int
    array_pending: str = ""  # an array's tasks not started yet (its own record only)


@dataclass(frozen=True, slots=True)
class Running:
    """A job holding nodes, and when its time limit frees them (0: no limit)."""

    job_id: int
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]
    end_time: int
    gres: tuple[Gres, ...] = ()  # per node, as allocated (empty: none recorded)
    # What preemption weighs (core/preempt.py): running and not yet ending.
    preemptable: bool = False
    requeue: bool = False  # it may be requeued (--requeue, JobRequeue)
    priority: int = 0
    qos: str = ""
    partition: str = ""
    start_time: int = 0
    share: int = 0  # it shares its CPUs, up to this many jobs per CPU (0: it keeps them)
    user: str = ""  # who runs it (why.py names the jobs a pending one waits for)
    # Its PreemptMode as snapshots.py resolves it (QOS, partition, global): "CANCEL",
    # "REQUEUE", "OFF" (never a victim), or "" for the policy's global mode.
    mode: str = ""
    grace: int = 0  # GraceTime: seconds between its warning signal and the mode's action
    eligible: int = 0  # PreemptEligibleTime: no victim before (PreemptExemptTime)
    signal: bool = False  # it asked to be told before it ends (--signal)
    checkpointed: int = 0  # when it last reported a checkpoint (0: never)
    preempted_for: int = 0  # in its GraceTime, preempted for this waiting job
    licenses: str = ""  # -L: the licenses it holds until it ends (core/licensebook.py)
    reservation: str = ""  # the reservation it runs in (its licenses may be the reservation's)


@dataclass(frozen=True, slots=True)
class ResvView:
    """An advance reservation as the core sees it: ``nodes`` kept for its jobs
    during ``[start, end)`` (controller/reservations.py owns the rest)."""

    name: str
    nodes: frozenset[str]
    start: int
    end: int
    licenses: tuple[tuple[str, int], ...] = ()  # kept for its jobs (core/licensebook.py)
    # Flags=ANY_NODES (a reservation of licenses): its jobs may use any node, its own too.
    any_nodes: bool = False


@dataclass(frozen=True, slots=True)
class PreemptPolicy:
    """PreemptType and who may preempt whom."""

    kind: str  # "qos" or "partition_prio"
    requeue: bool = False  # PreemptMode=REQUEUE: victims that may be requeued are (else cancelled)
    qos: Mapping[str, frozenset[str]] = field(default_factory=dict)  # QOS -> QOS it preempts
    tiers: Mapping[str, int] = field(default_factory=dict)  # partition -> PriorityTier
    # PreemptMode's WITHIN (preempt/qos): jobs of these QOS preempt lower-priority jobs
    # of their own QOS; ``within_all``: every QOS (the slurm.conf word).
    within: frozenset[str] = frozenset()
    within_all: bool = False
    # PreemptParameters=min_exempt_priority: a job of this priority or more is never a
    # victim (None: any priority may be).
    min_exempt_priority: int | None = None
    # PreemptParameters=reclaim_licenses: a job waiting for licenses may preempt too.
    reclaim_licenses: bool = False

    def mode_of(self, victim: Running) -> str:
        """What is done to ``victim``: its own PreemptMode, else the global one."""
        return victim.mode or ("REQUEUE" if self.requeue else "CANCEL")

    def may_preempt(self, job: Job, victim: Running, priority: int = 0) -> bool:
        """Whether ``job`` (of ``priority``) may preempt ``victim``."""
        if self.min_exempt_priority is not None and victim.priority >= self.min_exempt_priority:
            return False
        if self.kind == "qos":
            if victim.qos in self.qos.get(job.qos, frozenset()):
                return True
            same = victim.qos == job.qos and (self.within_all or job.qos in self.within)
            return same and priority > victim.priority
        tier = max((self.tiers.get(p, 0) for p in job.partitions), default=0)
        return tier > self.tiers.get(victim.partition, 0)


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """A pending job in a queue: what it asks for at its smallest, and whether its
    queue lets it be preempted (a job that cannot be runs only within quota)."""

    queue: str
    request: Amounts
    preemptible: bool
    eligible_time: int
    # A job naming --gres alternatives: the request of each, in its order (core/flavors.py).
    flavors: tuple[Amounts, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueView:
    """The queues as one pass sees them."""

    conf: QueueConf
    shares: Shares
    allocated: Mapping[str, Amounts]  # leaf queue -> what its running jobs hold
    entries: Mapping[int, QueueEntry]  # pending jobs, by id (in no queue: the root)
    running: tuple[RunningJob, ...]  # running jobs in a queue


@dataclass(frozen=True, slots=True)
class Elastic:
    """A running elastic job that may change size (``core/elastic.py``): its record
    (nodes, CPUs, request), the most nodes it may hold now (``-N`` max, its
    partition's MaxNodes and its per-job accounting limits), what one node more adds
    to the accounting limits it counts against (``gates``, amounts per node), and for
    queues.conf its queue and what one node more adds there (``request``) and what
    each node it holds counts (``held``, in ``job.nodes`` order)."""

    job: Job
    most: int
    gates: tuple[Gate, ...] = ()
    queue: str = ""
    request: Amounts = field(default_factory=dict)
    held: tuple[Amounts, ...] = ()
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: Mapping[str, NodeView]
    partitions: Mapping[str, PartitionView]
    pending: tuple[Job, ...]
    jobs: Mapping[int, JobFacts]
    running_per_array: Mapping[int, int]
    running: tuple[Running, ...] = ()
    # Accounting limits (core/limits.py): per pending job the gates it must fit
    # under, and what running jobs hold of each counter.
    gates: Mapping[int, tuple[Gate, ...]] = field(default_factory=dict)
    usage: Mapping[str, int] = field(default_factory=dict)
    # Advance reservations not yet ended (core/resvwindows.py).
    reservations: tuple[ResvView, ...] = ()
    # PreemptType (core/preempt.py); None: no preemption.
    preempt: PreemptPolicy | None = None
    # Pending jobs' priorities from the last PriorityCalcPeriod (core/priority.py).
    ranking: Ranking = NO_RANKING
    # Team queues (queues.conf; core/queueplan.py); None: no queues configured.
    queues: QueueView | None = None
    # Running elastic jobs that may grow or shrink, by id (core/elastic.py).
    elastic: Mapping[int, Elastic] = field(default_factory=dict)
    # slurm.conf Licenses=: each license's total (core/licensebook.py).
    licenses: Mapping[str, int] = field(default_factory=dict)
    # Pending jobs' queue keys worked out before (``schedule.order_key``), each with
    # the job it is for: the order of 100,000 jobs without making 100,000 keys.
    queue_keys: Mapping[int, tuple[Job, tuple[int, ...]]] = field(default_factory=dict)
