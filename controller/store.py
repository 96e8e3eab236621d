"""JobStore: the only owner of the controller's live state.

Every change goes through a method here; each one updates the in-memory maps
and adds the new values to the pending journal batch. ``await flush()`` makes
all changes made so far durable (group commit) and must precede any reply
that acknowledges them, and any launch that depends on them.

Resource usage per node is derived from the jobs that hold nodes (RUNNING,
or finished but still COMPLETING) and kept up to date in ``_account``, so the
scheduler's snapshot costs one pass over nodes and pending jobs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from controller import associations, gpuaffinity, gpushare, jobcomp, jobstate, steps
from controller.admission import Admitted, Capacity, admit
from controller.associations import NOTHING_SPENT, Assoc, AssocSet, Spent
from controller.core import BackfillParams, NodeView, Plan, Running, Snapshot
from controller.core.limits import Gate
from controller.core.preempt import PreemptPolicy
from controller.core.snapshot import JobFacts
from controller.jobspec import JobSpec
from controller.jobstate import COMPLETING, Event, JobState
from controller.journal import Batch, Journal
from controller.model import Job, NodeRuntime, Payload, Step
from controller.principal import Principal
from controller.priorities import USAGE_KEY, PriorityKeeper
from controller.reservations import Cluster, Reservation, ReservationBook
from controller.steps import StepRequest
from corral import arrayspec, errors, gresconf, hostlist
from corral import gres as gres_syntax
from corral.config import SlurmConfig
from corral.errors import SlurmError

log = logging.getLogger(__name__)


#: A journal commit that took longer than this sends the next one to the writer thread.
INLINE_COMMIT_S = 0.002


@dataclass(frozen=True, slots=True)
class Registration:
    """What a node agent reported about one node when it attached."""

    name: str
    cpus: int
    real_memory: int
    hostname: str = ""
    arch: str = ""
    os: str = ""
    version: str = ""
    boot_time: int = 0
    agent_start_time: int = 0
    gres_found: str | None = None  # the GPUs the agent probed (None: not probed)
    mps: bool = False  # it can run MPS servers, so GPU shares can be fenced
    gpu_cpus: tuple[tuple[int, tuple[int, ...]], ...] = ()  # probed: CPUs near each GPU


def _shortfall(cpus: int, memory: int, gres: str, reg: Registration) -> str:
    """Slurm's drain reason when a node has less than its configuration promises."""
    if reg.cpus < cpus:
        return f"Low socket*core*thread count, Low CPUs ({reg.cpus} < {cpus})"
    if reg.real_memory < memory:
        return f"Low RealMemory (reported:{reg.real_memory} < 100.00% of configured:{memory})"
    if reg.gres_found is not None:
        return _gres_shortfall(gres, reg.gres_found)
    return ""


def _gres_shortfall(configured: str, found: str) -> str:
    """slurmctld's reason when a node's probed GPUs fall short of its ``Gres=``."""
    try:
        items, got = gres_syntax.parse_node(configured), gres_syntax.parse_node(found)
    except ValueError:
        return ""
    devices = [
        gresconf.GresDevice(name, kind, (), count, None, None, frozenset(), i, ("probe", None))
        for i, (name, kind, count) in enumerate(got)
    ]
    if not any(name == "gpu" for name, _, _ in got):  # the probe found none: 0, not unknown
        devices.append(
            gresconf.GresDevice("gpu", "", (), 0, None, None, frozenset(), 0, ("probe", None))
        )
    configured_gpus = [item for item in items if item[0] == "gpu"]
    return gresconf.cross_check(configured_gpus, devices).reason or ""


#: What accounting records of a job: a change to one of these sends dbd a new record.
_ACCOUNTED = (
    "state",
    "held",
    "submit_time",
    "eligible_time",
    "start_time",
    "end_time",
    "partition",
    "nodes",
    "cpus",
    "exit_status",
    "restarts",
    "time_limit",
    "name",
    "account",
    "qos",
    "array_pending",
    "array_task_id",
    "comment",
    "work_dir",
    "std_out",
    "std_err",
    "reservation",
    "steps",
)
OUTBOX_SEQ_KEY = "outbox_seq"
EVENT_SEQ_KEY = "event_seq"
ASSOCIATIONS_KEY = "associations"
RESERVATIONS_KEY = "reservations"


def accounting_changed(old: Job | None, new: Job) -> bool:
    """Whether ``new`` differs from ``old`` in what accounting records."""
    return old is None or any(getattr(old, f) != getattr(new, f) for f in _ACCOUNTED)


def _drop_through(outbox: dict[int, Any], seq: int) -> None:
    """Forget an outbox's records up to ``seq``: its oldest, since it is in sequence order."""
    while outbox and (first := next(iter(outbox))) <= seq:
        del outbox[first]


def _event_state(node: NodeRuntime) -> str:
    """What sacctmgr show event calls a node that is out of service ("" when it is not)."""
    down = node.state == "DOWN"
    if down and node.drain:
        return "DOWN+DRAIN"
    return "DOWN" if down else "DRAIN" if node.drain else ""


def gpu_types(gres: str) -> list[tuple[str, int]]:
    """A node's configured GPUs as (type, count), in its ``Gres=`` order."""
    try:
        items = gres_syntax.parse_node(gres)
    except ValueError:
        return []
    return [(kind, count) for name, kind, count in items if name == "gpu"]


def holds_nodes(job: Job) -> bool:
    """True while a job's processes may still be on its nodes."""
    return bool(job.nodes) and (job.state is JobState.RUNNING or COMPLETING in job.flags)


class JobStore:
    def __init__(self, conf: SlurmConfig, journal: Journal) -> None:
        self.conf = conf
        self.journal = journal
        self.jobs: dict[int, Job] = {}
        self.nodes: dict[str, NodeRuntime] = {}
        self.partition_state: dict[str, str] = {}
        self.next_job_id = conf.first_job_id
        self.last_update = 0
        self.counters = {"submitted": 0, "started": 0, "completed": 0, "canceled": 0, "failed": 0}
        self._used: dict[str, list[int]] = {}  # node -> [cpus, memory]
        # Jobs sharing CPUs (OverSubscribe): node -> partition -> {CPUs of one job: jobs}.
        self._shared: dict[str, dict[str, dict[int, int]]] = {}
        # GRES in use: node -> (name, type; None = any type) -> count.
        self._gres_used: dict[str, dict[tuple[str, str | None], int]] = {}
        self._gpus_used: dict[str, set[int]] = {}  # GPU indices held on each node
        self._cpus_pinned: dict[str, set[int]] = {}  # CPUs jobs are pinned to on each node
        self._batch = Batch()
        self._batch_seq = 1
        self._committed_seq = 0
        self._lock = asyncio.Lock()
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="journal")
        self._in_flight: Batch | None = None
        self._commit_s = 0.0  # how long the last journal commit took
        self._purged_at = 0
        self._pending: dict[int, None] = {}  # ids of PENDING jobs, in submission order
        self._ended: dict[int, int] = {}  # finished jobs off their nodes -> end time
        # Accounting (controller/accounting.py sets ``recorder`` when it is on):
        # records committed but not yet delivered to dbd, by outbox sequence.
        self.recorder: Callable[[Job], bytes] | None = None
        self.outbox: dict[int, bytes] = {}
        self.outbox_ready = asyncio.Event()
        self._outbox_seq = 0
        self._outbox_of_job: dict[int, int] = {}  # this batch's record of a job
        self.event_outbox: dict[int, str] = {}  # node events (JSON), the same way
        self._event_seq = 0
        # dbd's associations, users and QOS (controller/associations.py), newest known.
        self.associations: AssocSet | None = None
        self.reservations = ReservationBook()
        self.enforce: frozenset[str] = frozenset()
        self.priorities = PriorityKeeper(conf)
        # The loop's last backfill pass: the plan behind every expected start, kept
        # whole so ``corral why`` explains the very plan squeue --start shows.
        self.backfill_pass: tuple[Snapshot, Plan, BackfillParams] | None = None
        self.apply_config(conf)

    # ------------------------------------------------------------ configuration

    def apply_config(self, conf: SlurmConfig) -> None:
        """Adopt a (re)loaded slurm.conf; nodes keep their runtime state."""
        self.conf = conf
        self.capacity = Capacity(conf)
        self.enforce = associations.enforcing(conf.accounting.enforce)
        nodes: dict[str, NodeRuntime] = {}
        for node in conf.nodes:
            current = self.nodes.get(node.name)
            if current is None:
                current = NodeRuntime(name=node.name)
                state = node.state.upper()
                if state in ("DOWN", "FAIL"):
                    current = replace(
                        current, state="DOWN", reason=node.reason or "Configured down"
                    )
                elif state == "DRAIN":
                    current = replace(current, drain=True, reason=node.reason or "Configured drain")
            nodes[node.name] = current
        self.nodes = nodes
        self.partition_state = {
            p.name: self.partition_state.get(p.name, p.state) for p in conf.partitions
        }
        self._used = {name: [0, 0] for name in nodes}
        self._shared = {}
        self._gres_used = {}
        self._gpus_used = {}
        self._cpus_pinned = {}
        for job in self.jobs.values():
            if holds_nodes(job):
                self._account(job, +1)
        self.priorities.apply_config(conf, len(conf.nodes))

    def load(self, monotonic: float) -> None:
        """Restore state from the journal after a restart.

        Nodes keep their administrative state; their liveness clock starts
        now, so agents get a full SlurmdTimeout to re-attach before any node
        is declared DOWN.
        """
        loaded = self.journal.load()
        self.jobs = loaded.jobs
        self._pending = {
            i: None for i, j in sorted(self.jobs.items()) if j.state is JobState.PENDING
        }
        self._ended = {
            i: j.end_time for i, j in self.jobs.items() if j.state.finished and not holds_nodes(j)
        }
        self.priorities.restore(loaded.meta.get(USAGE_KEY))
        if ASSOCIATIONS_KEY in loaded.meta:
            try:
                assocs = AssocSet.from_json(loaded.meta[ASSOCIATIONS_KEY])
            except (ValueError, KeyError, TypeError) as exc:  # an older controller's form
                log.warning("saved associations not read (%s): waiting for dbd's", exc)
            else:
                self.associations = self.priorities.associations = assocs
        if RESERVATIONS_KEY in loaded.meta:
            self.reservations = ReservationBook.from_json(loaded.meta[RESERVATIONS_KEY])
        self.outbox = loaded.outbox
        self._outbox_seq = max(int(loaded.meta.get(OUTBOX_SEQ_KEY, 0)), max(self.outbox, default=0))
        self.event_outbox = loaded.events
        self._event_seq = max(
            int(loaded.meta.get(EVENT_SEQ_KEY, 0)), max(self.event_outbox, default=0)
        )
        if self.outbox or self.event_outbox:
            self.outbox_ready.set()
        self.next_job_id = max(
            int(loaded.meta.get("next_job_id", self.conf.first_job_id)),
            max(self.jobs, default=0) + 1,
            self.conf.first_job_id,
        )
        for name, saved in loaded.nodes.items():
            if name in self.nodes:
                self.nodes[name] = replace(
                    self.nodes[name], **saved, last_seen=monotonic, responding=False
                )
        self.apply_config(self.conf)
        log.info("recovered %d jobs, next job id %d", len(self.jobs), self.next_job_id)

    # ------------------------------------------------------------ durability

    def _touch_job(self, job: Job) -> None:
        if job.steps and job.state.finished and any(s.running for s in job.steps):
            job = replace(job, steps=steps.ended_with_job(job, job.end_time or int(time.time())))
        elif job.state is JobState.PENDING and (job.steps or job.signal_sent):
            job = replace(job, steps=(), signal_sent=False)  # requeued: a new run
        old = self.jobs.get(job.job_id)
        if self.recorder is not None and accounting_changed(old, job):
            self._record(job)
        ended = job.state.finished and (old is None or not old.state.finished)
        if ended and self.conf.accounting.jobcomp == "filetxt":
            line = jobcomp.line(job, self.conf.cluster_name)
            jobcomp.append(self.conf.accounting.jobcomp_loc, line)
        self.jobs[job.job_id] = job
        self._batch.jobs[job.job_id] = job
        if job.state is JobState.PENDING:
            self._pending[job.job_id] = None
        else:
            self._pending.pop(job.job_id, None)
        if job.state.finished and not holds_nodes(job):
            self._ended[job.job_id] = job.end_time
        else:
            self._ended.pop(job.job_id, None)

    def _record(self, job: Job) -> None:
        """Queue ``job``'s accounting record (replacing one this batch already has)."""
        assert self.recorder is not None
        earlier = self._outbox_of_job.get(job.job_id)
        if earlier is not None:
            del self._batch.outbox[earlier]
        self._outbox_seq += 1
        self._batch.outbox[self._outbox_seq] = self.recorder(job)
        self._batch.meta[OUTBOX_SEQ_KEY] = str(self._outbox_seq)
        self._outbox_of_job[job.job_id] = self._outbox_seq

    def set_associations(self, assocs: AssocSet) -> None:
        """dbd's newest associations, users and QOS (kept for restarts and dbd outages)."""
        self.associations = self.priorities.associations = assocs
        self.priorities.last_calc = 0  # new shares: recompute at the next cycle
        self._batch.meta[ASSOCIATIONS_KEY] = assocs.to_json()

    def delivered(self, seq: int) -> None:
        """dbd holds every record up to ``seq``: drop them (from disk at the next flush)."""
        _drop_through(self.outbox, seq)
        self._batch.delivered = max(self._batch.delivered, seq)

    def _touch_node(self, node: NodeRuntime) -> None:
        old = self.nodes.get(node.name)
        if self.recorder is not None and old is not None:
            self._node_events(old, node)
        self.nodes[node.name] = node
        self._batch.nodes[node.name] = node

    def _node_events(self, old: NodeRuntime, new: NodeRuntime) -> None:
        """Accounting's node events: one starts as a node goes down or is drained
        (or its reason changes), and ends as it comes back."""
        was, now = _event_state(old), _event_state(new)
        if was == now and (not now or old.reason_time == new.reason_time):
            return
        cpus = self.conf.node(new.name).cpus if new.name in self.capacity.nodes else 0
        stamp = int(time.time())
        if was:
            self._event(old, was, old.reason_time or stamp, stamp, cpus)
        if now:
            self._event(new, now, new.reason_time or stamp, 0, cpus)

    def _event(self, node: NodeRuntime, state: str, start: int, end: int, cpus: int) -> None:
        self._event_seq += 1
        self._batch.events[self._event_seq] = json.dumps(
            {
                "node": node.name,
                "start": start,
                "end": end,
                "state": state,
                "reason": node.reason,
                "reason_uid": node.reason_uid,
                "cpus": cpus,
            }
        )
        self._batch.meta[EVENT_SEQ_KEY] = str(self._event_seq)

    def events_delivered(self, seq: int) -> None:
        """dbd holds every node event up to ``seq``."""
        _drop_through(self.event_outbox, seq)
        self._batch.events_delivered = max(self._batch.events_delivered, seq)

    async def flush(self, *, inline: bool = False) -> None:
        """Return once every change made before the call is on disk.

        Commits normally run in the writer thread, so that the loop admits
        other requests meanwhile and they share the next commit (group
        commit). A caller that knows nothing else is waiting (``inline``) gets
        the commit on the loop instead when the disk is fast: the hand-off to
        the thread and back costs more than the fsync itself. Once a commit
        has taken longer than ``INLINE_COMMIT_S`` (a slow or busy disk), every
        commit goes to the thread until one is fast again.
        """
        target = self._batch_seq
        if self._committed_seq >= target:
            return
        async with self._lock:
            if self._committed_seq >= target:
                return
            batch, self._batch = self._batch, Batch()
            self._outbox_of_job = {}
            self._batch_seq += 1
            if batch:
                self._in_flight = batch
                try:
                    began = time.perf_counter()
                    if inline and self._commit_s < INLINE_COMMIT_S:
                        self.journal.write(batch)
                    else:
                        await asyncio.get_running_loop().run_in_executor(
                            self._writer, self.journal.write, batch
                        )
                    self._commit_s = time.perf_counter() - began
                finally:
                    self._in_flight = None
                if batch.outbox or batch.events:  # on disk now: dbd may have them
                    self.outbox.update(batch.outbox)
                    self.event_outbox.update(batch.events)
                    self.outbox_ready.set()
            self._committed_seq = target

    def payload(self, job: Job) -> Payload | None:
        key = job.array_job_id or job.job_id
        for batch in (self._batch, self._in_flight):
            if batch is not None and key in batch.payloads:
                return batch.payloads[key]
        return self.journal.payload(key)

    # ------------------------------------------------------------ jobs

    def submit(self, spec: JobSpec, who: Principal, now: int) -> Admitted:
        if len(self.jobs) >= self.conf.max_job_count:
            # Slurm's answer at MaxJobCount: EAGAIN, which sbatch retries.
            raise SlurmError(errors.EAGAIN)
        delay = int(self.conf.scheduler_param("requeue_delay") or 121)
        admitted = admit(
            spec, who, self.conf, self.partition_state, self.next_job_id, now, delay, self.capacity
        )
        job = admitted.job
        self._check_fencing(job)
        if "associations" in self.enforce:
            if self.associations is None:
                raise SlurmError(errors.ESLURM_INVALID_ACCOUNT)
            queued = (j for j in self.jobs.values() if not j.state.finished)
            job = associations.admit(
                job, self.associations, self.enforce, queued, qos_given=bool(spec.qos)
            )
        elif self.associations is not None and not job.account:  # DefaultAccount still applies
            job = replace(job, account=self.associations.users.get(job.user, ""))
        if job.reservation:
            self.reservations.admit(job.reservation, job.user, job.account)
        job = replace(job, calc_priority=self.priorities.initial(job, now))
        self._touch_job(job)
        self._batch.payloads[job.job_id] = admitted.payload
        self._advance_job_id(job.job_id + 1)
        self.counters["submitted"] += admitted.tasks
        self.last_update = now
        return replace(admitted, job=job)

    def _advance_job_id(self, next_id: int) -> None:
        self.next_job_id = next_id
        self._batch.meta["next_job_id"] = str(next_id)

    def split_task(self, array: Job, index: int) -> Job:
        """Give one pending task of ``array`` its own record, as Slurm does.

        An array is one record until its tasks start (or are held, cancelled or
        updated one by one); each task split off gets the next job id, and the
        last one takes over the array's own record and id.
        """
        rest = arrayspec.without(array.array_pending, index)
        if rest:
            task = replace(array, job_id=self.next_job_id, array_task_id=index, array_pending="")
            self._advance_job_id(self.next_job_id + 1)
            self._touch_job(replace(array, array_pending=rest))
        else:
            task = replace(array, array_task_id=index, array_pending="")
        self._touch_job(task)
        return task

    def post(self, job_id: int, event: Event) -> Job:
        """Apply a state-machine event; raise InvalidTransition if it does not apply."""
        old = self.jobs[job_id]
        new = jobstate.apply(old, event)
        if holds_nodes(old) and not holds_nodes(new):
            self._account(old, -1)
            self.priorities.ended(old, new.end_time or getattr(event, "now", 0))
        elif holds_nodes(new) and not holds_nodes(old):
            self._account(new, +1)
        self._touch_job(new)
        if new.state is not old.state:
            self._count(old, new)
        self.last_update = max(self.last_update, getattr(event, "now", 0))
        log.debug("job_id=%d %s -> %s", job_id, old.state.name, new.state.name)
        return new

    def _count(self, old: Job, new: Job) -> None:
        if new.state is JobState.RUNNING:
            self.counters["started"] += 1
        elif new.state is JobState.COMPLETED:
            self.counters["completed"] += 1
        elif new.state is JobState.CANCELLED:
            self.counters["canceled"] += 1
        elif new.state.finished:
            self.counters["failed"] += 1

    def update(self, job: Job) -> None:
        """Store a job whose user-updatable attributes changed (never its state)."""
        assert job.state is self.jobs[job.job_id].state
        self._touch_job(job)

    def _account(self, job: Job, sign: int) -> None:
        """Add (``sign`` +1) or remove (-1) what ``job`` holds on its nodes."""
        shares = self.capacity.sharing(job)
        for i, (name, cpus, memory) in enumerate(
            zip(job.nodes, job.cpus, job.alloc_mem, strict=True)
        ):
            used = self._used.setdefault(name, [0, 0])
            if shares:
                jobs = self._shared.setdefault(name, {}).setdefault(job.partition, {})
                jobs[cpus] = jobs.get(cpus, 0) + sign
                if not jobs[cpus]:
                    del jobs[cpus]
            else:
                used[0] += sign * cpus
            used[1] += sign * memory
            for held, ids in ((self._gpus_used, job.gpus), (self._cpus_pinned, job.cpu_ids)):
                if ids and ids[i]:
                    mine = held.setdefault(name, set())
                    (mine.update if sign > 0 else mine.difference_update)(ids[i])
            held = self.capacity.gres_held(job, i)
            if held:
                gres = self._gres_used.setdefault(name, {})
                for gname, gtype, count in held:
                    gres[gname, gtype] = gres.get((gname, gtype), 0) + sign * count

    def used(self, name: str) -> tuple[int, int]:
        """(CPUs held by jobs that do not share them, MiB held by all jobs) on ``name``.

        Jobs sharing CPUs (OverSubscribe) are not in the CPU count, so that a
        start that shares CPUs passes the re-check in ``commit``; what
        ``scontrol show node`` calls CPUAlloc is ``allocated_cpus``.
        """
        cpus, memory = self._used.get(name, (0, 0))
        return cpus, memory

    def allocated_cpus(self, name: str) -> int:
        """CPUs in use on ``name`` as Slurm counts them: held ones plus those jobs share."""
        held = self._used.get(name, (0, 0))[0]
        pools = self._shared.get(name, {}).values()
        shared = sum(cpus * n for jobs in pools for cpus, n in jobs.items())
        return held + min(shared, max(self.conf.node(name).cpus - held, 0))

    def jobs_on(self, name: str) -> list[Job]:
        return [j for j in self.jobs.values() if holds_nodes(j) and name in j.nodes]

    def purge(self, now: int) -> list[int]:
        """Forget finished jobs older than MinJobAge (they live on in accounting)."""
        if now == self._purged_at:
            return []  # a scan of every finished job: at most once a second
        self._purged_at = now
        age = self.conf.min_job_age
        gone = [i for i, end in self._ended.items() if end and now - end >= age]
        keys = set()
        for job_id in gone:
            job = self.jobs.pop(job_id)
            keys.add(job.array_job_id or job_id)
            del self._ended[job_id]
            self._batch.jobs.pop(job_id, None)
            self._batch.deleted_jobs.add(job_id)
        if gone:
            # An array's tasks share one payload: it goes with the array's last task.
            still = {j.array_job_id for j in self.jobs.values() if j.array_job_id in keys}
            self._batch.deleted_payloads.update(keys - still)
        return gone

    # ------------------------------------------------------------ scheduling

    def recalculate_priorities(self, now: int) -> None:
        """Every PriorityCalcPeriod: advance fair-share usage, re-rank pending jobs."""
        keeper = self.priorities
        if not keeper.due(now):
            return
        running = [j for j in self.jobs.values() if holds_nodes(j)]
        pending = [self.jobs[i] for i in self._pending]
        active = sum(1 for n in self.nodes.values() if self.node_usable(n))
        for job_id, value in keeper.recalculate(now, running, pending, active).items():
            job = self.jobs[job_id]
            if job.calc_priority != value:
                # Derived from usage (which is journaled) at every calculation: not journaled.
                self.jobs[job_id] = replace(job, calc_priority=value)
        self._batch.meta[USAGE_KEY] = keeper.saved()

    def node_usable(self, node: NodeRuntime) -> bool:
        return node.state == "UP" and node.responding and not node.drain

    # ------------------------------------------------------------ steps

    def create_step(
        self, job_id: int, req: StepRequest, name: str, time_limit: int, line: str, who: Principal
    ) -> tuple[Job, Step]:
        """A new step of a running job (SlurmError as srun reports it)."""
        job = self.jobs.get(job_id)
        if job is None:
            raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
        if job.uid != who.uid and not who.is_admin:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        if job.state.finished or COMPLETING in job.flags:
            raise SlurmError(errors.ESLURM_ALREADY_DONE)
        if job.state is not JobState.RUNNING:
            raise SlurmError(errors.ESLURM_JOB_PENDING)
        step = steps.new_step(job, req, name, int(time.time()), time_limit, line)
        job = replace(job, steps=(*job.steps, step))
        self._touch_job(job)
        return job, step

    def step_node_done(
        self,
        job_id: int,
        step_id: int,
        node: str,
        statuses: list[int],
        usage: tuple[int, int, int] = (0, 0, 0),
        end: int = 0,
        sum_rss: int = 0,
    ) -> None:
        """A node's part of a step ended (its tasks' wait statuses, -1: never ran)."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        new = tuple(
            steps.node_done(s, node, statuses, usage, end or int(time.time()), sum_rss)
            if s.step_id == step_id
            else s
            for s in job.steps
        )
        if new != job.steps:
            self._touch_job(replace(job, steps=new))

    def signals_due(self, now: int) -> list[Job]:
        """Running jobs whose ``--signal`` (for the steps) is due: marked as sent."""
        due = []
        for job in self.jobs.values():
            if not job.signal_num or job.signal_batch_only or job.signal_sent:
                continue
            if job.state is not JobState.RUNNING or job.time_limit <= 0:
                continue
            end = job.end_time or job.start_time + job.time_limit * 60
            if now >= end - job.signal_time:
                due.append(job)
        for job in due:
            self._touch_job(replace(job, signal_sent=True))
        return due

    def end_interactive(self, job: Job, now: int, exit_status: int, outcome: str) -> None:
        """An allocation without a batch script ends when its client says so (or is
        cancelled, or reaches its limit): no agent will report it."""
        if job.state is JobState.RUNNING and COMPLETING not in job.flags:
            self.post(job.job_id, jobstate.Finish(now, exit_status, outcome))
        elif COMPLETING in job.flags:
            self.post(job.job_id, jobstate.Finish(now, exit_status, "cancelled"))

    def end_interactive_past_limit(self, now: int) -> list[Job]:
        """Interactive allocations whose time limit has passed, ended as TIMEOUT."""
        over = [
            j
            for j in self.jobs.values()
            if j.interactive
            and j.state is JobState.RUNNING
            and j.time_limit > 0
            and now >= j.start_time + j.time_limit * 60
        ]
        for job in over:
            self.end_interactive(job, now, 0, "timeout")
        return over

    # ------------------------------------------------------------ reservations

    def reservation_cluster(self) -> Cluster:
        """What a reservation request is checked against now."""
        default = self.conf.default_partition
        accounts = None
        if self.associations is not None and self.associations.assocs:
            accounts = frozenset(a.account for a in self.associations.assocs)
        running = [
            (j.nodes, j.start_time + j.time_limit * 60 if j.time_limit > 0 else 0, j.reservation)
            for j in self.jobs.values()
            if holds_nodes(j)
        ]
        return Cluster(
            nodes={n.name: n.cpus for n in self.conf.nodes},
            usable=frozenset(
                name
                for name, node in self.nodes.items()
                if node.state not in ("DOWN", "UNKNOWN") and not node.drain
            ),
            partitions={p.name: tuple(p.nodes) for p in self.conf.partitions},
            default_partition=default.name if default else "",
            running=running,
            accounts=accounts,
        )

    def change_reservation(self, action: str, settings: dict[str, str], now: int) -> Reservation:
        """scontrol's create, update or delete reservation (SlurmError if refused)."""
        book, cluster = self.reservations, self.reservation_cluster()
        if action == "create":
            resv = book.create(settings, cluster, now)
        elif action == "update":
            resv = book.update(settings, cluster, now)
        elif action == "delete":
            resv = book.delete(settings.get("reservationname", ""), cluster)
            self._release_jobs_of(resv, now)
        else:
            raise SlurmError(errors.EINVAL, f"Invalid reservation action: {action}")
        self._resv_changed(resv, deleted=action == "delete", now=now)
        return resv

    def end_reservations(self, now: int) -> list[Reservation]:
        """Reservations whose end has come, removed (their pending jobs held)."""
        ended = self.reservations.ended(now)
        for resv in ended:
            self._release_jobs_of(resv, now)
            self._resv_changed(resv, deleted=False, now=now)
        return ended

    def _release_jobs_of(self, resv: Reservation, now: int) -> None:
        """Pending jobs of a reservation that is gone: out of it, and held unless
        it had NO_HOLD_JOBS_AFTER_END (Slurm's ReservationDeleted hold)."""
        hold = not resv.has("NO_HOLD_JOBS_AFTER_END")
        for job in list(self.jobs.values()):
            if job.reservation == resv.name and job.state is JobState.PENDING:
                held = (job.held or "resv") if hold else job.held
                self._touch_job(replace(job, reservation="", held=held))
        self.last_update = now

    def _resv_changed(self, resv: Reservation, *, deleted: bool, now: int) -> None:
        self._batch.meta[RESERVATIONS_KEY] = self.reservations.to_json()
        if self.recorder is None:
            return
        self._event_seq += 1
        info = {
            "name": resv.name,
            "id": resv.id,
            "nodes": hostlist.compress(resv.nodes),
            "node_count": len(resv.nodes),
            "core_count": resv.cores,
            "start": resv.start,
            "end": min(resv.end, now) if deleted else resv.end,
            "flags": ",".join(resv.flags),
            "users": ",".join(resv.users),
            "accounts": ",".join(resv.accounts),
            "partition": resv.partition,
            "tres": f"cpu={resv.cores}",
            "deleted": deleted,
        }
        self._batch.events[self._event_seq] = json.dumps({"reservation": info})
        self._batch.meta[EVENT_SEQ_KEY] = str(self._event_seq)

    def time_limit_at_launch(self, job: Job) -> int:
        """The limit a node agent enforces: the job's, cut at its reservation's end."""
        resv = self.reservations.by_name.get(job.reservation) if job.reservation else None
        if resv is None:
            return job.time_limit
        left = max(-(-(resv.end - job.start_time) // 60), 1)
        return left if job.time_limit < 0 else min(job.time_limit, left)

    def snapshot(self) -> Snapshot:
        """An immutable picture of the cluster for ``core.schedule``."""
        views = {}
        fenced_only = gpushare.fenced_only(self.conf)
        for rank, conf_node in enumerate(self.conf.nodes):
            runtime = self.nodes[conf_node.name]
            cpus, memory = self.used(conf_node.name)
            shared = tuple(
                (part, sum(c * n for c, n in jobs.items()), max(jobs))
                for part, jobs in self._shared.get(conf_node.name, {}).items()
                if jobs
            )
            free_cpus = conf_node.cpus - cpus
            if shared:  # sharing jobs take idle CPUs first, as Slurm places them
                free_cpus = max(free_cpus - sum(load for _, load, _ in shared), 0)
            gres_used = self._gres_used.get(conf_node.name)
            gres = self.capacity.gres_free(
                conf_node.name, gres_used or {}, self._gpus_used.get(conf_node.name, set())
            )
            if fenced_only and not runtime.mps:
                gres = gpushare.unfenced(gres)
            views[conf_node.name] = NodeView(
                name=conf_node.name,
                cpus=conf_node.cpus,
                real_memory=conf_node.real_memory,
                weight=conf_node.weight,
                features=frozenset(conf_node.features),
                free_cpus=free_cpus,
                free_memory=conf_node.real_memory - memory,
                usable=self.node_usable(runtime),
                idle=cpus == 0 and not shared,
                gres=gres,
                unshared=cpus > 0,
                shared=shared,
                unit=self.capacity.nodes[conf_node.name].unit,
                rank=rank,
            )
        partitions = {
            name: view
            if self.partition_state.get(name, view.state) == view.state
            else replace(view, state=self.partition_state[name])
            for name, view in self.capacity.partitions.items()
        }
        pending = tuple(self.jobs[job_id] for job_id in self._pending)
        facts = (
            {
                j.job_id: JobFacts(
                    j.state.name,
                    j.exit_status,
                    j.name,
                    j.uid,
                    j.array_job_id,
                    j.array_task_id,
                    j.start_time,
                    j.array_pending,
                )
                for j in self.jobs.values()
            }
            if any(j.dependency for j in pending)
            else {}
        )
        running_per_array: dict[int, int] = {}
        running = []
        for j in self.jobs.values():
            if holds_nodes(j):
                running.append(
                    Running(
                        j.job_id,
                        j.nodes,
                        j.cpus,
                        j.alloc_mem,
                        j.end_time,
                        j.gres_alloc,
                        preemptable=j.state is JobState.RUNNING and COMPLETING not in j.flags,
                        priority=j.priority,
                        qos=j.qos,
                        partition=j.partition,
                        start_time=j.start_time,
                        user=j.user,
                    )
                )
                if j.array_job_id:
                    running_per_array[j.array_job_id] = running_per_array.get(j.array_job_id, 0) + 1
        gates, usage = self._limits(pending)
        return Snapshot(
            views,
            partitions,
            pending,
            facts,
            running_per_array,
            tuple(running),
            gates,
            usage,
            self.reservations.views(),
            self._preempt_policy(),
        )

    def _preempt_policy(self) -> PreemptPolicy | None:
        """PreemptType as the core applies it (None: off)."""
        conf = self.conf
        if conf.preempt_mode == "OFF":
            return None
        if conf.preempt_type == "PREEMPT/QOS":
            qos = self.associations.qos if self.associations is not None else {}
            return PreemptPolicy("qos", qos={name: q.preempt for name, q in qos.items()})
        tiers = {p.name: p.priority_tier for p in conf.partitions}
        return PreemptPolicy("partition_prio", tiers=tiers)

    def preempt(self, plan: Plan) -> list[tuple[Job, bool]]:
        """Requeue (PreemptMode=REQUEUE, if the job may be) or cancel each of the
        plan's victims; (the victim, whether it is requeued) for the agents."""
        out = []
        for victim_id, for_id in plan.preempted.items():
            job = self.jobs.get(victim_id)
            if job is None or job.state is not JobState.RUNNING or COMPLETING in job.flags:
                continue
            requeue = self.conf.preempt_mode == "REQUEUE" and job.requeue
            event: Event = jobstate.Requeue(plan.now) if requeue else jobstate.Preempt(plan.now)
            out.append((self.post(victim_id, event), requeue))
            log.info(
                "job_id=%d preempted (%s) for job_id=%d",
                victim_id,
                "requeue" if requeue else "cancel",
                for_id,
            )
        return out

    def _limits(
        self, pending: tuple[Job, ...]
    ) -> tuple[dict[int, tuple[Gate, ...]], dict[str, int]]:
        """Per pending job its accounting limits, and what running jobs use of them."""
        assocs = self.associations
        if assocs is None or "limits" not in self.enforce:
            return {}, {}
        usage: dict[str, int] = {}
        for job in self.jobs.values():
            if job.state is JobState.RUNNING:
                for gate in associations.gates(job, assocs):
                    if gate.key:
                        usage[gate.key] = usage.get(gate.key, 0) + gate.amount
        used = self._used_by(assocs)
        safe = "safe" in self.enforce
        qos_used = self._qos_used_by()
        gates = {
            job.job_id: g
            for job in pending
            if (g := associations.gates(job, assocs, used, safe, qos_used))
        }
        return gates, usage

    def _used_by(self, assocs: AssocSet) -> Callable[[Assoc], Spent]:
        """Each association's decayed usage from fair share's (``associations.Spent``),
        an account's including every account and user below it: what GrpTRESMins
        and GrpWall limit."""
        usage = self.priorities.usage
        held = usage.held()
        parents = {a.account: a.parent for a in assocs.assocs if not a.user}
        times: dict[str, list[float]] = {}  # account -> [billing, wall] below it
        tres: dict[str, dict[str, float]] = {}  # account -> TRES-seconds below it
        for key, billing in usage.raw.items():
            wall, mine = usage.wall.get(key, 0.0), held.get(key, {})
            name, seen = key[0], set()
            while name and name not in seen:
                pair = times.setdefault(name, [0.0, 0.0])
                pair[0] += billing
                pair[1] += wall
                sums = tres.setdefault(name, {})
                for tres_name, seconds in mine.items():
                    sums[tres_name] = sums.get(tres_name, 0.0) + seconds
                seen.add(name)
                name = parents.get(name, "")

        def used(assoc: Assoc) -> Spent:
            if assoc.user:
                key = (assoc.account, assoc.user)
                return Spent(usage.raw.get(key, 0.0), usage.wall.get(key, 0.0), held.get(key, {}))
            if assoc.account not in times:
                return NOTHING_SPENT
            billing, wall = times[assoc.account]
            return Spent(billing, wall, tres[assoc.account])

        return used

    def _qos_used_by(self) -> Callable[[str], Spent]:
        """Each QOS's decayed usage, for its own GrpTRESMins and GrpWall."""
        usage = self.priorities.usage
        held = usage.qos_held()

        def qos_used(name: str) -> Spent:
            key = ("", name)
            return Spent(usage.qos.get(key, 0.0), usage.qos_wall.get(key, 0.0), held.get(name, {}))

        return qos_used

    def commit(self, plan: Plan) -> list[Job]:
        """Apply a plan's starts that still hold; return the jobs started."""
        started = []
        for start in plan.starts:
            job = self.jobs.get(start.job_id)
            if job is None or job.state is not JobState.PENDING or job.held:
                continue
            wanted = zip(start.nodes, start.cpus, start.memory, strict=True)
            if not all(self._can_take(n, c, m) for n, c, m in wanted):
                continue
            if job.array_pending:
                task = arrayspec.first(job.array_pending) if start.task is None else start.task
                if not arrayspec.contains(job.array_pending, task):
                    continue
                job = self.split_task(job, task)
            gpus = self._gpu_indices(start.nodes, start.gres)
            if gpus is None:  # a GPU this pass gave both whole and in shares: next pass
                continue
            event = jobstate.Start(
                plan.now,
                start.partition,
                start.nodes,
                start.cpus,
                start.memory,
                start.gres,
                gpus,
                self._cpus_near(start.nodes, start.cpus, gpus),
            )
            started.append(self.post(job.job_id, event))
        for job_id, why in plan.ended.items():
            job = self.jobs.get(job_id)
            if job is not None and job.state is JobState.PENDING:
                self.post(job_id, jobstate.GiveUp(plan.now, why))
                log.info("job_id=%d ended pending: %s", job_id, why.value)
        # Reasons and expected starts are derived each cycle; they are not journaled.
        for job_id, reason in plan.reasons.items():
            job = self.jobs.get(job_id)
            if job is not None and job.state is JobState.PENDING and job.reason is not reason:
                self.jobs[job_id] = replace(job, reason=reason)
        if plan.backfilled:
            for job_id in self._pending:
                job = self.jobs[job_id]
                exp = plan.expected.get(job_id)
                when, nodes = (exp.start_time, exp.nodes) if exp else (0, ())
                if (job.expected_start, job.expected_nodes) != (when, nodes):
                    self.jobs[job_id] = replace(job, expected_start=when, expected_nodes=nodes)
        return started

    def _gpu_indices(
        self, nodes: tuple[str, ...], gres: tuple[tuple[tuple[str, str, int], ...], ...]
    ) -> tuple[tuple[int, ...], ...] | None:
        """The lowest free GPU indices of each allocated type on each node (numbered as
        ``gpu_numbering`` says; those held are kept in ``_gpus_used``), passing over
        GPUs in shared use; None if a node lacks them, or a share is asked of a GPU
        held whole (the core's plan does not couple the two within one pass)."""
        if not gres:
            return ()
        out = []
        for name, items in zip(nodes, gres, strict=True):
            taken = set(self._gpus_used.get(name, ()))
            shared = gpushare.shared_gpus(
                (n, k, c) for (n, k), c in self._gres_used.get(name, {}).items()
            )
            if gpushare.shared_gpus(items) & taken:
                return None
            numbered = self.gpu_numbering(name) if any(i[0] == "gpu" for i in items) else []
            chosen: list[int] = []
            for item_name, kind, count in items:
                if item_name != "gpu":
                    continue
                free = [i for k, i in numbered if k == kind and i not in taken | shared]
                if len(free) < count:
                    return None
                chosen += free[:count]
                taken.update(free[:count])
            out.append(tuple(sorted(chosen)))
        return tuple(out) if any(out) else ()

    def _check_fencing(self, job: Job) -> None:
        """Refuse a fraction by memory when the site demands it be enforced and no
        node of the job's partitions that has registered can (none runs MPS)."""
        if not gpushare.fenced_only(self.conf) or not gpushare.asks_fraction(job.gres):
            return
        names = {n for p in job.partitions for n in self.capacity.partitions[p].nodes}
        seen = [self.nodes[n] for n in names if self.nodes[n].ever_registered]
        if seen and not any(node.mps for node in seen):
            raise SlurmError(
                errors.ESLURM_INVALID_GRES,
                "GPU memory fractions cannot be enforced: no node of partition "
                f"{','.join(job.partitions)} runs MPS (SchedulerParameters=enforce_gpu_fractions)",
            )

    def _cpus_near(
        self, nodes: tuple[str, ...], cpus: tuple[int, ...], gpus: tuple[tuple[int, ...], ...]
    ) -> tuple[tuple[int, ...], ...]:
        """The CPUs to pin a starting job to on each node, near its GPUs where gres.conf
        says which cores they are close to, else where the node's probe found them
        (``gpuaffinity``); () when on none."""
        if not gpus:
            return ()
        out = []
        for name, count, ids in zip(nodes, cpus, gpus, strict=True):
            near = (self.capacity.gpu_cpus(name) or dict(self.nodes[name].gpu_cpus)) if ids else {}
            pinned = self._cpus_pinned.get(name, set())
            total = self.conf.node(name).cpus
            out.append(gpuaffinity.near_cpus(near, ids, count, total, pinned) if near else ())
        return tuple(out) if any(out) else ()

    def share_environment(self, job: Job, index: int) -> dict[str, str]:
        """What binds ``job`` to its GPU shares on ``job.nodes[index]`` (none: {})."""
        items = job.gres_alloc[index] if job.gres_alloc else ()
        if not gpushare.shared_gpus(items):
            return {}
        node = self.capacity.nodes.get(job.nodes[index])
        totals = {(n, k): c for n, k, c in node.gres} if node is not None else {}
        return gpushare.share_environment(items, totals)

    def gpus_held(self, name: str) -> int:
        """How many of ``name``'s GPUs jobs hold whole."""
        return len(self._gpus_used.get(name, ()))

    def gpu_numbering(self, name: str) -> list[tuple[str, int]]:
        """A node's GPUs as (type, index) (``corral.gpunumbers``)."""
        return self.capacity.gpus(name)

    def _can_take(self, name: str, cpus: int, memory: int) -> bool:
        node = self.nodes.get(name)
        conf = self.conf.node(name)
        if node is None or not self.node_usable(node):
            return False
        used_cpus, used_mem = self.used(name)
        return used_cpus + cpus <= conf.cpus and used_mem + memory <= conf.real_memory

    # ------------------------------------------------------------ nodes

    def node_registered(self, reg: Registration, monotonic: float, now: int) -> None:
        """An agent attached for this node: it is up (unless an admin said otherwise).

        Like slurmd, a node whose probed CPUs or memory fall short of its
        configuration is drained, so jobs are never placed on resources that
        are not there.
        """
        node = self.nodes[reg.name]
        conf = self.conf.node(reg.name)
        state = node.state
        if state == "UNKNOWN" or (state == "DOWN" and self._returns_to_service(node)):
            state = "UP"
        changed = state != node.state
        drain, reason = node.drain, ("" if changed and not node.drain else node.reason)
        shortfall = _shortfall(conf.cpus, conf.real_memory, conf.gres, reg)
        if shortfall and not node.drain:
            drain, reason, changed = True, shortfall, True
            log.warning("node %s drained: %s", reg.name, shortfall)
        node = replace(
            node,
            state=state,
            drain=drain,
            reason=reason,
            responding=True,
            last_seen=monotonic,
            ever_registered=True,
            hostname=reg.hostname,
            arch=reg.arch,
            os=reg.os,
            version=reg.version,
            boot_time=reg.boot_time,
            agent_start_time=reg.agent_start_time,
            mps=reg.mps,
            gres_found=reg.gres_found or "",
            gpu_cpus=reg.gpu_cpus,
            reason_user="slurm" if shortfall else node.reason_user,
            reason_time=now if shortfall else node.reason_time,
        )
        if changed:
            self._touch_node(node)
        else:
            self.nodes[reg.name] = node
        self.last_update = now

    def _returns_to_service(self, node: NodeRuntime) -> bool:
        rts = int(dict(self.conf.settings).get("ReturnToService", "0") or 0)
        if rts >= 2:
            return True
        return rts == 1 and node.reason == "Not responding"

    def node_seen(self, name: str, monotonic: float) -> None:
        node = self.nodes.get(name)
        if node is not None:
            self.nodes[name] = replace(node, responding=True, last_seen=monotonic)

    def node_lost(self, name: str) -> None:
        """The agent's stream closed: not responding, but not DOWN yet."""
        node = self.nodes.get(name)
        if node is not None:
            self.nodes[name] = replace(node, responding=False)

    def fail_jobs_on(self, name: str, now: int) -> list[tuple[Job, bool]]:
        """End or requeue the jobs on a node that failed; (job before, requeued) each."""
        failed = []
        for job in self.jobs_on(name):
            requeue = job.requeue and job.state is JobState.RUNNING
            self.post(job.job_id, jobstate.NodeFail(now, requeue))
            failed.append((job, requeue))
        return failed

    def set_node_down(self, name: str, reason: str, user: str, uid: int, now: int) -> None:
        node = replace(
            self.nodes[name],
            state="DOWN",
            reason=reason,
            reason_user=user,
            reason_uid=uid,
            reason_time=now,
        )
        self._touch_node(node)
        self.last_update = now

    def set_node_admin_state(
        self, names: Iterable[str], state: str, reason: str, who: Principal, now: int
    ) -> None:
        for name in names:
            node = self.nodes[name]
            if state == "DRAIN":
                node = replace(
                    node,
                    drain=True,
                    reason=reason,
                    reason_user=who.user,
                    reason_uid=who.uid,
                    reason_time=now,
                )
            elif state in ("DOWN", "FAIL"):
                node = replace(
                    node,
                    state="DOWN",
                    reason=reason,
                    reason_user=who.user,
                    reason_uid=who.uid,
                    reason_time=now,
                )
            elif state in ("RESUME", "IDLE", "UNDRAIN"):
                up = "UP" if node.ever_registered and node.responding else "UNKNOWN"
                node = replace(
                    node,
                    drain=False,
                    reason="",
                    reason_time=0,
                    state=node.state if state == "UNDRAIN" else up,
                )
            self._touch_node(node)
        self.last_update = now
