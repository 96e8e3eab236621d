"""JobStore: the only owner of the controller's live state.

Every change goes through a method here; each one updates the in-memory maps
and hands the new values to ``durable`` (``controller/durability.py``: the
journal batch, the accounting outboxes, jobcomp). ``await flush()`` makes all
changes made so far durable (group commit) and must precede any reply that
acknowledges them, and any launch that depends on them.

Resource usage per node is derived from the jobs that hold nodes (RUNNING,
or finished but still COMPLETING) and kept up to date in ``holdings``
(``controller/holdings.py``), so the scheduler's snapshot, which
``controller/snapshots.py`` builds from the store's maps and slurm.conf alone,
costs one pass over nodes and pending jobs.

Why this module is over 500 lines: it is the ledger's only writer, and each
of its methods is one change of the live maps (a submission, a state event, a
step, a reservation, a node's state) that must keep the maps, ``holdings``
and ``durable`` in step. The rules those changes apply live in their own
modules: ``drain`` (node states), ``binding`` (GPUs and CPUs of a start),
``assoclimits`` (accounting limits), ``snapshots`` (what the core sees).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from controller import (
    associations,
    binding,
    crontabs,
    drain,
    effects,
    expansion,
    flavornote,
    gpushare,
    hetjobs,
    hetsteps,
    jobstate,
    mail,
    movespec,
    mpmdsteps,
    nodefeatures,
    remotelicenses,
    snapshots,
    steps,
)
from controller.admission import Admitted, Capacity, admit
from controller.associations import AssocSet
from controller.core import BackfillParams, Plan, Snapshot, Start, devices, nodefree
from controller.core.gpulinks import link_map
from controller.core.priority import NO_RANKING, Ranking
from controller.cpubind import Shape
from controller.crontabs import CRONTABS_KEY, CronBook
from controller.drain import Registration as Registration  # what agents report: store API
from controller.durability import Durability
from controller.effects import PROLOG_SLURMCTLD, Effect, NewLimit, prolog_at_allocation
from controller.gpushare import Shares
from controller.hetsteps import StepPart
from controller.holdings import Holdings, holds_nodes
from controller.jobspec import JobSpec
from controller.jobstate import COMPLETING, Event, JobState
from controller.journal import StateJournal
from controller.model import Job, NodeRuntime, Payload, Step
from controller.principal import Principal
from controller.priorities import USAGE_KEY, PriorityKeeper
from controller.reservations import Cluster, Reservation, ReservationBook
from controller.steps import StepRequest
from controller.triggers import TriggerBook
from corral import arrayspec, errors, mailtype
from corral.config import SlurmConfig
from corral.errors import SlurmError

log = logging.getLogger(__name__)


def _schedulable(job: Job) -> bool:
    """Pending and not being sent to another cluster: the jobs snapshots offer."""
    return job.state is JobState.PENDING and not job.moved_to


ASSOCIATIONS_KEY = "associations"
RESERVATIONS_KEY = "reservations"
TRIGGERS_KEY = "triggers"  # strigger's triggers (controller/triggers.py)
#: Partition states set by ``scontrol update PartitionName=`` (JSON: name -> state).
PARTITION_STATE_KEY = "partition_state"


class JobStore:
    def __init__(self, conf: SlurmConfig, journal: StateJournal) -> None:
        self.conf = conf
        self.journal = journal
        self.jobs: dict[int, Job] = {}
        self.nodes: dict[str, NodeRuntime] = {}
        self.partition_state: dict[str, str] = {}
        self.next_job_id = conf.first_job_id
        self.last_update = 0
        self.counters = {"submitted": 0, "started": 0, "completed": 0, "canceled": 0, "failed": 0}
        self.holdings = Holdings(())
        self._node_views = snapshots.NodeViews()  # the snapshot's, rebuilt per changed node
        self._job_views = snapshots.JobViews()  # likewise per changed job
        self.durable = Durability(conf, journal)
        # Allocations not yet ready for their client, with what they wait for:
        # PrologSlurmctld (controller/ctldhooks.py), each node's Prolog under
        # PrologFlags=Alloc (controller/nodehooks.py). In memory only: after a
        # restart they are ready.
        self.configuring: dict[int, set[str]] = {}
        self._purged_at = 0
        self._pending: dict[int, None] = {}  # ids of PENDING jobs, in submission order
        self._ended: dict[int, int] = {}  # finished jobs off their nodes -> end time
        # dbd's associations, users and QOS (controller/associations.py), newest known.
        self.associations: AssocSet | None = None
        self.reservations = ReservationBook()
        self.crontabs = CronBook()  # scrontab's, by uid (controller/crontabs.py)
        # Leaders of heterogeneous jobs whose components may outlive them: what each
        # cycle's ``hetjobs.orphans`` looks at, instead of every job.
        self.het_leaders: set[int] = set()
        self.triggers = TriggerBook()
        self.enforce: frozenset[str] = frozenset()
        self.priorities = PriorityKeeper(conf)
        # Pending jobs' priorities from the keeper's last calculation: a value,
        # replaced whole every PriorityCalcPeriod, read by snapshots and views.
        self.ranking: Ranking = NO_RANKING
        # The loop's last backfill pass: the plan behind every expected start, kept
        # whole so ``corral why`` explains the very plan squeue --start shows.
        self.backfill_pass: tuple[Snapshot, Plan, BackfillParams] | None = None
        self.apply_config(conf)

    # ------------------------------------------------------------ configuration

    def apply_config(self, conf: SlurmConfig) -> None:
        """Adopt a (re)loaded slurm.conf; nodes keep their runtime state (and the
        features an administrator gave them: ``controller/nodefeatures.py``)."""
        conf = nodefeatures.applied(conf, self.nodes)
        self.local_licenses = conf.licenses  # slurm.conf's, before the remote ones join
        conf = replace(conf, licenses=remotelicenses.merged(conf.licenses, self._remote()))
        self.conf = self.durable.conf = conf
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
                elif state == "CLOUD":  # powered down until a job needs it (powersave.py)
                    current = replace(current, state="UP", power="powered_down", reason="")
            nodes[node.name] = current
        self.nodes = nodes
        self.partition_state = {
            p.name: self.partition_state.get(p.name, p.state) for p in conf.partitions
        }
        self.holdings = Holdings(nodes)
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
        self._pending = {i: None for i, j in sorted(self.jobs.items()) if _schedulable(j)}
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
                self._adopt_remote_licenses()
        if RESERVATIONS_KEY in loaded.meta:
            self.reservations = ReservationBook.from_json(loaded.meta[RESERVATIONS_KEY])
        if CRONTABS_KEY in loaded.meta:
            self.crontabs = CronBook.from_json(loaded.meta[CRONTABS_KEY])
        if TRIGGERS_KEY in loaded.meta:
            self.triggers = TriggerBook.from_json(loaded.meta[TRIGGERS_KEY])
        self.durable.restore(loaded)
        self.het_leaders = {j.job_id for j in self.jobs.values() if j.het_job_id == j.job_id}
        if PARTITION_STATE_KEY in loaded.meta:
            self.partition_state = dict(json.loads(loaded.meta[PARTITION_STATE_KEY]))
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
        if any(node.active_features is not None for node in self.nodes.values()):
            self.apply_config(self.conf)  # the features an administrator set
        self.apply_config(self.conf)
        log.info("recovered %d jobs, next job id %d", len(self.jobs), self.next_job_id)

    # ------------------------------------------------------------ changes, made durable

    def _touch_job(self, job: Job) -> None:
        if job.steps and job.state.finished and any(s.running for s in job.steps):
            job = replace(job, steps=steps.ended_with_job(job, job.end_time or int(time.time())))
        elif job.state is JobState.PENDING and (
            job.steps or job.signal_sent or job.preempt_time or job.mail_sent
        ):
            # requeued: a new run, not preempted, with no checkpoint yet
            job = replace(
                job,
                steps=(),
                signal_sent=False,
                mail_sent="",
                preempt_time=0,
                preempt_requeue=False,
                checkpointed=0,
            )
        self.durable.job(self.jobs.get(job.job_id), job)
        self.jobs[job.job_id] = job
        if _schedulable(job):
            self._pending[job.job_id] = None
        else:
            self._pending.pop(job.job_id, None)
        if job.state.finished and not holds_nodes(job):
            self._ended[job.job_id] = job.end_time
        else:
            self._ended.pop(job.job_id, None)

    def set_associations(self, assocs: AssocSet) -> None:
        """dbd's newest associations, users and QOS (kept for restarts and dbd outages)."""
        self.associations = self.priorities.associations = assocs
        self.priorities.last_calc = 0  # new shares: recompute at the next cycle
        self.durable.keep(ASSOCIATIONS_KEY, assocs.to_json())
        self._adopt_remote_licenses()

    def _remote(self) -> Mapping[str, int]:
        return self.associations.remote_licenses if self.associations is not None else {}

    def _adopt_remote_licenses(self) -> None:
        """Merge dbd's newest remote licenses into the configuration's licenses
        (``controller.remotelicenses``): they take effect without a restart."""
        licenses = remotelicenses.merged(self.local_licenses, self._remote())
        if licenses != self.conf.licenses:
            self.conf = self.durable.conf = replace(self.conf, licenses=licenses)
            self.capacity = Capacity(self.conf)

    def _touch_node(self, node: NodeRuntime) -> None:
        cpus = self.conf.node(node.name).cpus if node.name in self.capacity.nodes else 0
        self.durable.node(self.nodes.get(node.name), node, cpus)
        self.triggers.note_node(self.nodes.get(node.name), node)
        self.nodes[node.name] = node

    def keep_triggers(self) -> None:
        """Journal the triggers as they are now (set, cleared, pulled or fired)."""
        self.durable.keep(TRIGGERS_KEY, self.triggers.to_json())

    async def flush(self, *, inline: bool = False) -> None:
        """Return once every change made before the call is on disk (group commit:
        ``Durability.flush``), and hand the effects of those changes to the dispatcher;
        every acknowledgement waits for it."""
        await self.durable.flush(inline=inline)

    def dispatch_to(self, dispatch: Callable[[Sequence[Effect]], None]) -> None:
        """Who tells the agents what the store's changes cause (``AgentLink.dispatch``)."""
        self.durable.dispatch = dispatch

    def emit(self, *queued: Effect) -> None:
        """Messages that follow no state change (``scancel --signal``, a reservation's
        new end), sent after the next flush with those that do."""
        self.durable.emit(queued)

    def payload(self, job: Job) -> Payload | None:
        return self.durable.payload(job.array_job_id or job.job_id)

    # ------------------------------------------------------------ jobs

    def submit(self, spec: JobSpec, who: Principal, now: int, moved_from: str = "") -> Admitted:
        """``spec`` admitted and kept; ``moved_from``: the "cluster:job_id" another
        cluster moved it from (it never moves again), else it may move if its -M list
        named several clusters (controller/movespec.py)."""
        if len(self.jobs) >= self.conf.max_job_count:
            # Slurm's answer at MaxJobCount: EAGAIN, which sbatch retries.
            raise SlurmError(errors.EAGAIN)
        admitted = self._admit(spec, who, now, self.next_job_id)
        job, payload = admitted.job, admitted.payload
        if moved_from:
            job = replace(job, moved_from=moved_from)
        elif movespec.movable(spec):
            job = replace(job, clusters=spec.clusters)
            payload = replace(payload, spec=movespec.kept(spec))
        return self._record(replace(admitted, job=job, payload=payload))

    def moved_here(self, key: str, uid: int) -> Job | None:
        """The job another cluster already moved here under ``key`` for ``uid``: a
        retried move gets it again instead of a second copy."""
        return next((j for j in self.jobs.values() if j.moved_from == key and j.uid == uid), None)

    def send_to(self, job_id: int, cluster: str) -> Job:
        """``job_id`` is being sent to ``cluster`` (journaled before it is sent, so a
        restart sends it again rather than lose it); meanwhile it never starts here."""
        job = replace(self.jobs[job_id], moved_to=cluster)
        self._touch_job(job)
        return job

    def keep_here(self, job_id: int) -> Job:
        """A move the other cluster refused: ``job_id`` waits here again, for good."""
        job = replace(self.jobs[job_id], moved_to="", clusters="")
        self._touch_job(job)
        return job

    def submit_het(self, specs: Sequence[JobSpec], who: Principal, now: int) -> list[Admitted]:
        """A heterogeneous job: each spec a component of consecutive ids, the first the
        leader. Every component is checked before any is recorded, so a refused one
        (Slurm's words for it) leaves nothing behind."""
        if len(self.jobs) + len(specs) > self.conf.max_job_count:
            raise SlurmError(errors.EAGAIN)
        first = self.next_job_id
        admitted = [
            self._admit(spec, who, now, first + offset)
            for offset, spec in enumerate(hetjobs.component_specs(specs))
        ]
        self.het_leaders.add(first)
        return [self._record(hetjobs.component(a, first, len(specs))) for a in admitted]

    def _admit(self, spec: JobSpec, who: Principal, now: int, job_id: int) -> Admitted:
        """``spec`` checked and made the job of id ``job_id``; nothing recorded yet."""
        delay = int(self.conf.scheduler_param("requeue_delay") or 121)
        admitted = admit(
            spec, who, self.conf, self.partition_state, job_id, now, delay, self.capacity
        )
        job = admitted.job
        for option in job.gres_alternatives or (job.gres,):  # each alternative may start
            binding.check_fencing(self.conf, self.capacity, self.nodes, replace(job, gres=option))
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
        job = expansion.admitted(self, job, now)  # --dependency=expand:N
        job = replace(job, calc_priority=self.priorities.initial(job, now))
        return replace(admitted, job=job)

    def _record(self, admitted: Admitted) -> Admitted:
        """Keep an admitted job (and its payload), and move the next job id past it."""
        job = admitted.job
        self._touch_job(job)
        self.durable.add_payload(job.job_id, admitted.payload)
        self._advance_job_id(job.job_id + 1)
        self.counters["submitted"] += admitted.tasks
        self.last_update = job.submit_time
        return admitted

    def _advance_job_id(self, next_id: int) -> None:
        self.next_job_id = next_id
        self.durable.keep("next_job_id", str(next_id))

    def split_task(self, array: Job, index: int) -> Job:
        """Give one pending task of ``array`` its own record, as Slurm does.

        An array is one record until its tasks start (or are held, cancelled or
        updated one by one); each task split off gets the next job id, and the
        last one takes over the array's own record and id.
        """
        rest = arrayspec.without(array.array_pending, index)
        if rest:
            task = replace(
                array,
                job_id=self.next_job_id,
                array_task_id=index,
                array_pending="",
                calc_priority=self.ranking.computed(array),  # its ranked priority goes with it
            )
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
        self.durable.emit(effects.follow(old, new, event))
        if new.mail_type:
            self._mail(old, new, getattr(event, "now", 0) or int(time.time()))
        if isinstance(event, jobstate.Resize):  # to no nodes too: NumNodes=0 ends nothing
            self._resized(old, new)
        elif holds_nodes(old) and not holds_nodes(new):
            self.configuring.pop(job_id, None)
            if self.conf.hooks.epilog or self.conf.hooks.prolog:  # the Prolog's: forgotten
                self.durable.emit((effects.NodeEpilog(old, new.exit_status),))
            if self.conf.hooks.epilog_slurmctld:
                self.durable.emit((effects.Ended(old, new.exit_status),))
            self._account(old, -1)
            self.priorities.ended(old, new.end_time or getattr(event, "now", 0))
        elif holds_nodes(new) and not holds_nodes(old):
            self._account(new, +1)
            self._started(new)
        elif new.cpus_released != old.cpus_released:  # suspended, or resumed
            shares = bool(self.capacity.sharing(new))
            self.holdings.change_cpus(new, -1 if new.cpus_released else +1, shares)
        if new.restarts > old.restarts and old.start_time and not old.state.finished:
            # A requeue ended a run (a finished one has its final record already).
            self.durable.closed_record(_closed_run(old, new, event))
        self._touch_job(new)
        if new.state is not old.state:
            self._count(old, new)
        self.last_update = max(self.last_update, getattr(event, "now", 0))
        log.debug("job_id=%d %s -> %s", job_id, old.state.name, new.state.name)
        if new.cron_spec and new.state.finished and not holds_nodes(new):
            crontabs.recur(self, new, getattr(event, "now", 0) or int(time.time()))
        return new

    def _mail(self, old: Job, new: Job, now: int) -> None:
        """The mail ``old`` becoming ``new`` calls for (controller/mail.py)."""
        tasks: Iterable[Job] = ()
        if new.array_task_id is not None:
            array = new.array_job_id
            tasks = [job for job in self.jobs.values() if job.array_job_id == array]
        sent = mail.for_transition(old, new, now, tasks)
        if sent:
            self.durable.emit((effects.Mail(tuple(sent)),))

    def mail_due(self, now: int) -> bool:
        """Send the time-limit warnings (TIME_LIMIT_50/80/90) now due; whether any was."""
        due = False
        for job in list(self.jobs.values()):
            if not job.mail_type or job.state is not JobState.RUNNING:
                continue
            kinds = mail.time_limit_due(job, now)
            if kinds:
                sent = mailtype.parse(",".join(filter(None, (job.mail_sent, *kinds))))
                self._touch_job(replace(job, mail_sent=sent))
                notices = tuple(mail.Notice(job, kind, now) for kind in kinds)
                self.durable.emit((effects.Mail(notices),))
                due = True
        return due

    def _started(self, job: Job) -> None:
        """The site programs a job's start calls for; an allocation waits for them from
        now (``configuring``), not from when their effects go out."""
        hooks, flags = self.conf.hooks, self.conf.prolog_flags
        waits = set()
        if job.interactive and hooks.prolog_slurmctld:
            waits.add(PROLOG_SLURMCTLD)
            self.durable.emit((effects.Granted(job),))
        if hooks.prolog and prolog_at_allocation(flags):
            self.durable.emit((effects.NodeProlog(job),))
            if job.interactive and "nohold" not in flags:
                waits.update(job.nodes)
        if waits:
            self.configuring[job.job_id] = waits

    def _resized(self, old: Job, new: Job) -> None:
        """A running job's nodes changed: the ledger moves with it; accounting closes
        the record of its old size (``RESIZING``, ended now) beside its new one, which
        dbd files under the second of the resize (a size held for less than a second,
        whose record would share that second, is not kept apart); the Prolog runs on
        the nodes it got (PrologFlags=Alloc) and the Epilog on those it gave back, as
        at a start and an end."""
        self._account(old, -1)
        self._account(new, +1)
        if new.resize_time != old.run_key:
            closed = replace(old, flags=old.flags | {jobstate.RESIZING}, end_time=new.resize_time)
            self.durable.closed_record(closed)
        added = tuple(n for n in new.nodes if n not in old.nodes)
        left = tuple(n for n in old.nodes if n not in new.nodes)
        hooks = self.conf.hooks
        if added and hooks.prolog and prolog_at_allocation(self.conf.prolog_flags):
            self.durable.emit((effects.NodeProlog(new, added),))
        if left and (hooks.epilog or hooks.prolog):
            self.durable.emit((effects.NodeEpilog(old, 0, left),))

    def configured(self, job_id: int, what: str) -> None:
        """``what`` (PROLOG_SLURMCTLD or a node's Prolog) is over for the allocation."""
        waits = self.configuring.get(job_id)
        if waits is not None:
            waits.discard(what)
            if not waits:
                del self.configuring[job_id]

    def _count(self, old: Job, new: Job) -> None:
        if new.state is JobState.RUNNING and old.state is JobState.PENDING:
            self.counters["started"] += 1
        elif new.state is JobState.COMPLETED:
            self.counters["completed"] += 1
        elif new.state is JobState.CANCELLED:
            self.counters["canceled"] += 1
        elif new.state.finished:
            self.counters["failed"] += 1

    def update(self, job: Job) -> None:
        """Store a job whose user-updatable attributes changed (never its state)."""
        old = self.jobs[job.job_id]
        assert job.state is old.state
        self._touch_job(job)
        if job.time_limit != old.time_limit and job.state in (JobState.RUNNING, JobState.SUSPENDED):
            self.durable.emit((NewLimit(job),))

    def _account(self, job: Job, sign: int) -> None:
        """Add (``sign`` +1) or remove (-1) what ``job`` holds on its nodes."""
        gres = [self.capacity.gres_held(job, i) for i in range(len(job.nodes))]
        self.holdings.change(job, sign, bool(self.capacity.sharing(job)), gres)

    def used(self, name: str) -> tuple[int, int]:
        """(CPUs held by jobs that do not share them, MiB held by all jobs) on ``name``."""
        return self.holdings.used(name)

    def allocated_cpus(self, name: str) -> int:
        """CPUs in use on ``name`` as Slurm counts them: held ones plus those jobs share."""
        return self.holdings.allocated_cpus(name, self.conf.node(name).cpus)

    def jobs_on(self, name: str) -> list[Job]:
        """The jobs on node ``name``, by id, from the holdings' index: ``sinfo`` over
        10,000 nodes asks this of each, and a scan of 100,000 jobs each time took minutes."""
        jobs = (self.jobs.get(i) for i in self.holdings.job_ids(name))
        return [j for j in jobs if j is not None and holds_nodes(j)]

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
        if gone:
            # An array's tasks share one payload: it goes with the array's last task.
            still = {j.array_job_id for j in self.jobs.values() if j.array_job_id in keys}
            self.durable.forget_jobs(gone, keys - still)
        return gone

    # ------------------------------------------------------------ scheduling

    def recalculate_priorities(self, now: int) -> None:
        """Every PriorityCalcPeriod, and when the number of usable nodes (the job-size
        factor's node count) changed since: advance fair-share usage, re-rank pending
        jobs. A controller's first calculation often comes before its nodes register;
        jobs submitted until the next would otherwise count against none."""
        keeper = self.priorities
        active = sum(1 for n in self.nodes.values() if self.node_usable(n))
        if not keeper.due(now) and active == keeper.cluster.nodes:
            return
        running = [j for j in self.jobs.values() if holds_nodes(j)]
        pending = [self.jobs[i] for i in self._pending]
        # Derived from usage (which is journaled) at every calculation: not journaled.
        self.ranking = keeper.recalculate(now, running, pending, active)
        self.durable.keep(USAGE_KEY, keeper.saved())

    def node_usable(self, node: NodeRuntime) -> bool:
        return drain.usable(node)

    # ------------------------------------------------------------ steps

    def create_step(
        self, job_id: int, req: StepRequest, name: str, time_limit: int, line: str, who: Principal
    ) -> tuple[Job, Step]:
        """A new step of a running job (SlurmError as srun reports it)."""
        job = self._step_job(job_id, who)
        now = int(time.time())
        step = steps.new_step(
            job, req, name, now, time_limit, line, self._gpu_links, self._shape, self.gpu_near
        )
        job = replace(job, steps=(*job.steps, step))
        self._touch_job(job)
        return job, step

    def create_het_step(self, parts: Sequence[StepPart], who: Principal) -> list[tuple[Job, Step]]:
        """One step spanning heterogeneous job components, all or none: every part is
        laid out before any is recorded, and all take the same step id."""
        jobs = [self._step_job(part.job_id, who) for part in parts]
        hetsteps.check_components(jobs)
        now = int(time.time())
        made = [
            steps.new_step(job, p.request, p.name, now, p.time_limit, p.line, self._gpu_links,
                           self._shape, self.gpu_near)
            for job, p in zip(jobs, parts, strict=True)
        ]  # fmt: skip
        step_id = max(steps.next_step_id(job) for job in jobs)
        het_jobs = tuple(job.job_id for job in jobs)
        out, first_node, first_task = [], 0, 0
        for job, step in zip(jobs, made, strict=True):
            offset = (first_node, first_task)
            first_node, first_task = first_node + len(step.nodes), first_task + step.ntasks
            step = replace(step, step_id=step_id, het_jobs=het_jobs, het_offset=offset)
            job = replace(job, steps=(*job.steps, step))
            self._touch_job(job)
            out.append((job, step))
        return out

    def create_mpmd_step(
        self, parts: Sequence[StepPart], who: Principal
    ) -> tuple[Job, Step, list[Step]]:
        """``srun a : b`` in an ordinary job (``controller/mpmdsteps.py``): the parts laid
        out on their own nodes, each recorded as a part of one step (``123.1+N``); the
        whole step and the parts."""
        job = self._step_job(parts[0].job_id, who)
        now = int(time.time())
        made = [
            steps.new_step(job, p.request, p.name, now, p.time_limit, p.line, self._gpu_links,
                           self._shape, self.gpu_near)
            for p in parts
        ]  # fmt: skip
        whole = mpmdsteps.joined(job, made, steps.next_step_id(job))
        recorded = mpmdsteps.recorded(whole, made)
        job = replace(job, steps=(*job.steps, *recorded))
        self._touch_job(job)
        return job, whole, recorded

    def _step_job(self, job_id: int, who: Principal) -> Job:
        """The running job ``who`` may add a step to (SlurmError as srun reports it)."""
        job = self.jobs.get(job_id)
        if job is None:
            raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
        if job.uid != who.uid and not who.is_admin:
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        if job.state.finished or COMPLETING in job.flags:
            raise SlurmError(errors.ESLURM_ALREADY_DONE)
        if job.state is JobState.SUSPENDED:  # Slurm's answer: no step while suspended
            raise SlurmError(errors.ESLURM_DISABLED)
        if job.state is not JobState.RUNNING:
            raise SlurmError(errors.ESLURM_JOB_PENDING)
        return job

    def _shape(self, name: str) -> Shape:
        """Node ``name``'s cores per socket and threads per core, as slurm.conf says."""
        node = self.conf.node(name)
        return Shape(node.cores_per_socket, node.threads_per_core)

    def _gpu_links(self, name: str) -> dict[int, dict[int, int]]:
        """Node ``name``'s NVLink counts between GPUs, as its starts see them: gres.conf's
        ``Links=``, else what its agent probed (``snapshots.gpu_links``)."""
        return link_map(snapshots.gpu_links(self.capacity, name, self.nodes.get(name)))

    def step_node_done(
        self,
        job_id: int,
        step_id: int,
        node: str,
        statuses: list[int],
        usage: tuple[int, int, int] = (0, 0, 0),
        end: int = 0,
        sum_rss: int = 0,
        oom_kills: int = 0,
    ) -> None:
        """A node's part of a step ended (its tasks' wait statuses, -1: never ran;
        ``oom_kills``: its processes the OOM killer killed there)."""
        job = self.jobs.get(job_id)
        if job is None:
            return
        new = tuple(
            steps.node_done(s, node, statuses, usage, end or int(time.time()), sum_rss, oom_kills)
            if s.step_id == step_id and node in s.nodes  # a step's parts share its id
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
            self.durable.emit((effects.Signal(job, job.signal_num, reason="signal"),))
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
            and now >= (j.end_time or j.start_time + j.time_limit * 60)
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
            licenses=dict(self.conf.licenses),
        )

    def change_reservation(self, action: str, settings: dict[str, str], now: int) -> Reservation:
        """scontrol's create, update or delete reservation (SlurmError if refused)."""
        book, cluster = self.reservations, self.reservation_cluster()
        if action == "create":
            resv = book.create(settings, cluster, now)
        elif action == "update":
            resv = book.update(settings, cluster, now)
            self.durable.emit(  # running jobs in it now end with its new end
                NewLimit(j)
                for j in self.jobs.values()
                if j.reservation == resv.name and j.state is JobState.RUNNING
            )
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
        self.durable.keep(RESERVATIONS_KEY, self.reservations.to_json())
        self.durable.reservation(resv, deleted=deleted, now=now)

    def time_limit_at_launch(self, job: Job) -> int:
        """The limit a node agent enforces: the job's, cut at its reservation's end."""
        resv = self.reservations.by_name.get(job.reservation) if job.reservation else None
        if resv is None:
            return job.time_limit
        left = max(-(-(resv.end - job.start_time) // 60), 1)
        return left if job.time_limit < 0 else min(job.time_limit, left)

    def snapshot(self) -> Snapshot:
        """An immutable picture of the cluster for ``core.schedule`` (``snapshots.build``)."""
        ledger = snapshots.Ledger(
            self.nodes,
            self.partition_state,
            self.jobs,
            self._pending,
            self.holdings,
            self.associations,
            self.enforce,
            self.priorities.usage,
            self.reservations,
            self.ranking,
        )
        return snapshots.build(ledger, self.conf, self.capacity, self._node_views, self._job_views)

    def commit(self, plan: Plan) -> list[Job]:
        """Apply a plan's starts that still hold; return the jobs started."""
        started = []
        for start in hetjobs.whole(plan.starts, self.jobs, self._still_holds):
            job = self.jobs.get(start.job_id)
            if job is None or job.moved_to or not self._still_holds(start):
                continue  # gone, being sent to another cluster, or its nodes taken
            if job.array_pending:
                task = arrayspec.first(job.array_pending) if start.task is None else start.task
                if not arrayspec.contains(job.array_pending, task):
                    continue
                job = self.split_task(job, task)
            event = jobstate.Start(
                plan.now,
                start.partition,
                start.nodes,
                start.cpus,
                start.memory,
                self.ranking.computed(job),
                start.gres,
                start.gpus,
                start.cpu_ids,
                start.flavor.gres if start.flavor else "",
                flavornote.describe(start.flavor) if start.flavor else "",
                start.used,
            )
            started.append(self.post(job.job_id, event))
        for job_id, why in plan.ended.items():
            job = self.jobs.get(job_id)
            if job is not None and job.state is JobState.PENDING:
                self.post(job_id, jobstate.GiveUp(plan.now, why))
                log.info("job_id=%d ended pending: %s", job_id, why.value)
        for job_id, since in plan.switch_waits.items():
            job = self.jobs.get(job_id)
            if job is not None and job.state is JobState.PENDING and not job.switch_wait_start:
                self._touch_job(replace(job, switch_wait_start=since))
        # Reasons and expected starts are derived each cycle; they are not journaled.
        for job_id, reason in plan.reasons.items():
            job = self.jobs.get(job_id)
            if job is not None and job.state is JobState.PENDING and job.reason is not reason:
                self.jobs[job_id] = replace(job, reason=reason)
        flavornote.note_waiting(self.jobs, plan, self._pending)
        if plan.backfilled:
            for job_id in self._pending:
                job = self.jobs[job_id]
                exp = plan.expected.get(job_id)
                when, nodes = (exp.start_time, exp.nodes) if exp else (0, ())
                if (job.expected_start, job.expected_nodes) != (when, nodes):
                    self.jobs[job_id] = replace(job, expected_start=when, expected_nodes=nodes)
        return started

    def _still_holds(self, start: Start) -> bool:
        """Whether a plan's start may still be made: its job waits, unheld, and its
        nodes still have what it takes (the plan was made on a snapshot)."""
        job = self.jobs.get(start.job_id)
        if job is None or job.state is not JobState.PENDING or job.held:
            return False
        return all(self._fits(start, i) for i in range(len(start.nodes)))

    def shares(self, job: Job, index: int) -> Shares:
        """``job``'s GPU shares on ``job.nodes[index]``: what its launch there grants,
        and what binds it to them (``environment()``; none: {})."""
        return binding.shares(self.capacity, job, index)

    def gpus_held(self, name: str) -> int:
        """How many of ``name``'s GPUs jobs hold whole."""
        return len(self.holdings.gpus(name))

    def gpu_numbering(self, name: str) -> list[tuple[str, int]]:
        """A node's GPUs as (type, index) (``corral.gpunumbers``)."""
        return self.capacity.gpus(name)

    def gpu_near(self, name: str) -> dict[int, tuple[int, ...]]:
        """A node's GPUs with known near CPUs -> those CPUs: gres.conf's Cores=, else
        what its agent probed (as the snapshot's devices have them)."""
        return snapshots.gpu_near(self.capacity, name, self.nodes.get(name))

    def start_fits(self, start: Start) -> bool:
        """Whether the ledger still holds every node of ``start`` (an elastic job's
        growth is re-checked as a start is)."""
        return all(self._fits(start, i) for i in range(len(start.nodes)))

    def _fits(self, start: Start, index: int) -> bool:
        """Whether the ledger still holds ``start`` on its ``index``-th node: the
        node is up, and on the view a snapshot would show now (starts already
        committed in this plan included) ``nodefree.fits`` says its CPUs, memory
        and GRES are free and ``devices.still_free`` its GPUs and CPU ids."""
        name = start.nodes[index]
        node = self.nodes.get(name)
        if node is None or not self.node_usable(node):
            return False
        view = snapshots.node_view(
            self.conf.node(name),
            node,
            self.holdings,
            self.capacity,
            gpushare.fenced_only(self.conf),
        )
        gres = start.gres[index] if start.gres else ()
        return nodefree.fits(
            view, start.cpus[index], start.memory[index], gres, start.share, start.partition
        ) and devices.still_free(view, start, index)

    def cpus_free_for(self, job: Job) -> bool:
        """Whether the CPUs a suspended ``job`` lent are free again on each of its
        nodes (its count, and its CPU ids): resuming it must not oversubscribe them."""
        share = self.capacity.sharing(job)
        for i, name in enumerate(job.nodes):
            view = snapshots.node_view(
                self.conf.node(name),
                self.nodes[name],
                self.holdings,
                self.capacity,
                gpushare.fenced_only(self.conf),
            )
            if not nodefree.fits(view, job.cpus[i], 0, (), share, job.partition):
                return False
            if job.cpu_ids and job.cpu_ids[i] and not devices.ids_free(view, job.cpu_ids[i], share):
                return False
        return True

    # ------------------------------------------------------------ nodes

    def node_registered(self, reg: Registration, monotonic: float, now: int) -> None:
        """An agent attached for this node (``drain.registered``: up, or drained if it
        has less than its configuration promises)."""
        node, changed, drained = drain.registered(
            self.nodes[reg.name],
            self.conf.node(reg.name),
            reg,
            self._return_to_service(),
            monotonic,
            now,
        )
        if drained:
            log.warning("node %s drained: %s", reg.name, drained)
        if changed:
            self._touch_node(node)
        else:
            self.nodes[reg.name] = node
        self.last_update = now

    def _return_to_service(self) -> int:
        return int(dict(self.conf.settings).get("ReturnToService", "0") or 0)

    def node_seen(self, name: str, monotonic: float) -> None:
        """The node's agent was heard; a node DOWN for its silence is back (``drain``)."""
        node = self.nodes.get(name)
        if node is None:
            return
        node = replace(node, responding=True, last_seen=monotonic)
        if node.state == "DOWN" and drain.back_from_silence(node, self._return_to_service()):
            log.info("node %s responding again: returned to service", name)
            self._touch_node(
                replace(node, state="UP", reason="" if not node.drain else node.reason)
            )
        else:
            self.nodes[name] = node

    def node_lost(self, name: str, heard: float | None = None) -> None:
        """The agent's stream closed: not responding, but not DOWN yet (``heard``: when
        that stream last spoke, monotonic, which SlurmdTimeout counts from)."""
        node = self.nodes.get(name)
        if node is not None:
            last = node.last_seen if heard is None else max(node.last_seen, heard)
            self.nodes[name] = replace(node, responding=False, last_seen=last)

    def fail_jobs_on(self, name: str, now: int) -> list[tuple[Job, bool]]:
        """End or requeue the jobs on a node that failed; (job before, requeued) each."""
        failed = []
        for job in self.jobs_on(name):
            requeue = job.requeue and job.state in (JobState.RUNNING, JobState.SUSPENDED)
            self.post(job.job_id, jobstate.NodeFail(now, requeue))
            failed.append((job, requeue))
        return failed

    def set_node_down(self, name: str, reason: str, user: str, uid: int, now: int) -> None:
        self._touch_node(drain.down(self.nodes[name], reason, user, uid, now))
        self.last_update = now

    def drain_failed(self, name: str, reason: str, now: int) -> bool:
        """Drain ``name`` because a site program failed there (``drain.failed_check``);
        True if that changed it."""
        node = self.nodes.get(name)
        if node is None or node.drain:
            return False
        log.warning("node %s drained: %s", name, reason)
        self._touch_node(drain.failed_check(node, reason, self.conf.slurm_user, now))
        self.last_update = now
        return True

    def set_partition_state(self, name: str, state: str) -> None:
        """An administrator's State for partition ``name``, kept across restarts (and
        reconfigures, as long as slurm.conf still has the partition)."""
        self.partition_state[name] = state
        self.durable.keep(PARTITION_STATE_KEY, json.dumps(self.partition_state, sort_keys=True))
        self.last_update = max(self.last_update, int(time.time()))

    def set_node_features(
        self, names: Iterable[str], available: str | None, active: str | None, now: int
    ) -> None:
        """``scontrol update NodeName= Features=``: every node checked before any
        changes; the configuration then carries the new active features."""
        changed = [
            nodefeatures.update(self.nodes[name], self.conf.node(name), available, active)
            for name in names
        ]
        for node in changed:
            self._touch_node(node)
        self.apply_config(self.conf)
        self.last_update = now

    def change_node(self, node: NodeRuntime, now: int) -> None:
        """Keep a node's new runtime state (journaled): a reboot's step
        (``controller/reboots.py``) decided it."""
        self._touch_node(node)
        self.last_update = now

    def set_node_admin_state(
        self, names: Iterable[str], state: str, reason: str, who: Principal, now: int
    ) -> None:
        for name in names:
            self._touch_node(drain.admin_state(self.nodes[name], state, reason, who, now))
            if state == "FAIL":
                self.triggers.note_fail(name)
        self.last_update = now


def _closed_run(old: Job, new: Job, event: Event) -> Job:
    """The last accounting record of the run a requeue ended, as slurmdbd keeps it
    beside the job's next run (``sacct -D``): REQUEUED, or PREEMPTED when a
    preemption requeued it, or NODE_FAIL when its node failed; ended now."""
    now: int = getattr(event, "now", 0)
    flags: frozenset[str] = frozenset()
    if isinstance(event, jobstate.NodeFail) and jobstate.REQUEUED not in old.flags:
        state = JobState.NODE_FAIL
    elif old.preempt_time:
        state = JobState.PREEMPTED
    else:
        state, flags = old.state, frozenset({jobstate.REQUEUED})
    return replace(old, state=state, flags=flags, end_time=now, exit_status=new.exit_status)
