"""The job state machine: the only code that changes a job's state.

::

                 Start                 Finish(exit 0)
    PENDING ──────────────▶ RUNNING ─────────────────▶ COMPLETED
      │  ▲                    │  │    Finish(exit≠0)  ─▶ FAILED
      │  │ Requeue/           │  │    Finish(timeout) ─▶ TIMEOUT
      │  │ NodeFail(requeue)  │  └── NodeFail ────────▶ NODE_FAIL
      │  └────────────────────┤
      │ Cancel                │ Cancel: CANCELLED+COMPLETING ── Finish ──▶ CANCELLED
      ▼                       │ Requeue: RUNNING+REQUEUED+COMPLETING ── Finish ──▶ PENDING
    CANCELLED                 ▼
                      (COMPLETING holds the nodes until the node agent reports the
                       processes gone; the base state is already final)

    RUNNING ── Suspend ──▶ SUSPENDED ── Resume ──▶ RUNNING   (scontrol suspend/resume,
                                                            PreemptMode=SUSPEND, GANG)
    RUNNING ── Resize ──▶ RUNNING   (its nodes change; the first, its batch host, stays:
                                     an elastic job grows or shrinks, scontrol update
                                     NumNodes shrinks a job; or none stays: an expansion
                                     job gives all to the job it expands, NumNodes=0)
    SUSPENDED takes Cancel, Preempt, Requeue (the job comes back held if an
    operator suspended it) and NodeFail as RUNNING does; its time there is not run time:
    Resume moves ``end_time`` on by it. A job the gang scheduler or a
    preemption suspended takes Suspend from another of them (not from an
    operator) and stays SUSPENDED, held now by that one: a preemptor takes
    a gang-suspended job's CPUs, and a victim whose CPUs are free again goes
    back to the gang scheduler's turns.

A suspended job's CPUs are lent to other jobs (``cpus_released``, as Slurm's
cons_tres does for a suspension) until it leaves its nodes or is resumed; its
memory and generic resources stay its own. The gang scheduler's suspensions
lend nothing (``Suspend.lend`` false): the jobs that time-slice take turns on
CPUs they all keep, as Slurm's gang rows do.

    PENDING ── Revoke ──▶ CANCELLED+REVOKED   (never started here; it moved to another
                                             cluster: controller/moves.py)

Finished jobs (COMPLETED FAILED TIMEOUT CANCELLED NODE_FAIL) may be requeued
back to PENDING with ``Requeue``, but a revoked one, whose run is another
cluster's. Hold and Release only apply to PENDING jobs.

``apply(job, event)`` is pure: it returns the new ``Job`` or raises
``InvalidTransition``. ``JobStore.post`` is its only caller; side effects
(launching, signalling, journaling) follow from the returned value.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from controller.model import Job


class JobState(enum.Enum):
    """Slurm's base job states; the value is the compact code squeue prints."""

    PENDING = "PD"
    RUNNING = "R"
    SUSPENDED = "S"
    COMPLETED = "CD"
    CANCELLED = "CA"
    FAILED = "F"
    TIMEOUT = "TO"
    NODE_FAIL = "NF"
    PREEMPTED = "PR"
    BOOT_FAIL = "BF"
    DEADLINE = "DL"
    OUT_OF_MEMORY = "OOM"

    @property
    def finished(self) -> bool:
        return self not in (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED)


# Flags that ride on the base state, as in Slurm.
COMPLETING = "COMPLETING"
REQUEUED = "REQUEUED"
# Only on the accounting record of a size a job left (Slurm's JOB_RESIZING).
RESIZING = "RESIZING"
# A pending job that moved to another cluster (Slurm's JOB_REVOKED, which its
# federations give a sibling another cluster started): CANCELLED+REVOKED, for good.
REVOKED = "REVOKED"


class Reason(enum.Enum):
    """Why a job is pending or why it ended, in Slurm's spelling."""

    NONE = "None"
    PRIORITY = "Priority"
    RESOURCES = "Resources"
    DEPENDENCY = "Dependency"
    DEADLINE = "DeadLine"
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"
    BEGIN_TIME = "BeginTime"
    JOB_HELD_USER = "JobHeldUser"
    JOB_HELD_ADMIN = "JobHeldAdmin"
    # Held after its Prolog failed (squeue's words; scontrol joins them with "_").
    LAUNCH_FAILED_REQUEUED_HELD = "launch failed requeued held"
    PARTITION_TIME_LIMIT = "PartitionTimeLimit"
    PARTITION_NODE_LIMIT = "PartitionNodeLimit"
    PARTITION_DOWN = "PartitionDown"
    PARTITION_INACTIVE = "PartitionInactive"
    REQ_NODE_NOT_AVAIL = "ReqNodeNotAvail"
    NODE_DOWN = "NodeDown"
    BAD_CONSTRAINTS = "BadConstraints"
    JOB_ARRAY_TASK_LIMIT = "JobArrayTaskLimit"
    LICENSES = "Licenses"  # too few of a license it asks for are free (or planned free)
    RESERVATION = "Reservation"  # its reservation has not started yet
    RESERVATION_DELETED = "ReservationDeleted"
    # Team queues (queues.conf, controller/core/queueplan.py): what the quota refuses.
    QUEUE_LIMIT = "QueueLimit"  # a Limit of the job's queue or one above it
    QUEUE_BORROW_LIMIT = "QueueBorrowLimit"  # its queue may borrow no more
    QUEUE_GUARANTEE = "QueueGuarantee"  # not preemptible: runs only within the guarantee
    QUEUE_COHORT_FULL = "QueueCohortFull"  # nothing unused and lendable to borrow
    INVALID_QUEUE = "InvalidQueue"  # its queue takes no jobs
    # Accounting limits (AccountingStorageEnforce=limits): controller/associations.py.
    ASSOC_MAX_JOBS = "AssocMaxJobsLimit"
    ASSOC_GRP_JOBS = "AssocGrpJobsLimit"
    ASSOC_GRP_WALL = "AssocGrpWallLimit"
    ASSOC_GRP_CPU_MINUTES = "AssocGrpCPUMinutesLimit"
    ASSOC_GRP_BILLING_MINUTES = "AssocGrpBillingMinutes"
    ASSOC_GRP_MEM_MINUTES = "AssocGrpMemMinutes"
    ASSOC_GRP_NODE_MINUTES = "AssocGrpNodeMinutes"
    ASSOC_GRP_GRES_MINUTES = "AssocGrpGRESMinutes"
    ASSOC_MAX_WALL = "AssocMaxWallDurationPerJobLimit"
    ASSOC_GRP_CPU = "AssocGrpCpuLimit"
    ASSOC_GRP_MEM = "AssocGrpMemLimit"
    ASSOC_GRP_NODE = "AssocGrpNodeLimit"
    ASSOC_GRP_GRES = "AssocGrpGRES"
    ASSOC_GRP_BILLING = "AssocGrpBilling"
    ASSOC_MAX_CPU_PER_JOB = "AssocMaxCpuPerJobLimit"
    ASSOC_MAX_MEM_PER_JOB = "AssocMaxMemPerJob"
    ASSOC_MAX_NODE_PER_JOB = "AssocMaxNodePerJobLimit"
    ASSOC_MAX_GRES_PER_JOB = "AssocMaxGRESPerJob"
    ASSOC_MAX_BILLING_PER_JOB = "AssocMaxBillingPerJob"
    ASSOC_MAX_CPU_PER_NODE = "AssocMaxCpuPerNode"
    ASSOC_MAX_MEM_PER_NODE = "AssocMaxMemPerNode"
    ASSOC_MAX_GRES_PER_NODE = "AssocMaxGRESPerNode"
    ASSOC_MAX_BILLING_PER_NODE = "AssocMaxBillingPerNode"
    ASSOC_MAX_CPU_MINUTES_PER_JOB = "AssocMaxCpuMinutesPerJobLimit"
    ASSOC_MAX_MEM_MINUTES_PER_JOB = "AssocMaxMemMinutesPerJob"
    ASSOC_MAX_NODE_MINUTES_PER_JOB = "AssocMaxNodeMinutesPerJob"
    ASSOC_MAX_GRES_MINUTES_PER_JOB = "AssocMaxGRESMinutesPerJob"
    ASSOC_MAX_BILLING_MINUTES_PER_JOB = "AssocMaxBillingMinutesPerJob"
    # Limits on license TRES (AccountingStorageTRES=license/NAME), libslurm 22.05's words.
    ASSOC_GRP_LICENSE = "AssocGrpLicense"
    ASSOC_GRP_LICENSE_MINUTES = "AssocGrpLicenseMinutes"
    ASSOC_MAX_LICENSE_PER_JOB = "AssocMaxLicensePerJob"
    ASSOC_MAX_LICENSE_MINUTES_PER_JOB = "AssocMaxLicenseMinutesPerJob"
    # MaxTRESPerNode on a license: Slurm 22.05's words, measured (libslurm has no
    # per-node name for a license TRES and says "Unknown").
    ASSOC_MAX_UNKNOWN_PER_NODE = "AssocMaxUnknownPerNode"
    QOS_MAX_JOBS_PER_USER = "QOSMaxJobsPerUserLimit"
    QOS_MAX_JOBS_PER_ACCOUNT = "MaxJobsPerAccount"
    QOS_GRP_JOBS = "QOSGrpJobsLimit"
    QOS_GRP_WALL = "QOSGrpWallLimit"
    QOS_GRP_CPU_MINUTES = "QOSGrpCPUMinutesLimit"
    QOS_GRP_BILLING_MINUTES = "QOSGrpBillingMinutes"
    QOS_GRP_MEM_MINUTES = "QOSGrpMemoryMinutes"
    QOS_GRP_NODE_MINUTES = "QOSGrpNodeMinutes"
    QOS_GRP_GRES_MINUTES = "QOSGrpGRESMinutes"
    QOS_MAX_WALL = "QOSMaxWallDurationPerJobLimit"
    QOS_GRP_CPU = "QOSGrpCpuLimit"
    QOS_GRP_MEM = "QOSGrpMemLimit"
    QOS_GRP_NODE = "QOSGrpNodeLimit"
    QOS_GRP_GRES = "QOSGrpGRES"
    QOS_GRP_BILLING = "QOSGrpBilling"
    QOS_MAX_CPU_PER_JOB = "QOSMaxCpuPerJobLimit"
    QOS_MAX_MEM_PER_JOB = "QOSMaxMemoryPerJob"
    QOS_MAX_NODE_PER_JOB = "QOSMaxNodePerJobLimit"
    QOS_MAX_GRES_PER_JOB = "QOSMaxGRESPerJob"
    QOS_MAX_BILLING_PER_JOB = "QOSMaxBillingPerJob"
    QOS_MAX_CPU_PER_NODE = "QOSMaxCpuPerNode"
    QOS_MAX_MEM_PER_NODE = "QOSMaxMemoryPerNode"
    QOS_MAX_GRES_PER_NODE = "QOSMaxGRESPerNode"
    QOS_MAX_BILLING_PER_NODE = "QOSMaxBillingPerNode"
    QOS_MAX_CPU_MINUTES_PER_JOB = "QOSMaxCpuMinutesPerJobLimit"
    QOS_MAX_MEM_MINUTES_PER_JOB = "QOSMaxMemoryMinutesPerJob"
    QOS_MAX_NODE_MINUTES_PER_JOB = "QOSMaxNodeMinutesPerJob"
    QOS_MAX_GRES_MINUTES_PER_JOB = "QOSMaxGRESMinutesPerJob"
    QOS_MAX_BILLING_MINUTES_PER_JOB = "QOSMaxBillingMinutesPerJob"
    QOS_MAX_CPU_PER_USER = "QOSMaxCpuPerUserLimit"
    QOS_MAX_MEM_PER_USER = "QOSMaxMemoryPerUser"
    QOS_MAX_NODE_PER_USER = "QOSMaxNodePerUserLimit"
    QOS_MAX_GRES_PER_USER = "QOSMaxGRESPerUser"
    QOS_MAX_BILLING_PER_USER = "QOSMaxBillingPerUser"
    QOS_MAX_CPU_PER_ACCOUNT = "MaxCpuPerAccount"
    QOS_MAX_MEM_PER_ACCOUNT = "MaxMemoryPerAccount"
    QOS_MAX_NODE_PER_ACCOUNT = "MaxNodePerAccount"
    QOS_MAX_GRES_PER_ACCOUNT = "MaxGRESPerAccount"
    QOS_MAX_BILLING_PER_ACCOUNT = "MaxBillingPerAccount"
    QOS_GRP_LICENSE = "QOSGrpLicense"
    QOS_GRP_LICENSE_MINUTES = "QOSGrpLicenseMinutes"
    QOS_MAX_LICENSE_PER_JOB = "QOSMaxLicensePerJob"
    QOS_MAX_LICENSE_MINUTES_PER_JOB = "QOSMaxLicenseMinutesPerJob"
    QOS_MAX_UNKNOWN_PER_NODE = "QOSMaxUnknownPerNode"  # as ASSOC_MAX_UNKNOWN_PER_NODE
    QOS_MAX_LICENSE_PER_USER = "QOSMaxLicensePerUser"
    QOS_MAX_LICENSE_PER_ACCOUNT = "MaxLicensePerAccount"
    NON_ZERO_EXIT_CODE = "NonZeroExitCode"
    RAISED_SIGNAL = "RaisedSignal"
    TIME_LIMIT = "TimeLimit"
    JOB_LAUNCH_FAILURE = "JobLaunchFailure"
    OUT_OF_MEMORY = "OutOfMemory"  # FAIL_OOM: the OOM killer killed some of its processes


class InvalidTransition(Exception):
    """``event`` does not apply to a job in its current state."""

    def __init__(self, job: Job, event: object) -> None:
        super().__init__(
            f"job_id={job.job_id} state={job.state.name} cannot take {type(event).__name__}"
        )
        self.job_id = job.job_id
        self.state = job.state


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Start:
    """The scheduler gave the job nodes and the launch was sent."""

    now: int
    partition: str
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]
    # The priority it starts with (the ranked one), kept while it runs, as Slurm does.
    priority: int
    # (name, type, count) generic resources on each node; () when none.
    gres: tuple[tuple[tuple[str, str, int], ...], ...] = ()
    # The GPUs given on each node, by index (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES).
    gpus: tuple[tuple[int, ...], ...] = ()
    # The CPU ids given on each node (near those GPUs first); () when none were named.
    cpu_ids: tuple[tuple[int, ...], ...] = ()
    # Of a job naming alternatives (--gres=a|b, --prefer): the --gres it got ("": its
    # own) and which alternative that is and why, in words (scontrol's Flavor=).
    request: str = ""
    flavor: str = ""
    # The CPUs it may use on each node, where that is fewer than it holds (--hint,
    # --threads-per-core: core/threads.py); () when it may use them all.
    used: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Finish:
    """The node agent reported the batch script gone (exit or signal)."""

    now: int
    exit_status: int
    # "exited", "timeout", "cancelled", "launch_failed", "prolog_failed", "out_of_memory"
    outcome: str
    usage: tuple[int, int, int] = (0, 0, 0)  # max RSS KiB, user and system CPU microseconds
    message: str = ""  # the node's reason, kept (SystemComment) when the launch failed


@dataclass(frozen=True, slots=True)
class Cancel:
    now: int
    by: int = -1  # the uid that asked (sacct: "CANCELLED by <uid>"); -1 unknown


@dataclass(frozen=True, slots=True)
class Preempt:
    """Preempted with PreemptMode=CANCEL (or a job that may not be requeued)."""

    now: int


#: ``Requeue.hold`` (and ``Job.held``) after a failed Prolog: a hold its user may
#: release, shown with Slurm's reason.
PROLOG_HOLD = "prolog"


@dataclass(frozen=True, slots=True)
class Requeue:
    now: int
    hold: str = ""  # "", or who holds it afterwards: "user", "admin" or PROLOG_HOLD


@dataclass(frozen=True, slots=True)
class NodeFail:
    now: int
    requeue: bool


@dataclass(frozen=True, slots=True)
class Hold:
    admin: bool


@dataclass(frozen=True, slots=True)
class Release:
    pass


@dataclass(frozen=True, slots=True)
class Revoke:
    """A pending job that never started was submitted to another cluster, as
    ``moved_to`` ("cluster:job_id"), and ends here (controller/moves.py)."""

    now: int
    moved_to: str


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The scheduler ends a pending job that can never run as asked.

    ``DEADLINE``: it cannot finish before its ``--deadline`` (state DEADLINE);
    ``DEPENDENCY_NEVER_SATISFIED`` under ``--kill-on-invalid-dep`` (CANCELLED).
    """

    now: int
    reason: Reason


#: ``Suspend.by`` (and ``Job.suspended_by``) of the gang scheduler's suspensions.
GANG = -1


@dataclass(frozen=True, slots=True)
class Suspend:
    """The job's processes are stopped where they are: ``scontrol suspend`` (``by``
    0), a preemption (``by`` the preemptor's id) or the gang scheduler (``GANG``)."""

    now: int
    by: int = 0
    lend: bool = True  # its CPUs go to other jobs meanwhile


@dataclass(frozen=True, slots=True)
class Resume:
    """``scontrol resume``: the suspended job's processes continue."""

    now: int


@dataclass(frozen=True, slots=True)
class Resize:
    """The running job's allocation changed: an elastic job grew or gave nodes back
    under pressure, or ``scontrol update NumNodes`` shrank it (docs/design.md,
    "Elastic jobs"). Its nodes, and what it has on each, are now these; its first
    node, which runs its batch script, stays."""

    now: int
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]
    gres: tuple[tuple[tuple[str, str, int], ...], ...] = ()
    gpus: tuple[tuple[int, ...], ...] = ()
    cpu_ids: tuple[tuple[int, ...], ...] = ()
    # The CPUs it may use on each node, where fewer than it holds (Start's ``used``).
    used: tuple[int, ...] = ()


#: Who holds a suspended job that is requeued: Slurm requeues it held where an
#: operator suspended it.
SUSPENDED_REQUEUE_HOLD = "admin"

Event = (
    Start
    | Finish
    | Cancel
    | Preempt
    | Requeue
    | NodeFail
    | Hold
    | Release
    | GiveUp
    | Revoke
    | Suspend
    | Resume
    | Resize
)


def _finish_state(job: Job, event: Finish) -> tuple[JobState, Reason]:
    if COMPLETING in job.flags and job.state in (JobState.CANCELLED, JobState.PREEMPTED):
        return job.state, job.reason
    if event.outcome == "timeout":
        return JobState.TIMEOUT, Reason.TIME_LIMIT
    if event.outcome == "cancelled":
        return JobState.CANCELLED, Reason.NONE
    if event.outcome in ("launch_failed", "prolog_failed"):
        return JobState.FAILED, Reason.JOB_LAUNCH_FAILURE
    if event.outcome == "out_of_memory":  # the OOM killer killed some of its processes
        return JobState.OUT_OF_MEMORY, Reason.OUT_OF_MEMORY
    if event.exit_status & 0x7F:
        return JobState.FAILED, Reason.RAISED_SIGNAL
    if event.exit_status >> 8:
        return JobState.FAILED, Reason.NON_ZERO_EXIT_CODE
    return JobState.COMPLETED, Reason.NONE


def _back_to_pending(job: Job, now: int, hold: str) -> Job:
    held = "admin" if "admin" in (hold, job.held) else hold or job.held
    reason = {
        "admin": Reason.JOB_HELD_ADMIN,
        "user": Reason.JOB_HELD_USER,
        PROLOG_HOLD: Reason.LAUNCH_FAILED_REQUEUED_HELD,
    }.get(held)
    return replace(
        job,
        state=JobState.PENDING,
        flags=frozenset(),
        reason=reason or Reason.BEGIN_TIME,
        held=held,
        requeue_hold="",
        restarts=job.restarts + 1,
        nodes=(),
        cpus=(),
        cpus_released=False,
        suspended_by=0,
        suspend_time=0,
        pre_suspend_secs=0,
        suspended_secs=0,
        alloc_mem=(),
        gres_alloc=(),
        gpus=(),
        cpu_ids=(),
        start_time=0,
        end_time=0,
        # Back among its alternatives: it asks for its first again (core/flavors.py).
        gres=job.gres_alternatives[0] if job.gres_alternatives else job.gres,
        flavor="",
        eligible_time=now + job.requeue_delay,
        begin_time=now + job.requeue_delay,
        # The next run is a record of its own in accounting, under a key after the
        # last run's (a run requeued within its second moves it on by one).
        requeue_time=max(now, job.run_key + 1),
        resize_time=0,
    )


def _unsuspended(job: Job, now: int) -> Job:
    """``job`` out of SUSPENDED (as RUNNING) at ``now``, its suspended time counted:
    what Cancel, Requeue and NodeFail see of a suspended job. Its CPUs stay lent
    (``cpus_released``) until it is off its nodes."""
    if job.state is not JobState.SUSPENDED:
        return job
    return replace(
        job,
        state=JobState.RUNNING,
        suspended_secs=job.suspended_secs + max(now - job.suspend_time, 0),
        suspend_time=now,
    )


def apply(job: Job, event: Event) -> Job:
    """Return ``job`` after ``event``; raise ``InvalidTransition`` if it cannot happen."""
    if job.state is JobState.SUSPENDED and isinstance(
        event, Cancel | Preempt | Requeue | NodeFail | Finish
    ):
        resumed = _unsuspended(job, event.now)
        if isinstance(event, Requeue) and not job.suspended_by:
            event = Requeue(event.now, event.hold or SUSPENDED_REQUEUE_HOLD)
        return apply(resumed, event)
    state = job.state
    match event:
        case Suspend() if state is JobState.RUNNING and COMPLETING not in job.flags:
            return replace(
                job,
                state=JobState.SUSPENDED,
                pre_suspend_secs=job.pre_suspend_secs
                + max(event.now - (job.suspend_time or job.start_time), 0),
                suspend_time=event.now,
                cpus_released=event.lend,
                suspended_by=event.by,
            )
        case Suspend() if state is JobState.SUSPENDED and event.by and job.suspended_by:
            return replace(job, cpus_released=event.lend, suspended_by=event.by)
        case Resume() if state is JobState.SUSPENDED:
            paused = max(event.now - job.suspend_time, 0)
            return replace(
                job,
                state=JobState.RUNNING,
                suspended_secs=job.suspended_secs + paused,
                suspend_time=event.now,
                end_time=job.end_time + paused if job.end_time else 0,
                cpus_released=False,
                suspended_by=0,
            )
        case Resize() if (
            state is JobState.RUNNING
            and COMPLETING not in job.flags
            and (event.nodes[:1] == job.nodes[:1] or not event.nodes)
        ):
            return replace(
                job,
                nodes=event.nodes,
                cpus=event.cpus,
                alloc_mem=event.memory,
                gres_alloc=event.gres,
                gpus=event.gpus,
                cpu_ids=event.cpu_ids,
                cpus_used=event.used,
                resize_time=event.now,
            )
        case Start() if state is JobState.PENDING and not job.held and not job.moved_to:
            return replace(
                job,
                state=JobState.RUNNING,
                reason=Reason.NONE,
                partition=event.partition,
                nodes=event.nodes,
                # Without -n, a task on each node it got (--gpus=16 on 4-GPU nodes: 4).
                num_tasks=job.num_tasks
                if job.tasks_given
                else max(job.num_tasks, len(event.nodes)),
                cpus=event.cpus,
                alloc_mem=event.memory,
                calc_priority=event.priority,
                gres_alloc=event.gres,
                gpus=event.gpus,
                cpu_ids=event.cpu_ids,
                cpus_used=event.used,
                gres=event.request or job.gres,
                flavor=event.flavor,
                start_time=event.now,
                end_time=0 if job.time_limit < 0 else event.now + job.time_limit * 60,
            )
        case Finish() if state is JobState.RUNNING or COMPLETING in job.flags:
            if REQUEUED in job.flags:
                return _back_to_pending(
                    replace(job, exit_status=event.exit_status), event.now, job.requeue_hold
                )
            new_state, reason = _finish_state(job, event)
            # A cancelled job ended when it was cancelled; the rest end now.
            end = job.end_time if COMPLETING in job.flags else event.now
            return replace(
                job,
                state=new_state,
                reason=reason,
                flags=frozenset(),
                exit_status=event.exit_status,
                end_time=end,
                usage=event.usage,
                system_comment=(
                    event.message if reason is Reason.JOB_LAUNCH_FAILURE else job.system_comment
                ),
            )
        case Cancel() if state is JobState.PENDING:
            return replace(
                job,
                state=JobState.CANCELLED,
                end_time=event.now,
                reason=Reason.NONE,
                start_time=job.start_time or event.now,
                cancelled_by=event.by,
            )
        case Cancel() if state is JobState.RUNNING and COMPLETING not in job.flags:
            return replace(
                job,
                state=JobState.CANCELLED,
                flags=job.flags | {COMPLETING},
                end_time=event.now,
                cancelled_by=event.by,
            )
        case Preempt() if state is JobState.RUNNING and COMPLETING not in job.flags:
            return replace(
                job, state=JobState.PREEMPTED, flags=job.flags | {COMPLETING}, end_time=event.now
            )
        case Requeue() if state is JobState.RUNNING and COMPLETING not in job.flags:
            return replace(job, flags=job.flags | {COMPLETING, REQUEUED}, requeue_hold=event.hold)
        case Requeue() if state.finished and not job.flags & {COMPLETING, REVOKED}:
            return _back_to_pending(job, event.now, event.hold)
        case NodeFail() if state is JobState.RUNNING or COMPLETING in job.flags:
            if (event.requeue or REQUEUED in job.flags) and state is JobState.RUNNING:
                return _back_to_pending(job, event.now, job.requeue_hold)
            final = state if state.finished else JobState.NODE_FAIL
            return replace(
                job,
                state=final,
                flags=frozenset(),
                end_time=job.end_time if state.finished else event.now,
                reason=Reason.NODE_DOWN if final is JobState.NODE_FAIL else job.reason,
            )
        case Hold() if state is JobState.PENDING:
            return replace(
                job,
                # A user's hold never weakens an administrator's.
                held="admin" if event.admin or job.held == "admin" else "user",
                reason=Reason.JOB_HELD_ADMIN
                if event.admin or job.held == "admin"
                else Reason.JOB_HELD_USER,
            )
        case Release() if state is JobState.PENDING and job.held:
            return replace(job, held="", reason=Reason.NONE)
        case Revoke() if state is JobState.PENDING and not job.start_time:
            return replace(
                job,
                state=JobState.CANCELLED,
                flags=frozenset({REVOKED}),
                reason=Reason.NONE,
                end_time=event.now,
                start_time=event.now,
                moved_to=event.moved_to,
            )
        case GiveUp() if state is JobState.PENDING:
            final = JobState.DEADLINE if event.reason is Reason.DEADLINE else JobState.CANCELLED
            return replace(
                job,
                state=final,
                reason=event.reason,
                end_time=event.now,
                start_time=job.start_time or event.now,
            )
    raise InvalidTransition(job, event)
