"""``corral sim --queues``: the controller's team queues in a replay.

The replay's snapshots carry a ``QueueView`` built by the controller's own
``controller/queueviews.view`` from the sim's running and pending jobs (each
job charged to the account ``--queue-map`` gives it), so the core's admission
and reclaim decide in the replay exactly as in the controller. What the sim
cannot give the view:

* usage: the sim keeps no fair-share usage, so the surplus of a pass is
  divided by priority and over-quota weight alone (no time-decayed re-weighting);
* resources other than ``cpu`` and ``node``: SWF traces have no GPUs and the
  sim gives jobs no memory, so a queues.conf that names another resource is
  refused with its file and line rather than governing nothing.

Reclaimed jobs are requeued, as the controller requeues a victim that may be
(in the sim every job may): back to pending, their run lost, eligible again
after ``REQUEUE_DELAY`` (the controller's default ``requeue_delay``, Slurm's).

``QueueUse`` keeps, per leaf queue, what the report needs and the replay alone
knows: resource-seconds held (runs later lost to reclaim included) and held
above the queue's guarantee, the evictions of its jobs, and how many of its
waiting jobs reclaim evicted others for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controller import jobtres, queueviews
from controller.core.fairshare import Usage
from controller.core.priority import NO_RANKING
from controller.core.queueplan import QueueView
from controller.core.quotatree import Tree, inherited
from controller.core.snapshot import NodeView
from controller.model import Job
from controller.sim.errors import SimError
from controller.sim.queuemap import QueueMap
from corral import queueconf
from corral.confsyntax import ConfigError
from corral.queueconf import QueueConf

__all__ = ["GOVERNED", "REQUEUE_DELAY", "QueueUse", "SimQueues", "load_conf"]

#: The resources a sim's queues may govern (SWF traces have processors only).
GOVERNED = ("cpu", "node")

#: Seconds a requeued job waits before it may start again (SchedulerParameters=
#: requeue_delay's default in the controller, as Slurm's).
REQUEUE_DELAY = 121

_NO_USAGE = Usage()


def load_conf(path: str) -> QueueConf:
    """queues.conf at ``path``, refused (SimError with file and line) where it names a
    resource the sim cannot govern."""
    try:
        conf = queueconf.load(path)
    except ConfigError as exc:
        raise SimError(str(exc)) from None
    if conf is None:
        raise SimError(f"{path}: cannot read: no such file")
    for spec in conf.queues.values():
        for resource in spec.quotas:
            if resource not in GOVERNED:
                where = f"{spec.file}:{spec.line}: " if spec.line else f"{spec.file}: "
                raise SimError(
                    f"{where}queue {spec.name}: {resource}: SWF traces have no GPUs and the "
                    f"sim gives jobs no memory; the sim's queues may govern cpu and node only"
                )
    return conf


@dataclass(slots=True)
class QueueUse:
    """One leaf queue's record over a replay (seconds on the trace's clock)."""

    guarantee: dict[str, int]  # of each resource the queues govern (cpu, node)
    held: dict[str, int] = field(default_factory=dict)  # resource -> held now
    seconds: dict[str, float] = field(default_factory=dict)  # resource -> resource-seconds
    # The part above the queue's guarantee, of the resources the queues govern.
    borrowed: dict[str, float] = field(default_factory=dict)
    lost_cpu_seconds: float = 0.0  # of runs reclaim ended
    preempted: int = 0  # evictions of its jobs by reclaim
    reclaimed_for: int = 0  # its waiting jobs reclaim evicted others for (once per pass)


class SimQueues:
    """The queue tree, the map and the per-queue record of one replay."""

    def __init__(self, conf: QueueConf, qmap: QueueMap, nodes: Mapping[str, NodeView]) -> None:
        self.conf = conf
        self.qmap = qmap
        self.capacity = queueviews.capacity_of(nodes, nodes)  # every sim node is usable
        tree = Tree(conf)
        leaves = conf.leaves()
        # The governed resources (those some queue names), and CPUs always: the report's
        # utilization is in CPU-seconds whatever the queues govern.
        self.governed = tuple(r for r in tree.resources if r in GOVERNED)
        self.resources = tuple(dict.fromkeys(("cpu", *self.governed)))
        self.delay = {q: inherited(tree, q, "preemption_delay") for q in leaves}
        self.min_run = {q: inherited(tree, q, "reclaim_min_runtime") for q in leaves}
        self.use = {
            q: QueueUse({r: conf.queues[q].quota(r).guarantee for r in self.governed})
            for q in leaves
        }
        self._last = 0  # the time ``advance`` counted up to

    def account(self, user: int, group: int) -> str:
        return self.qmap.account(user, group)

    def queue_of(self, job: Job) -> str | None:
        """The leaf queue ``job`` lands in, as the controller decides it."""
        return queueviews.queue_of(self.conf, job, {})

    def view(self, running: Iterable[Job], pending: Iterable[Job]) -> QueueView:
        """The QueueView of one pass, built as the controller builds it."""
        return queueviews.view(
            self.conf, running, pending, self.capacity, None, _NO_USAGE, NO_RANKING
        )

    def held(self, job: Job) -> dict[str, int]:
        """What a running ``job`` counts in its queue, of the resources ``QueueUse`` keeps."""
        total = jobtres.of_job(job).total
        return {r: total.get(r, 0) for r in self.resources}

    def advance(self, now: int) -> None:
        """Count what every queue held from the last event up to ``now``."""
        span = now - self._last
        if span <= 0:
            return
        self._last = now
        for use in self.use.values():
            guarantee = use.guarantee
            for r, n in use.held.items():
                if n:
                    use.seconds[r] = use.seconds.get(r, 0.0) + n * span
                    above = n - guarantee.get(r, n)  # ungoverned: never borrowed
                    if above > 0:
                        use.borrowed[r] = use.borrowed.get(r, 0.0) + above * span

    def start(self, queue: str, held: Mapping[str, int]) -> None:
        use = self.use[queue]
        for r, n in held.items():
            use.held[r] = use.held.get(r, 0) + n

    def stop(self, queue: str, held: Mapping[str, int]) -> None:
        use = self.use[queue]
        for r, n in held.items():
            use.held[r] -= n
