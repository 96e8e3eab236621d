"""Trace replay on a simulated clock, through the real scheduling core.

Each trace record becomes a pending ``Job`` in one partition ``batch`` (all
nodes, MaxTime UNLIMITED) at its submit time, asking for its processors as
tasks of one CPU (packed onto as few nodes as hold them, as ``sbatch -n``
does) and for its requested time as the time limit. The core decides when it
starts; it then runs for the trace's run time, whatever its limit says.

Why it is fast enough for 200,000-job traces on a small machine:

* The clock jumps from event to event. All completions and submissions at one
  timestamp are applied together (completions first), then the policy decides
  once; timestamps where nothing happened do not exist.
* Node state is incremental: a dict of ``NodeView`` values that a start or an
  end updates for its own nodes only, and views are shared (one per node and
  free-CPU count), so nothing is rebuilt per decision.
* Pending jobs live in a dict in the core's order (arrival order, since every
  job has priority 1 and the core breaks ties by submit time, then job id), so
  a policy can show the core the first k jobs without sorting the queue.
* Policies (policy.py) skip calls whose outcome is certain.

Job ids are positions in the replayed records, sorted by submit time (file
order breaks ties), so the core's tie-break by job id is the trace's order;
results carry the trace's own job numbers.
"""

from __future__ import annotations

import heapq
import math
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from itertools import islice
from types import MappingProxyType
from typing import Protocol

from controller.core import BackfillParams, NodeView, PartitionView, Plan, Running, Snapshot
from controller.core.snapshot import JobFacts
from controller.jobstate import JobState, Reason
from controller.model import Job
from controller.sim.errors import SimError
from controller.sim.policy import CoreCalls, choose
from controller.sim.queuemap import QueueMap
from controller.sim.queues import REQUEUE_DELAY, QueueUse, SimQueues
from controller.sim.swf import Header, Record, Trace
from corral.queueconf import QueueConf

PARTITION = "batch"
NODE_MEMORY = 1024  # MiB; jobs ask for none, so any value will do
_NO_JOBS: Mapping[int, JobFacts] = MappingProxyType({})
_NO_ARRAYS: Mapping[int, int] = MappingProxyType({})

#: Why a record is not replayed (the CLI prints the counts).
SKIP_RUN = "run time <= 0"
SKIP_PROCS = "processors <= 0"
SKIP_SUBMIT = "submit time < 0"
SKIP_TOO_BIG = "more processors than the cluster"
SKIP_MALFORMED = "malformed line"  # not a job record (swf.Trace.malformed)


class PowerHooks(Protocol):
    """Power saving in a replay (controller/sim/powersim.py): told when nodes are
    given to a job and when a node goes idle."""

    def started(self, nodes: tuple[str, ...], now: int) -> int:
        """Seconds the job given ``nodes`` now waits for them to power up."""
        ...

    def idle(self, name: str, now: int) -> None: ...


def swf_job(record: Record, job_id: int, partitions: tuple[str, ...], account: str = "") -> Job:
    """The pending job a trace record submits: one-CPU tasks, its limit in minutes."""
    return Job(
        job_id=job_id,
        name=f"swf{record.number}",
        uid=0,
        gid=0,
        user="swf",
        group="swf",
        state=JobState.PENDING,
        reason=Reason.NONE,
        submit_time=record.submit,
        partitions=partitions,
        time_limit=math.ceil(record.limit / 60),
        num_tasks=record.procs,
        tasks_given=True,
        account=account,
    )


def cluster_shape(header: Header, nodes: int | None, cpus_per_node: int | None) -> tuple[int, int]:
    """Nodes and CPUs per node: the options, else the trace's MaxNodes and MaxProcs.

    CPUs per node default to MaxProcs / MaxNodes (rounded up; 1 without both);
    nodes to MaxNodes, else MaxProcs / CPUs per node.
    """
    max_nodes, max_procs = header.max_nodes, header.max_procs
    if cpus_per_node is None:
        cpus_per_node = -(-max_procs // max_nodes) if max_nodes and max_procs else 1
    if nodes is None:
        if max_nodes:
            nodes = max_nodes
        elif max_procs:
            nodes = -(-max_procs // cpus_per_node)
        else:
            raise SimError("the trace's header gives neither MaxNodes nor MaxProcs: use --nodes")
    if nodes < 1 or cpus_per_node < 1:
        raise SimError(f"a cluster needs at least 1 node and 1 CPU (got {nodes} x {cpus_per_node})")
    return nodes, cpus_per_node


def admit(records: tuple[Record, ...], total_cpus: int) -> tuple[list[Record], dict[str, int]]:
    """The records to replay, sorted by submit time, and how many were skipped why."""
    kept: list[Record] = []
    skipped: Counter[str] = Counter()
    for record in records:
        procs = record.procs
        if record.run <= 0:
            skipped[SKIP_RUN] += 1
        elif procs <= 0:
            skipped[SKIP_PROCS] += 1
        elif record.submit < 0:
            skipped[SKIP_SUBMIT] += 1
        elif procs > total_cpus:  # admission: "Requested node configuration is not available"
            skipped[SKIP_TOO_BIG] += 1
        else:
            kept.append(record)
    kept.sort(key=lambda r: (r.submit, r.position))
    return kept, dict(skipped)


@dataclass(frozen=True, slots=True)
class JobResult:
    """What happened to one replayed job (seconds on the trace's clock)."""

    number: int  # the trace's job number
    submit: int
    start: int
    end: int
    procs: int
    nodes: int
    queue: str = ""  # its leaf queue with --queues ("" in none)
    requeued: int = 0  # times reclaim requeued it (each run lost)

    @property
    def wait(self) -> int:
        return self.start - self.submit

    @property
    def run(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Progress:
    submitted: int
    total: int
    now: int  # simulated time
    elapsed: float  # wall seconds so far


@dataclass(frozen=True, slots=True)
class Replay:
    policy: str
    nodes: int
    cpus_per_node: int
    jobs: tuple[JobResult, ...]  # in submit order
    skipped: Mapping[str, int]
    timeline: tuple[tuple[int, int, int], ...]  # (time, pending, busy CPUs) after each decision
    core: CoreCalls
    wall_seconds: float
    # Per leaf queue with --queues (controller/sim/queues.py), in the tree's order.
    queues: Mapping[str, QueueUse] = field(default_factory=dict)
    cpus: int = 0  # all CPUs where nodes differ (-f slurm.conf); 0: nodes x cpus_per_node

    @property
    def total_cpus(self) -> int:
        return self.cpus or self.nodes * self.cpus_per_node


class SimCluster:
    """The simulated cluster's live state: nodes, pending and running jobs.

    Implements ``policy.Cluster``. Only the replay loop and ``commit`` change it.
    """

    def __init__(
        self,
        nodes: int,
        cpus_per_node: int,
        records: list[Record],
        queues: tuple[QueueConf, QueueMap] | None = None,
    ) -> None:
        self.cpus_per_node = cpus_per_node
        self.records = records
        names = tuple(f"n{i}" for i in range(1, nodes + 1))
        self._views: dict[tuple[str, int], NodeView] = {}
        self.nodes: dict[str, NodeView] = {name: self._view(name, cpus_per_node) for name in names}
        self._nodes_view: Mapping[str, NodeView] = MappingProxyType(self.nodes)
        self.free_nodes: dict[str, NodeView] = dict(self.nodes)  # those with a free CPU
        self._free_view: Mapping[str, NodeView] = MappingProxyType(self.free_nodes)
        self.partitions: Mapping[str, PartitionView] = MappingProxyType(
            {
                PARTITION: PartitionView(
                    name=PARTITION,
                    nodes=names,
                    state="UP",
                    max_time=-1,
                    max_nodes=None,
                    min_nodes=0,
                    priority_tier=1,
                    def_mem_per_cpu=0,
                    def_mem_per_node=0,
                    max_mem_per_node=0,
                    exclusive=False,
                    order=names,  # every node weighs the same: configuration order
                )
            }
        )
        self._free_cpus = nodes * cpus_per_node
        # On nodes of one CPU, per node in selection order (``_position``): -1 while free,
        # else the end time the core knows for the job on it (sim/onecpu.py's pass reads it).
        self.node_ends: array[int] | None = array("q", [-1] * nodes) if cpus_per_node == 1 else None
        self._position = {name: i for i, name in enumerate(names)}
        self.pending: dict[int, Job] = {}  # job id -> job, in the core's order
        self.running: dict[int, Running] = {}  # ends at its time limit, as far as the core knows
        # Heap of (end time, job id, run): a run that reclaim ended is stale.
        self.ends: list[tuple[int, int, int]] = []
        self.start_time = [0] * (len(records) + 1)
        self.node_count = [0] * (len(records) + 1)
        self.runs = [0] * (len(records) + 1)  # runs reclaim ended, per job
        # With queues: each job's leaf queue, the running jobs in a queue as the
        # controller's store holds them (what queueviews reads), and the times a
        # waiting job's PreemptionDelay, a running one's ReclaimMinRuntime or a
        # requeued one's delay runs out (a pass then may decide otherwise).
        self.queues = SimQueues(*queues, self.nodes) if queues is not None else None
        self.job_queue = [""] * (len(records) + 1)
        self.running_jobs: dict[int, Job] = {}
        self.wakes: list[int] = []
        self.evictions = 0  # victims of reclaim so far
        self.power: PowerHooks | None = None  # power saving's delays and idle nodes
        self.now = 0

    def _view(self, name: str, free: int) -> NodeView:
        key = (name, free)
        view = self._views.get(key)
        if view is None:
            view = NodeView(
                name=name,
                cpus=self.cpus_per_node,
                real_memory=NODE_MEMORY,
                weight=1,
                features=frozenset(),
                free_cpus=free,
                free_memory=NODE_MEMORY,
                usable=True,
                idle=free == self.cpus_per_node,
                rank=int(name[1:]),
            )
            self._views[key] = view
        return view

    # ---- policy.Cluster

    @property
    def free_cpus(self) -> int:
        return self._free_cpus

    def releases(self) -> Iterator[tuple[int, int]]:
        return ((run.end_time, sum(run.cpus)) for run in self.running.values())

    def queue(self, depth: int | None = None) -> tuple[Job, ...]:
        if depth is None:
            return tuple(self.pending.values())
        return tuple(islice(self.pending.values(), depth))

    def waiting(self) -> Iterator[Job]:
        return iter(self.pending.values())

    def one_cpu(self) -> tuple[array[int], tuple[str, ...], PartitionView] | None:
        """On nodes of one CPU: their ends, names in selection order and partition."""
        if self.node_ends is None:
            return None
        return self.node_ends, self.partitions[PARTITION].nodes, self.partitions[PARTITION]

    def free_cpus_outside(self, nodes: AbstractSet[str]) -> int:
        return sum(view.free_cpus for name, view in self.free_nodes.items() if name not in nodes)

    def snapshot(self, pending: tuple[Job, ...], busy: bool = True) -> Snapshot:
        # The node maps are read-only views of live state: the core copies them
        # before changing anything, and nothing changes them during the call.
        # Without the busy nodes the running jobs are left out too (they hold
        # only nodes that are not in the picture).
        return Snapshot(
            nodes=self._nodes_view if busy else self._free_view,
            partitions=self.partitions,
            pending=pending,
            jobs=_NO_JOBS,
            running_per_array=_NO_ARRAYS,
            running=tuple(self.running.values()) if busy else (),
            queues=None
            if self.queues is None
            else self.queues.view(self.running_jobs.values(), pending),
        )

    def commit(self, plan: Plan) -> None:
        now = plan.now
        for start in plan.starts:
            job_id = start.job_id
            if any(start.memory):  # jobs ask for none, so nodes keep all of theirs
                raise SimError(f"the core gave job {job_id} memory the sim does not track")
            job = self.pending.pop(job_id)
            # It holds its nodes from now; it runs once they are up (CONFIGURING).
            begin = now if self.power is None else now + self.power.started(start.nodes, now)
            for name, cpus in zip(start.nodes, start.cpus, strict=True):
                view = self._view(name, self.nodes[name].free_cpus - cpus)
                self.nodes[name] = view
                if view.free_cpus:
                    self.free_nodes[name] = view
                else:
                    del self.free_nodes[name]
                self._free_cpus -= cpus
            record = self.records[job_id - 1]
            end_time = begin + 60 * math.ceil(record.limit / 60)
            self.running[job_id] = Running(
                job_id=job_id,
                nodes=start.nodes,
                cpus=start.cpus,
                memory=start.memory,
                end_time=end_time,
                requeue=True,  # every sim job may be requeued (reclaim's victims are)
                start_time=begin,
            )
            if self.node_ends is not None:
                for name in start.nodes:
                    self.node_ends[self._position[name]] = end_time
            self.start_time[job_id] = begin
            self.node_count[job_id] = len(start.nodes)
            heapq.heappush(self.ends, (begin + record.run, job_id, self.runs[job_id]))
            if self.job_queue[job_id]:
                self._started(job, start.nodes, start.cpus, begin)
        if plan.preempted:
            self._reclaimed(plan, now)

    def _started(self, job: Job, nodes: tuple[str, ...], cpus: tuple[int, ...], now: int) -> None:
        queues, queue = self.queues, self.job_queue[job.job_id]
        assert queues is not None
        running = replace(job, state=JobState.RUNNING, nodes=nodes, cpus=cpus, start_time=now)
        self.running_jobs[job.job_id] = running
        queues.start(queue, queues.held(running))
        if min_run := queues.min_run[queue]:
            heapq.heappush(self.wakes, now + min_run)

    def _reclaimed(self, plan: Plan, now: int) -> None:
        """Requeue reclaim's victims (back to pending, their run lost) and count them."""
        queues = self.queues
        assert queues is not None  # only a queue's reclaim preempts in the sim
        for victim in plan.preempted:
            self._free(self.running.pop(victim))
            self.runs[victim] += 1
            job = self.running_jobs.pop(victim)
            queue = self.job_queue[victim]
            use = queues.use[queue]
            queues.stop(queue, queues.held(job))
            use.lost_cpu_seconds += max(now - job.start_time, 0) * sum(job.cpus)  # up yet?
            use.preempted += 1
            begin = now + REQUEUE_DELAY
            self.pending[victim] = replace(
                job,
                state=JobState.PENDING,
                nodes=(),
                cpus=(),
                start_time=0,
                begin_time=begin,
                eligible_time=begin,
                restarts=job.restarts + 1,
            )
            heapq.heappush(self.wakes, begin)
            if delay := queues.delay[queue]:
                heapq.heappush(self.wakes, begin + delay)
        for waiting in set(plan.preempted.values()):
            queues.use[self.job_queue[waiting]].reclaimed_for += 1
        self.evictions += len(plan.preempted)

    # ---- the replay loop's events

    def advance(self, now: int) -> None:
        """Simulated time moves on to ``now`` (before the events at ``now``)."""
        self.now = now
        if self.queues is not None:
            self.queues.advance(now)

    def submit(self, job_id: int) -> None:
        record = self.records[job_id - 1]
        queues = self.queues
        account = queues.account(record.user, record.group) if queues is not None else ""
        job = swf_job(record, job_id, (PARTITION,), account)
        self.pending[job_id] = job
        if queues is not None and (queue := queues.queue_of(job)) is not None:
            self.job_queue[job_id] = queue
            if delay := queues.delay[queue]:
                heapq.heappush(self.wakes, record.submit + delay)

    def finish(self, job_id: int, run: int) -> bool:
        """End ``job_id``'s run number ``run``; False when reclaim ended that run already."""
        if run != self.runs[job_id]:
            return False
        self._free(self.running.pop(job_id))
        if self.job_queue[job_id]:
            queues = self.queues
            assert queues is not None
            job = self.running_jobs.pop(job_id)
            queues.stop(self.job_queue[job_id], queues.held(job))
        return True

    def _free(self, job: Running) -> None:
        for name, count in zip(job.nodes, job.cpus, strict=True):
            view = self._view(name, self.nodes[name].free_cpus + count)
            self.nodes[name] = self.free_nodes[name] = view
            self._free_cpus += count
            if self.node_ends is not None:
                self.node_ends[self._position[name]] = -1
            if self.power is not None and view.idle:
                self.power.idle(name, self.now)


def replay(
    trace: Trace,
    nodes: int,
    cpus_per_node: int,
    policy: str = "fcfs",
    *,
    timeline: bool = False,
    progress: Callable[[Progress], None] | None = None,
    whole_queue: bool = False,
    queues: tuple[QueueConf, QueueMap] | None = None,
    cluster: Callable[[list[Record]], SimCluster] | None = None,
    params: BackfillParams | None = None,
    power: PowerHooks | None = None,
) -> Replay:
    """Replay ``trace`` on ``nodes`` nodes of ``cpus_per_node`` CPUs under ``policy``.

    ``timeline`` records (time, pending, busy CPUs) after every decision;
    ``progress`` is called after every tenth of the jobs has been submitted;
    ``whole_queue`` shows the core every pending job on every call (see
    ``policy.MainScheduler``). ``queues``: the queue tree and the map of the
    trace's users and groups to accounts (controller/sim/queues.py); the core
    then sees every pending job and node at every event (admission refuses a
    job without holding back those behind it, and reclaim needs the running
    jobs), and after a pass that reclaimed decides again at once, on what the
    victims freed, as the controller's next pass does. ``cluster`` makes the
    simulated cluster from the records instead (``-f slurm.conf``:
    controller/sim/sitecluster.py; the core then sees every pending job and
    node). ``params``: the backfill policies' SchedulerParameters (Slurm's
    defaults when None; slurm.conf's with ``-f``, or ``--sched-params``).
    ``power``: nodes powered down when idle, and the delay a job on them waits
    (controller/sim/powersim.py).
    """
    began = time.perf_counter()
    chosen = choose(policy, whole_queue or queues is not None or cluster is not None, params)
    total_cpus = nodes * cpus_per_node
    records, skipped = admit(trace.records, total_cpus)
    if trace.malformed:
        skipped[SKIP_MALFORMED] = len(trace.malformed)
    if not records:
        bad = trace.warning()
        raise SimError(f"{trace.path}: no job records to replay" + (f" ({bad})" if bad else ""))
    if cluster is None:
        sim = SimCluster(nodes, cpus_per_node, records, queues)
    else:
        sim = cluster(records)
        total_cpus = sim.free_cpus
    sim.power = power
    ends, wakes = sim.ends, sim.wakes
    samples: list[tuple[int, int, int]] = []
    n = len(records)
    tenth = 1  # the next tenth of the jobs to report, once submitted
    i = 0
    while i < n or ends or (wakes and sim.pending):
        now = min(
            records[i].submit if i < n else math.inf,
            ends[0][0] if ends else math.inf,
            wakes[0] if wakes else math.inf,
        )
        assert isinstance(now, int)
        sim.advance(now)
        while wakes and wakes[0] <= now:
            heapq.heappop(wakes)
        freed = False
        while ends and ends[0][0] == now:
            _, job_id, run = heapq.heappop(ends)
            freed = sim.finish(job_id, run) or freed
        while i < n and records[i].submit == now:
            i += 1
            sim.submit(i)
        while True:
            evicted = sim.evictions
            chosen.decide(sim, now, freed)
            if sim.evictions == evicted:
                break
            freed = True  # the victims' nodes: the reclaiming jobs start on them now
        if timeline:
            samples.append((now, len(sim.pending), total_cpus - sim.free_cpus))
        if progress is not None and i * 10 >= tenth * n:
            progress(Progress(i, n, now, time.perf_counter() - began))
            tenth = i * 10 // n + 1
    if sim.pending:  # only a queue's limits can keep a job that fits the cluster out
        first = next(iter(sim.pending))
        raise SimError(
            f"{len(sim.pending)} jobs never started: their queues never let them "
            f"(the first, trace job {records[first - 1].number}, is in queue "
            f"{sim.job_queue[first] or '(none)'})"
        )
    jobs = tuple(
        JobResult(
            number=record.number,
            submit=record.submit,
            start=sim.start_time[job_id],
            end=sim.start_time[job_id] + record.run,
            procs=record.procs,
            nodes=sim.node_count[job_id],
            queue=sim.job_queue[job_id],
            requeued=sim.runs[job_id],
        )
        for job_id, record in enumerate(records, 1)
    )
    return Replay(
        policy=policy,
        nodes=nodes,
        cpus_per_node=cpus_per_node,
        jobs=jobs,
        skipped=skipped,
        timeline=tuple(samples),
        core=chosen.calls,
        wall_seconds=time.perf_counter() - began,
        queues=MappingProxyType({} if sim.queues is None else sim.queues.use),
        cpus=total_cpus if cluster is not None else 0,
    )
