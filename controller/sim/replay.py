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
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import islice
from types import MappingProxyType

from controller.core import NodeView, PartitionView, Plan, Running, Snapshot
from controller.core.snapshot import JobFacts
from controller.jobstate import JobState, Reason
from controller.model import Job
from controller.sim.errors import SimError
from controller.sim.policy import CoreCalls, choose
from controller.sim.swf import Header, Record, Trace

PARTITION = "batch"
NODE_MEMORY = 1024  # MiB; jobs ask for none, so any value will do
_NO_JOBS: Mapping[int, JobFacts] = MappingProxyType({})
_NO_ARRAYS: Mapping[int, int] = MappingProxyType({})

#: Why a record is not replayed (the CLI prints the counts).
SKIP_RUN = "run time <= 0"
SKIP_PROCS = "processors <= 0"
SKIP_SUBMIT = "submit time < 0"
SKIP_TOO_BIG = "more processors than the cluster"


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

    @property
    def total_cpus(self) -> int:
        return self.nodes * self.cpus_per_node


class SimCluster:
    """The simulated cluster's live state: nodes, pending and running jobs.

    Implements ``policy.Cluster``. Only the replay loop and ``commit`` change it.
    """

    def __init__(self, nodes: int, cpus_per_node: int, records: list[Record]) -> None:
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
        self.pending: dict[int, Job] = {}  # job id -> job, in the core's order
        self.running: dict[int, Running] = {}  # ends at its time limit, as far as the core knows
        self.ends: list[tuple[int, int]] = []  # heap of (end time, job id)
        self.start_time = [0] * (len(records) + 1)
        self.node_count = [0] * (len(records) + 1)

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

    def queue(self, depth: int | None = None) -> tuple[Job, ...]:
        if depth is None:
            return tuple(self.pending.values())
        return tuple(islice(self.pending.values(), depth))

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
        )

    def commit(self, plan: Plan) -> None:
        now = plan.now
        for start in plan.starts:
            job_id = start.job_id
            if any(start.memory):  # jobs ask for none, so nodes keep all of theirs
                raise SimError(f"the core gave job {job_id} memory the sim does not track")
            del self.pending[job_id]
            for name, cpus in zip(start.nodes, start.cpus, strict=True):
                view = self._view(name, self.nodes[name].free_cpus - cpus)
                self.nodes[name] = view
                if view.free_cpus:
                    self.free_nodes[name] = view
                else:
                    del self.free_nodes[name]
                self._free_cpus -= cpus
            record = self.records[job_id - 1]
            self.running[job_id] = Running(
                job_id=job_id,
                nodes=start.nodes,
                cpus=start.cpus,
                memory=start.memory,
                end_time=now + 60 * math.ceil(record.limit / 60),
            )
            self.start_time[job_id] = now
            self.node_count[job_id] = len(start.nodes)
            heapq.heappush(self.ends, (now + record.run, job_id))

    # ---- the replay loop's events

    def submit(self, job_id: int) -> None:
        record = self.records[job_id - 1]
        self.pending[job_id] = Job(
            job_id=job_id,
            name=f"swf{record.number}",
            uid=0,
            gid=0,
            user="swf",
            group="swf",
            state=JobState.PENDING,
            reason=Reason.NONE,
            submit_time=record.submit,
            partitions=(PARTITION,),
            time_limit=math.ceil(record.limit / 60),
            num_tasks=record.procs,
            tasks_given=True,
        )

    def finish(self, job_id: int) -> None:
        job = self.running.pop(job_id)
        for name, count in zip(job.nodes, job.cpus, strict=True):
            view = self._view(name, self.nodes[name].free_cpus + count)
            self.nodes[name] = self.free_nodes[name] = view
            self._free_cpus += count


def replay(
    trace: Trace,
    nodes: int,
    cpus_per_node: int,
    policy: str = "fcfs",
    *,
    timeline: bool = False,
    progress: Callable[[Progress], None] | None = None,
    whole_queue: bool = False,
) -> Replay:
    """Replay ``trace`` on ``nodes`` nodes of ``cpus_per_node`` CPUs under ``policy``.

    ``timeline`` records (time, pending, busy CPUs) after every decision;
    ``progress`` is called after every tenth of the jobs has been submitted;
    ``whole_queue`` shows the core every pending job on every call (see
    ``policy.MainScheduler``).
    """
    began = time.perf_counter()
    chosen = choose(policy, whole_queue)
    total_cpus = nodes * cpus_per_node
    records, skipped = admit(trace.records, total_cpus)
    if not records:
        raise SimError(f"{trace.path}: no job records to replay")
    sim = SimCluster(nodes, cpus_per_node, records)
    ends = sim.ends
    samples: list[tuple[int, int, int]] = []
    n = len(records)
    tenth = 1  # the next tenth of the jobs to report, once submitted
    i = 0
    while i < n or ends:
        now = records[i].submit if i < n else ends[0][0]
        if ends and ends[0][0] < now:
            now = ends[0][0]
        freed = False
        while ends and ends[0][0] == now:
            sim.finish(heapq.heappop(ends)[1])
            freed = True
        while i < n and records[i].submit == now:
            i += 1
            sim.submit(i)
        chosen.decide(sim, now, freed)
        if timeline:
            samples.append((now, len(sim.pending), total_cpus - sim.free_cpus))
        if progress is not None and i * 10 >= tenth * n:
            progress(Progress(i, n, now, time.perf_counter() - began))
            tenth = i * 10 // n + 1
    if sim.pending:  # cannot happen: every admitted job fits an empty cluster
        raise SimError(f"{len(sim.pending)} jobs never started")
    jobs = tuple(
        JobResult(
            number=record.number,
            submit=record.submit,
            start=sim.start_time[job_id],
            end=sim.start_time[job_id] + record.run,
            procs=record.procs,
            nodes=sim.node_count[job_id],
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
    )
