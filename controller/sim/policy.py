"""The policy hook: where a replay hands its decisions to the scheduling core.

Every scheduling decision of ``corral sim`` is made by ``controller.core.schedule``,
the same pure function the controller's loop calls, and every call of it goes
through ``call_core`` below: the one place that passes the chosen policy on to
the core. Policies are picked by name from ``POLICIES`` (a registry, as Nomad's
``BuiltinSchedulers``); each decides which pending jobs to show the core and when
a call can be skipped, and commits the plan to the simulated cluster.

``fcfs`` is Slurm's main scheduler (priority order; the first job a partition
cannot start blocks the rest), which ``schedule`` runs when it is given no
backfill parameters. ``conservative`` and ``easy`` add the core's backfill pass
(Slurm's defaults, and ``bf_job_part_count_reserve=1``) at every event, over
the whole queue and every node; the main scheduler's shortcuts below do not
hold under backfill.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from controller.core import BackfillParams, Plan, Snapshot, schedule
from controller.model import Job
from controller.sim.errors import SimError

#: The backfill each policy asks the core for (None: the main scheduler alone).
BACKFILL = {"fcfs": None, "conservative": BackfillParams(), "easy": BackfillParams(easy=True)}

#: How many pending jobs the main scheduler shows the core first (doubled while all start).
FIRST_DEPTH = 8


class Cluster(Protocol):
    """What a policy sees of the simulated cluster (``replay.SimCluster``)."""

    @property
    def free_cpus(self) -> int: ...

    def queue(self, depth: int | None = None) -> tuple[Job, ...]:
        """The first ``depth`` pending jobs (all when None) in the core's order."""
        ...

    def snapshot(self, pending: tuple[Job, ...], busy: bool = True) -> Snapshot:
        """The cluster with ``pending``; without the nodes that have no free CPU unless ``busy``."""
        ...

    def commit(self, plan: Plan) -> None:
        """Start what ``plan`` starts, at ``plan.now``."""
        ...


@dataclass(slots=True)
class CoreCalls:
    """What the core cost: calls, seconds inside ``schedule``, pending jobs shown to it."""

    count: int = 0
    seconds: float = 0.0
    jobs: int = 0


def call_core(
    policy: str,
    snap: Snapshot,
    now: int,
    calls: CoreCalls,
    backfill: BackfillParams | None = None,
) -> Plan:
    """THE policy hook: the only call of ``controller.core.schedule`` in the sim.
    ``backfill``: the parameters instead of the policy's own (slurm.conf's)."""
    began = time.perf_counter()
    plan = schedule(snap, now, backfill or BACKFILL[policy])
    calls.seconds += time.perf_counter() - began
    calls.count += 1
    calls.jobs += len(snap.pending)
    return plan


class Policy(Protocol):
    name: str
    calls: CoreCalls

    def decide(self, cluster: Cluster, now: int, freed: bool) -> None:
        """Schedule at ``now``; ``freed`` says whether a job ended since the last decision."""
        ...


class MainScheduler:
    """``fcfs``: Slurm's main scheduler (sched/builtin), as ``schedule`` runs it.

    Jobs are tried in priority order and the first that cannot start blocks the
    partition, so only a prefix of the queue can ever start, and a call's
    outcome is often known before it is made. Four shortcuts, none of which
    changes a decision (the unit tests compare with ``whole_queue=True``, the
    controller's way: every pending job and every node at every event):

    * the core is shown ``FIRST_DEPTH`` jobs, then twice as many while all of
      them start, and never more than free CPUs + 1 (each job needs a CPU, so
      one of those must wait);
    * only the nodes with a free CPU: a full node can take no task;
    * no call when the head of the queue needs more CPUs than are free;
    * no call when the head waited at the last decision and no job has ended
      since: arrivals queue behind it and nothing came free.
    """

    name = "fcfs"

    def __init__(self, whole_queue: bool = False) -> None:
        self.whole_queue = whole_queue
        self.calls = CoreCalls()
        self._blocked = False  # the head of the queue could not start at the last decision

    def decide(self, cluster: Cluster, now: int, freed: bool) -> None:
        if self.whole_queue:
            if pending := cluster.queue():
                cluster.commit(call_core(self.name, cluster.snapshot(pending), now, self.calls))
            return
        if self._blocked and not freed:
            return
        depth = FIRST_DEPTH
        while True:
            limit = min(depth, cluster.free_cpus + 1)
            pending = cluster.queue(limit)
            if not pending:
                self._blocked = False
                return
            if pending[0].cpus_needed > cluster.free_cpus:
                self._blocked = True
                return
            plan = call_core(self.name, cluster.snapshot(pending, busy=False), now, self.calls)
            cluster.commit(plan)
            if len(plan.starts) < len(pending):
                self._blocked = True
                return
            if len(pending) < limit:  # the whole queue started
                self._blocked = False
                return
            depth *= 2


class Backfilling:
    """``conservative`` or ``easy``: the main scheduler plus backfill, at every event.

    Backfill may start any job in the queue, so there are no shortcuts: the
    core sees every pending job and every node, as in the controller.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = CoreCalls()
        self.backfill: BackfillParams | None = None  # None: BACKFILL[name]

    def decide(self, cluster: Cluster, now: int, freed: bool) -> None:
        pending = cluster.queue()
        if pending:
            snap = cluster.snapshot(pending)
            cluster.commit(call_core(self.name, snap, now, self.calls, self.backfill))


#: Policy name → constructor (argument: show the core the whole queue on every call).
POLICIES: dict[str, Callable[[bool], Policy]] = {
    "fcfs": MainScheduler,
    "conservative": lambda _whole: Backfilling("conservative"),
    "easy": lambda _whole: Backfilling("easy"),
}

#: Every name ``--policy`` accepts.
NAMES = tuple(POLICIES)


def choose(name: str, whole_queue: bool = False, backfill: BackfillParams | None = None) -> Policy:
    """The policy called ``name``, or a SimError saying why it cannot run.

    ``backfill``: slurm.conf's bf_* parameters for a backfilling policy (its
    ``easy`` set by the policy's name).
    """
    if name in POLICIES:
        policy = POLICIES[name](whole_queue)
        params = BACKFILL[name]
        if backfill is not None and params is not None and isinstance(policy, Backfilling):
            policy.backfill = replace(backfill, easy=params.easy)
        return policy
    raise SimError(f"unknown policy {name!r} (choose from {', '.join(NAMES)})")
