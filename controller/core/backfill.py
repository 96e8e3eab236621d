"""Backfill: start lower-priority jobs early without delaying the ones ahead.

Runs after the main pass (``schedule``), over the jobs it left waiting for
Resources or Priority, in the same priority order. For each job, as Slurm's
backfill does:

1. **Start now?** The job may start now on nodes that no job ahead of it has
   reserved for any part of ``[now, now + its time limit)``.
2. **Else reserve.** Find the earliest time the job fits: walk forward
   through the moments running (and just-started) jobs reach their time
   limits, freeing their CPUs and memory, and test the job against the
   resources free then, again avoiding nodes reserved by jobs ahead of it for
   the interval it would run. The nodes it would get are reserved for it
   (whole nodes, as Slurm does "for performance reasons"), and the time and
   nodes become its expected start (``squeue --start``, ``scontrol show job``).

Because a job only ever uses nodes that no job ahead of it reserved for an
overlapping interval, a lower-priority job never delays the expected start of
a higher-priority one, and since starts come out of the live free resources,
no CPU or MiB is allocated twice.

Licenses are planned the same way, over time rather than nodes
(``licensebook.py``): a start holds its licenses until its end, a reservation
over the interval it plans, and a job starts now or is planned only where its
licenses fit beside those of every job ahead for its whole run.

Conservative backfill (the default, and what Slurm does with its default
settings) gives every tested job a reservation; ``easy`` gives one only to
the first waiting job of each partition, and the rest may only start now.
Times are rounded up to ``resolution``; nothing is planned past ``window``.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

from controller.core import devices, topology
from controller.core.alternatives import Flavor, fungible
from controller.core.flavors import Chooser
from controller.core.licensebook import LicenseBook, book_of, needs
from controller.core.limits import Usage
from controller.core.nodeindex import FreeNodes, Reservations
from controller.core.placement import partition_reason, partitions_of, place, take
from controller.core.plan import Draft, Expected, Start
from controller.core.queueplan import QueueLedger
from controller.core.resvwindows import ResvWindows, run_end
from controller.core.snapshot import NodeView, PartitionView, ResvView, Snapshot
from controller.core.timeline import Release, Timeline, ceil_to
from controller.jobstate import Reason
from controller.model import Job
from corral import arrayspec
from corral.licenses import Licenses

#: The reasons of jobs that backfill tries again.
WAITING = (Reason.RESOURCES, Reason.PRIORITY)


@dataclass(frozen=True, slots=True)
class BackfillParams:
    """SchedulerParameters ``bf_*`` that shape one pass (seconds and counts)."""

    window: int = 1440 * 60  # bf_window (minutes in slurm.conf)
    resolution: int = 60  # bf_resolution
    max_job_test: int = 500  # bf_max_job_test
    max_job_user: int = 0  # bf_max_job_user, 0 = no limit
    easy: bool = False  # only each partition's first waiting job reserves


def _shape(job: Job) -> tuple[object, ...]:
    """Everything about a job that decides where and how long it fits (not who or when)."""
    return (
        job.partitions,
        job.num_tasks,
        job.cpus_per_task,
        job.ntasks_per_node,
        job.min_nodes,
        job.max_nodes,
        job.nodes_given,
        job.tasks_given,
        job.min_cpus,
        job.mem_per_node,
        job.mem_per_cpu,
        job.req_nodes,
        job.exc_nodes,
        job.constraint,
        job.exclusive,
        job.oversubscribe,
        job.gres,
        job.time_limit,
        job.reservation,
        topology.shape(job),
        job.gpus_per_job,
        job.gpus_per_socket,
        job.gpus_per_task,
        job.gpu_type,
        job.gpus_also,
        job.sockets_per_node,
        job.cores_per_socket,
        job.cpus_per_gpu,
        job.mem_per_gpu,
        job.ntasks_per_gpu,
        job.gres_flags,
        job.cpus_per_task_given,
        job.licenses,
    )


@dataclass(frozen=True, slots=True)
class _Found:
    """Where and when a job could start (before it is reserved): for ``length`` seconds."""

    start: int
    length: int
    partition: str
    nodes: tuple[str, ...]


def duration(job: Job, part: PartitionView, window: int) -> int:
    """Seconds the job may run in ``part``: its limit, else the partition's, else the window."""
    minutes = job.time_limit if job.time_limit > 0 else part.max_time
    return minutes * 60 if minutes > 0 else window


class Backfill:
    """One pass over the jobs the main pass left waiting, in their priority order."""

    def __init__(
        self,
        snap: Snapshot,
        plan: Draft,
        nodes: dict[str, NodeView],
        params: BackfillParams,
        running_arrays: dict[int, int],
        free: FreeNodes,
        usage: Usage,
        queues: QueueLedger | None = None,
        chooser: Chooser | None = None,
        licenses: LicenseBook | None = None,
    ) -> None:
        self.snap = snap
        self.plan = plan
        self.now = plan.now
        self.horizon = plan.now + params.window
        self.nodes = nodes  # free now, after the main pass's starts
        self.free = free  # the main pass's index of nodes with a free CPU
        self.params = params
        self.running_arrays = running_arrays
        self.usage = usage  # accounting limits' counters, after the main pass
        self.queues = queues or QueueLedger(None)  # the queues' totals, after the main pass
        # Jobs naming alternatives (core/flavors.py): the main pass's choices go on here.
        self.chooser = chooser or Chooser(snap, self.queues, plan)
        # Licenses (core/licensebook.py): held by running jobs and this pass's starts,
        # and by the plans of waiting jobs, over time.
        self.licenses = licenses or book_of(
            snap.licenses,
            ((r.job_id, r.licenses, r.start_time, r.end_time, r.reservation) for r in snap.running),
            plan.now,
            snap.reservations,
        )
        self.reserved = Reservations(free.order)
        # Advance reservations; the plans of the jobs in each are their own.
        self.windows = ResvWindows(snap.reservations)
        self.inner: dict[str, Reservations] = {}
        self.members = {name: frozenset(p.nodes) for name, p in snap.partitions.items()}
        self.releases = [
            Release(r.end_time, r.nodes, r.cpus, r.memory, r.gres, r.share, r.partition)
            for r in snap.running
            if r.end_time and r.end_time < self.horizon
        ]
        self.timeline: Timeline | None = None
        # Per job shape, the first trial time worth trying: free resources at every
        # time only shrink during a pass (starts take, reservations block), so a job
        # cannot fit at a time where an alike job ahead of it did not; nor at a time
        # added since (the end of a plan or start), which nothing changes the free
        # resources at but what has ended by it, and which the last time before it saw.
        self.floor: dict[tuple[object, ...], int] = {}
        # Per trial time, partition and shape, the first node the last alike job got
        # there (in selection order: no nodes preferred): those before it cannot fit.
        self.resume: dict[tuple[int, str, tuple[object, ...]], str] = {}
        self.chosen_tasks: Mapping[int, list[int]] = {}

    def _end_of(self, job: Job, start: Start) -> int | None:
        """When a job started now reaches its limit; None past the window."""
        part = self.snap.partitions[start.partition]
        at = self.now + self._length(job, part, self.now)
        return at if at < self.horizon else None

    def _length(self, job: Job, part: PartitionView, begin: int) -> int:
        """Seconds a run from ``begin`` lasts: to its limit, or its reservation's end."""
        length = duration(job, part, self.params.window)
        resv = self.windows.of(job)
        return length if resv is None else max(min(length, resv.end - begin), 1)

    def _claims(self, resv: ResvView | None) -> Reservations:
        """The backfill plans a job competes with: its reservation's jobs', or the rest's."""
        if resv is None:
            return self.reserved
        if resv.name not in self.inner:
            self.inner[resv.name] = Reservations(self.free.order)
        return self.inner[resv.name]

    def _place(
        self,
        job: Job,
        part: PartitionView,
        when: int,
        length: int,
        nodes: Mapping[str, NodeView],
        index: FreeNodes,
        after: str | None = None,
        prefer: AbstractSet[str] = frozenset(),
    ) -> Start | Reason:
        """``place`` for a run over ``[when, when + length)``: clear of the plans
        of jobs ahead, and inside the job's reservation or clear of all others;
        ``prefer``'s nodes first."""
        resv = self.windows.confine(job)
        blocked = self._claims(resv).during(when, ceil_to(when + length, self.params.resolution))
        if resv is not None:
            return place(
                job, part, nodes, blocked, index, after, only=resv.nodes, at=when, prefer=prefer
            )
        avoid = self.windows.avoid(when, run_end(job, part, when), job.reservation)
        return place(job, part, nodes, blocked, index, after, avoid=avoid, at=when, prefer=prefer)

    def started(self, job: Job, start: Start) -> None:
        """Note a start of the main pass (before ``run``): it ends by its time limit."""
        end = self._end_of(job, start)
        if end is not None:
            self.releases.append(Release.of(start, end))
        self.licenses.until(job.job_id, end)

    def run(self, waiting: list[Job], chosen_tasks: Mapping[int, list[int]]) -> None:
        """``chosen_tasks``: for arrays whose tasks wait each for its own counterpart,
        the tasks that may start (the main pass started the first of them)."""
        self.chosen_tasks = chosen_tasks
        self.timeline = Timeline(
            self.now,
            self.horizon,
            self.params.resolution,
            self.nodes,
            self.releases,
            self.members,
            self.free.order,
            (t for v in self.snap.reservations for t in (v.start, v.end)),
        )
        tested = 0
        per_user: dict[int, int] = {}
        reserving: set[str] = set()  # partitions whose first waiting job reserved (easy)
        for job in waiting:
            if tested >= self.params.max_job_test:
                break
            head = self.queues.head_of(job)
            if head is not None:  # StrictFIFO: no start, no plan ahead of its queue's head
                self.plan.reasons[job.job_id] = Reason.PRIORITY
                self.plan.behind[job.job_id] = head
                continue
            if self.params.max_job_user and per_user.get(job.uid, 0) >= self.params.max_job_user:
                self.queues.stop(job, Reason.PRIORITY)  # untested: it waits, so its queue does
                continue
            tested += 1
            per_user[job.uid] = per_user.get(job.uid, 0) + 1
            parts = [p for p in partitions_of(job, self.snap) if partition_reason(job, p) is None]
            if not parts:
                continue
            # A heterogeneous job's component never starts alone (the main pass starts
            # them together: core/hetgroup.py), but plans its start like any waiting job.
            if not job.het_job_id and not self._start_now(job, parts):
                continue
            if not job.reservation:  # as in the main pass: waiting for room stops its queue
                self.queues.stop(job, Reason.RESOURCES)
            if self.params.easy:
                if all(p.name in reserving for p in parts):
                    continue
                reserving.update(p.name for p in parts)
            self._reserve(job, parts)

    def _start_now(self, job: Job, parts: list[PartitionView]) -> bool:
        """Start what fits now; True while the job (or some array task) still waits."""
        picks = self._still_pending(job)
        tasks = len(picks) if picks is not None else arrayspec.count(job.array_pending) or 1
        throttle = job.array_max_tasks
        gates = self.snap.gates.get(job.job_id, ())
        while tasks:
            if throttle and self.running_arrays.get(job.array_job_id, 0) >= throttle:
                return False
            limit = self.usage.blocked(gates) or self.chooser.blocked(job)
            if limit is not None:  # no start and no reservation past a limit or a queue's
                self.plan.reasons[job.job_id] = limit
                self.queues.stop(job, limit)
                return False
            asked = needs(job.licenses)
            if asked and not self.licenses.fits(asked, self.now, self.now + 1, job.reservation):
                self.plan.reasons[job.job_id] = Reason.LICENSES  # too few free now
                return True
            start = self._fit_now(job, parts)
            if start is None:
                return True
            end = self._end_of(job, start)
            if asked and not self.licenses.fits(asked, self.now, end, job.reservation):
                # Free now, but planned for a job ahead before this one would end.
                self.plan.reasons[job.job_id] = Reason.LICENSES
                return True
            if picks is not None:
                start = replace(start, task=picks[len(picks) - tasks])
            bound = devices.bind(start, self.nodes)
            if bound is None:  # a share of a GPU this pass gave whole: the next pass
                return True
            start = self.chooser.stamp(bound)
            self.plan.starts.append(start)
            take(self.nodes, start)
            self.free.taken(start)
            self.usage.take(gates)
            self.chooser.take(job)
            assert self.timeline is not None
            self.timeline.take(start, end)
            self.licenses.hold(job.job_id, asked, self.now, end, job.reservation)
            if job.array_job_id:
                self.running_arrays[job.array_job_id] = (
                    self.running_arrays.get(job.array_job_id, 0) + 1
                )
            tasks -= 1
        self.plan.reasons.pop(job.job_id, None)
        return False

    def _still_pending(self, job: Job) -> list[int] | None:
        """The chosen tasks of ``job`` no start of this pass has taken yet (None: any)."""
        picks = self.chosen_tasks.get(job.job_id)
        if picks is None:
            return None
        taken = {s.task for s in self.plan.starts if s.job_id == job.job_id}
        return [t for t in picks if t not in taken]

    def _fit_now(self, job: Job, parts: list[PartitionView]) -> Start | None:
        resv = self.windows.of(job)
        if resv is not None and resv.start > self.now:
            return None
        outcome = self.chooser.choose(job, lambda j: self._fit_parts(j, parts), self.nodes)
        return outcome if isinstance(outcome, Start) else None

    def _fit_parts(self, job: Job, parts: list[PartitionView]) -> Start | Reason:
        """Where ``job`` starts now in the first of ``parts`` that holds it."""
        for part in parts:
            length = self._length(job, part, self.now)
            outcome = self._place(job, part, self.now, length, self.nodes, self.free)
            if isinstance(outcome, Start):
                return outcome
        return Reason.RESOURCES

    def _reserve(self, job: Job, parts: list[PartitionView]) -> None:
        """Reserve the earliest nodes and time the job fits at, within the window; for a
        job naming alternatives, those of the alternative expected to start soonest
        (``Chooser.planned``; a tie goes to the more preferred), as Slurm starts a job in
        several partitions "in the reservation offering the earliest start time"."""
        if not fungible(job):
            found = self._earliest(job, parts)
            if found is not None:
                self._claim(job, found)
            return
        best: tuple[_Found, Flavor] | None = None
        starts: dict[int, int] = {}
        for flavor in self.chooser.planned(job):
            found = self._earliest(flavor.job, parts)
            if found is None:
                continue
            starts[flavor.rank] = found.start
            if best is None or found.start < best[0].start:
                best = (found, flavor)
        if best is not None:
            self._claim(job, best[0])
            self.chooser.expect(job, starts, best[1])

    def _earliest(self, job: Job, parts: list[PartitionView]) -> _Found | None:
        """The earliest nodes and time the job fits at, within the window.

        The job is tried at the timeline's trial times in order (each end of a
        running job or of a plan, on the resolution grid). A cheap count (CPUs
        free on the partition's usable nodes) skips times before ``place`` is
        asked. At the first time it fits, the nodes that jobs' ends give back
        by then come first (``Timeline.gained``), and the nodes free now last:
        a plan that does not need those leaves them to the jobs behind it that
        may start now, as EASY's "extra" processors. Then the start moves back
        to when those same nodes became free enough (``_sooner``: between
        trial times only licenses and ``--switches`` change); of the partitions
        that fit at that time, the one whose start is soonest wins (a tie: the
        higher PriorityTier).
        """
        timeline = self.timeline
        assert timeline is not None
        need = job.cpus_needed
        asked = needs(job.licenses)
        shape = _shape(job)
        first = self.floor.get(shape, 0)
        resv = self.windows.of(job)
        for i, when in enumerate(timeline.times):
            if when < first or (resv is not None and when < resv.start):
                continue
            if resv is not None and when >= resv.end:
                break
            totals = timeline.totals(i)
            found: _Found | None = None
            for part in parts:
                total = totals[part.name]
                if total < need:
                    continue
                length = self._length(job, part, when)
                if asked and not self.licenses.fits(asked, when, when + length, job.reservation):
                    continue
                key = (when, part.name, shape)
                index = timeline.free_nodes(i)
                prefer = timeline.gained(i)
                after = None if prefer else self.resume.get(key)
                free = timeline.free(i)
                outcome = self._place(job, part, when, length, free, index, after, prefer)
                if isinstance(outcome, Start):
                    if not prefer:
                        self.resume[key] = outcome.nodes[0]
                    start = self._sooner(job, part, outcome, when, length)
                    if asked:
                        start = self._licensed(job, part, asked, outcome.nodes, start, when)
                    if found is None or start < found.start:
                        nodes = tuple(sorted(outcome.nodes, key=self.free.order.index.__getitem__))
                        found = _Found(start, length, part.name, nodes)
            if found is not None:
                self.floor[shape] = when
                return found
        self.floor[shape] = self.horizon
        return None

    def _claim(self, job: Job, found: _Found) -> None:
        """Reserve ``found``'s nodes from its start for its length: the job's plan."""
        end = ceil_to(found.start + found.length, self.params.resolution)
        self._claims(self.windows.confine(job)).add(found.start, end, found.nodes)
        self.licenses.hold(job.job_id, needs(job.licenses), found.start, end, job.reservation)
        self.plan.expected[job.job_id] = Expected(found.start, found.partition, found.nodes)
        assert self.timeline is not None
        self.timeline.add(end)  # the nodes come free again for the jobs behind

    def _licensed(
        self,
        job: Job,
        part: PartitionView,
        asked: Licenses,
        nodes: tuple[str, ...],
        start: int,
        probe: int,
    ) -> int:
        """The earliest time from ``start`` (when ``nodes`` hold the job) before
        ``probe`` at which its licenses are free for its whole run too: ``start`` or the
        end of some holding, on the resolution, still clear of the plans ahead and of
        other reservations; else ``probe`` (whose fit was checked)."""
        res = self.params.resolution
        resv = self.windows.confine(job)
        moments = sorted({start, *(ceil_to(t, res) for t in self.licenses.ends(start, probe))})
        for when in moments:
            if when >= probe:
                break
            length = self._length(job, part, when)
            if not self.licenses.fits(asked, when, when + length, job.reservation):
                continue
            span = ceil_to(when + length, res) - when
            if self._claims(resv).free_from(when, span, nodes, when + 1) != when:
                continue
            end = run_end(job, part, when)
            if resv is None and self.windows.avoid(when, end, job.reservation) & set(nodes):
                continue
            return when
        return probe

    def _sooner(self, job: Job, part: PartitionView, start: Start, probe: int, length: int) -> int:
        """The earliest time from which ``start``'s own nodes hold it, up to ``probe``.

        Each node's free CPUs and memory grow as the jobs on it reach their
        limits; the allocation fits once every node has grown enough. The
        earlier time is kept only if no plan ahead claims the nodes, it is in
        the job's reservation, no other reservation's nodes are among them, and
        (``--switches``) the nodes span few enough leaf switches then.
        """
        timeline = self.timeline
        assert timeline is not None
        res = self.params.resolution
        ready = timeline.ready(start, self.nodes, self.now)
        resv = self.windows.of(job)
        bound = topology.not_before(part.topology, job, start.nodes, self.now)
        sooner = max(ceil_to(ready, res), self.now + res, resv.start if resv else 0, bound)
        if sooner >= probe:
            return probe
        span = ceil_to(sooner + length, res) - sooner
        confined = self.windows.confine(job)
        clear = self._claims(confined).free_from(sooner, span, start.nodes, probe)
        if clear is None:
            return probe
        end = run_end(job, part, clear)
        if confined is None and self.windows.avoid(clear, end, job.reservation) & set(start.nodes):
            return probe
        return clear
