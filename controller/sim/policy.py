"""The policy hook: where a replay hands its decisions to the scheduling core.

Every scheduling decision of ``corral sim`` is made by ``controller.core.schedule``,
the same pure function the controller's loop calls, and every call of it goes
through ``call_core`` below: the one place that passes the chosen policy on to
the core. The one exception is ``call_pass``'s: on the trace's own nodes of one CPU,
the policies' passes go to ``onecpu.py``, the core's pass restated in C for exactly
that input and compared with it decision by decision by the tests (a pass there
costs a tenth of the core's, which makes whole-trace backfill replays seconds).
Policies are picked by name from ``POLICIES`` (a registry, as Nomad's
``BuiltinSchedulers``); each decides which pending jobs to show the core and when
a call can be skipped, and commits the plan to the simulated cluster.

``fcfs`` is Slurm's main scheduler (priority order; the first job a partition
cannot start blocks the rest), which ``schedule`` runs when it is given no
backfill parameters. ``conservative`` and ``easy`` add the core's backfill pass
(Slurm's defaults unless ``--sched-params`` sets them, and
``bf_job_part_count_reserve=1`` for ``easy``), shown only the jobs that can
change a start (``Backfilling``).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from itertools import chain, islice
from typing import Protocol

from controller.core import BackfillParams, PartitionView, Plan, Snapshot, schedule
from controller.core.timeline import ceil_to
from controller.model import Job
from controller.sim.errors import SimError
from controller.sim.onecpu import job_test_limit, one_cpu_pass
from controller.sim.shadow import run_length, shadow

#: How many pending jobs the main scheduler shows the core first (doubled while all start).
FIRST_DEPTH = 8


class Cluster(Protocol):
    """What a policy sees of the simulated cluster (``replay.SimCluster``)."""

    @property
    def free_cpus(self) -> int: ...

    @property
    def cpus_per_node(self) -> int:
        """The CPUs of every node (the trace's own cluster)."""
        ...

    def releases(self) -> Iterator[tuple[int, int]]:
        """(time limit, CPUs) of every running job: when the core expects its CPUs back."""
        ...

    def queue(self, depth: int | None = None) -> tuple[Job, ...]:
        """The first ``depth`` pending jobs (all when None) in the core's order."""
        ...

    def waiting(self) -> Iterator[Job]:
        """Every pending job in the core's order, lazily."""
        ...

    def free_cpus_outside(self, nodes: AbstractSet[str]) -> int:
        """The free CPUs of the nodes not in ``nodes``."""
        ...

    def one_cpu(self) -> tuple[array[int], tuple[str, ...], PartitionView] | None:
        """On the trace's own nodes of one CPU: per node in selection order, -1 while
        free, else the end time the core knows for its job; the node names in that
        order; their partition (what ``onecpu.one_cpu_pass`` reads). None elsewhere."""
        ...

    def snapshot(self, pending: tuple[Job, ...], busy: bool = True) -> Snapshot:
        """The cluster with ``pending``; without the nodes that have no free CPU unless ``busy``."""
        ...

    def commit(self, plan: Plan) -> None:
        """Start what ``plan`` starts, at ``plan.now``."""
        ...


@dataclass(slots=True)
class CoreCalls:
    """What the core cost: calls, seconds inside ``schedule`` (or its C restatement,
    ``call_pass``), pending jobs shown to it."""

    count: int = 0
    seconds: float = 0.0
    jobs: int = 0


def call_core(backfill: BackfillParams | None, snap: Snapshot, now: int, calls: CoreCalls) -> Plan:
    """THE policy hook: the only call of ``controller.core.schedule`` in the sim;
    ``backfill`` None runs the main scheduler alone."""
    began = time.perf_counter()
    plan = schedule(snap, now, backfill)
    calls.seconds += time.perf_counter() - began
    calls.count += 1
    calls.jobs += len(snap.pending)
    return plan


def call_pass(
    backfill: BackfillParams | None,
    cluster: Cluster,
    pending: tuple[Job, ...],
    now: int,
    calls: CoreCalls,
    busy: bool = True,
) -> Plan:
    """The core's plan for ``pending``: on nodes of one CPU its C restatement
    (``onecpu.py``, shown equal by the tests), else ``call_core`` on the cluster's
    snapshot (``busy``: with the nodes that have no free CPU)."""
    one = cluster.one_cpu()
    if one is None:
        return call_core(backfill, cluster.snapshot(pending, busy), now, calls)
    began = time.perf_counter()
    plan = one_cpu_pass(*one, pending, now, backfill)
    calls.seconds += time.perf_counter() - began
    calls.count += 1
    calls.jobs += len(pending)
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
                cluster.commit(call_core(None, cluster.snapshot(pending), now, self.calls))
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
            plan = call_pass(None, cluster, pending, now, self.calls, busy=False)
            cluster.commit(plan)
            if len(plan.starts) < len(pending):
                self._blocked = True
                return
            if len(pending) < limit:  # the whole queue started
                self._blocked = False
                return
            depth *= 2


class Backfilling:
    """``conservative`` or ``easy``: the main scheduler plus backfill.

    With ``whole_queue`` the core sees every pending job and every node at
    every event, as in the controller. Otherwise it is shown only the jobs
    whose presence can change a start (the unit tests compare both ways job by
    job). Every sim job asks for tasks of one CPU and no memory, so a job fits
    the free CPUs now exactly when it needs no more than are free, and:

    * the main pass starts the jobs ahead of the first that does not fit (the
      head) and blocks the partition there; they are shown, then the head;
    * behind the head, only the jobs backfill tests (``bf_max_job_test``
      counts from the head, and ``bf_max_job_user`` too: every sim job has
      the same user) may start, and only those needing no more CPUs
      than the main pass left free, since starts only take more;
    * ``easy``: only the head reserves, so of the jobs behind it only those
      that may start are shown; ``conservative``: every tested job reserves
      and the reservations of jobs ahead decide whether one may start, so the
      queue is shown up to the last job that may start;
    * no job behind the head may start: the core is asked for the main pass
      alone (its starts do not depend on what backfill would plan), on the
      nodes with a free CPU; nothing may start at all: no call;
    * ``easy`` on nodes of one CPU: the jobs that would run into the head's
      plan and need more CPUs than it leaves free are left out, the plan
      counted rather than placed (``shadow.py``); none left: no call; where
      the plan cannot touch those left, the main pass starts them alone;
    * ``easy``, while nothing has started or ended since a pass that started
      nothing: the jobs that cannot start beside its plan for the head, which
      still holds (``_Failed``), are left out; none left: no call.

    The jobs shown go to ``call_pass``: on nodes of one CPU the C restatement of
    the core's pass decides, elsewhere the core.
    """

    def __init__(self, name: str, params: BackfillParams, whole_queue: bool = False) -> None:
        self.name = name
        self.params = params
        self.whole_queue = whole_queue
        self.calls = CoreCalls()
        # ``easy`` only: what the last backfill pass left, while nothing has started or
        # ended since (``_Failed``); None when something has or a pass could differ.
        self._failed: _Failed | None = None

    def decide(self, cluster: Cluster, now: int, freed: bool) -> None:
        if self.whole_queue:
            if pending := cluster.queue():
                plan = call_core(self.params, cluster.snapshot(pending), now, self.calls)
                cluster.commit(plan)
            return
        if freed:
            self._failed = None
        free = cluster.free_cpus
        shown: list[Job] = []
        queue = cluster.waiting()
        head: Job | None = None
        for job in queue:
            if job.cpus_needed > free:
                head = job
                break
            free -= job.cpus_needed
            shown.append(job)
        behind: list[Job] = []
        tested = job_test_limit(self.params)
        if head is not None and tested > 1:
            last = -1  # in ``behind``: the last job that may start
            for job in islice(queue, tested - 1):
                if job.cpus_needed <= free:
                    last = len(behind)
                    behind.append(job)
                elif not self.params.easy:
                    behind.append(job)
            del behind[last + 1 :]
        if behind and self.params.easy and cluster.cpus_per_node == 1:
            assert head is not None
            behind, unblocked = self._beside_plan(cluster, now, shown, head, behind, free)
            if unblocked:  # they start as the main pass would start them: in order, if they fit
                for job in behind:
                    if job.cpus_needed <= free:
                        free -= job.cpus_needed
                        shown.append(job)
                behind = []
        known: frozenset[int] = frozenset()  # behind the head, tested in vain already
        failed = self._failed
        if behind and not shown and failed is not None:
            assert head is not None
            if failed.holds(head, now, self.params.resolution):
                known = failed.jobs
                behind = [job for job in behind if job.job_id not in known]
                extra = cluster.free_cpus_outside(failed.nodes)
                hopeless = frozenset(
                    job.job_id
                    for job in behind
                    if failed.blocks(job, now, self.params.resolution) and job.cpus_needed > extra
                )
                known |= hopeless
                behind = [job for job in behind if job.job_id not in hopeless]
                if not behind:
                    if hopeless:
                        self._failed = replace(failed, jobs=known)
                    return  # the same plan as the last pass: no start
        if behind:
            assert head is not None
            plan = call_pass(self.params, cluster, (*shown, head, *behind), now, self.calls)
            cluster.commit(plan)
            self._remember(plan, head, behind, known)
        elif shown:
            plan = call_pass(None, cluster, tuple(shown), now, self.calls, busy=False)
            cluster.commit(plan)
            if plan.starts:
                self._failed = None

    def _beside_plan(
        self,
        cluster: Cluster,
        now: int,
        shown: list[Job],
        head: Job,
        behind: list[Job],
        free: int,
    ) -> tuple[list[Job], bool]:
        """The jobs of ``behind`` that may start beside the head's plan, counted
        (``shadow.py``), and whether the plan leaves them all alone; ``free``: the
        CPUs free after the main pass's starts.

        The plan leaves them alone when there is none in the window, when it takes
        no node free now, or when each of them ends before it can begin: backfill then
        places each as the main pass would (no node it could take is reserved), so
        the main pass starts them, without the head and its reservation.
        """
        params = self.params
        started = ((now + run_length(job, params), job.cpus_needed) for job in shown)
        plan = shadow(chain(cluster.releases(), started), free, head.cpus_needed, now, params)
        if plan is None:
            return behind, True
        kept = [j for j in behind if j.cpus_needed <= plan.extra or not plan.blocks(j, now, params)]
        alone = plan.extra == free or all(plan.clear(j, now, params) for j in kept)
        return kept, alone

    def _remember(self, plan: Plan, head: Job, behind: list[Job], known: frozenset[int]) -> None:
        """Keep what a pass that started nothing proves for the next (``_Failed``);
        ``known``: the jobs left out of it, which an earlier pass proved cannot start."""
        expected = plan.expected.get(head.job_id)
        if plan.starts or not self.params.easy or expected is None:
            self._failed = None
            return
        ids = known | frozenset(job.job_id for job in behind)
        self._failed = _Failed(head.job_id, expected.start_time, frozenset(expected.nodes), ids)


@dataclass(frozen=True, slots=True)
class _Failed:
    """``easy``: a backfill pass that started nothing, and the jobs it tested in vain.

    While no job starts or ends, a later pass at ``now`` plans the head exactly as
    this one did if its reservation starts at ``now + bf_resolution`` or later:

    * the running jobs and their limits are the same, so every trial time's free
      resources are; trial times between the old and the new first one hold those
      of some time the head did not fit at (the free resources change only at a
      limit, each a trial time), and the time it fit at is still one (it is on the
      grid, after the new first), so the head fits first at the same time, on the
      same nodes (the pass's first plan: nothing is reserved or remembered yet);
      ``bf_window`` only grows with ``now`` and adds limits after that time;
    * the start moves back to ``max(ceil(ready), now + resolution)`` (``_sooner``),
      where ready is the last limit those nodes wait for, or now; a start at or
      after ``now + resolution`` is ``ceil(ready)`` then and stays it later on.

    A job tested in vain then still cannot start: the free nodes are the same, only
    the head reserves (``easy``), and the interval a start now would take,
    ``[now, now + its limit)``, overlaps the same plan at least as much as before.
    Nor can a job start that arrived since, whose run from now would reach past
    the planned start (rounded up as backfill rounds it: ``blocks``), when it
    needs more CPUs than the nodes outside the plan have free: each of its tasks
    needs a free CPU on a node the plan does not hold.

    So those jobs are left out of the next pass (they neither start nor reserve),
    and with no other job behind the head there is no call (proved by
    ``tests/unit/test_sim_backfill.py``, which compares every start with the
    controller's way).
    """

    head: int  # the job id of the head, whose plan is kept
    start: int  # its planned start
    nodes: frozenset[str]  # the nodes planned for it
    jobs: frozenset[int]  # the jobs behind it that cannot start

    def holds(self, head: Job, now: int, resolution: int) -> bool:
        """Whether a pass at ``now`` plans ``head`` as the remembered one did."""
        return head.job_id == self.head and self.start >= now + resolution

    def blocks(self, job: Job, now: int, resolution: int) -> bool:
        """Whether ``job`` started now would run into the plan (a job without a
        limit of its own runs for the window: not decided here, so False)."""
        if job.time_limit <= 0:
            return False
        return self.start < ceil_to(now + job.time_limit * 60, resolution)


#: Policy name → constructor (argument: show the core the whole queue on every call).
POLICIES: dict[str, Callable[[bool, BackfillParams], Policy]] = {
    "fcfs": lambda whole, _params: MainScheduler(whole),
    "conservative": lambda whole, params: Backfilling(
        "conservative", replace(params, easy=False), whole
    ),
    "easy": lambda whole, params: Backfilling("easy", replace(params, easy=True), whole),
}

#: Every name ``--policy`` accepts.
NAMES = tuple(POLICIES)


def choose(name: str, whole_queue: bool = False, params: BackfillParams | None = None) -> Policy:
    """The policy called ``name``, or a SimError saying why it cannot run.

    ``params``: the backfill policies' SchedulerParameters (Slurm's defaults
    when None); ``fcfs`` has no backfill to shape.
    """
    if name in POLICIES:
        return POLICIES[name](whole_queue, params or BackfillParams())
    raise SimError(f"unknown policy {name!r} (choose from {', '.join(NAMES)})")
