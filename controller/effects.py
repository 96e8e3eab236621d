"""What a job's transition tells the node agents: the transition -> effect table.

``jobstate.apply`` decides a job's next state and nothing else. What the rest of
the cluster must hear because of it (start the script, end the job's processes,
move its time limit) is decided here, in one table, by ``follow(old, new, event)``:

=====================  ==============================  =============================
event                  the job before                  effect
=====================  ==============================  =============================
Start                  pending                         Launch (not for salloc/srun:
                                                       their client runs the command)
Cancel                 running                         Kill "cancel"
Preempt                running                         Kill "preempt"
Requeue                running                         Kill "requeue", after
                                                       ``REQUEUE_KILL_DELAY_S``
NodeFail               running                         Kill "node_down" (the job's
                                                       other nodes)
Finish                 running allocation (salloc,     Kill "complete" (its client
                       srun without a batch script)    gave it back) or "timeout"
Finish                 running batch job               none: its agent reported it
Suspend                running                         Stop (freeze its processes)
Suspend                suspended (by the gang or       nothing: it is frozen already,
                       a preemption)                   only who holds it changes
Resume                 suspended                       Continue (thaw them; the time
                                                       suspended moves its limit)
Cancel, Preempt,       suspended                       as running: the kill thaws
Requeue, NodeFail                                      the processes first
Resize                 running                         Resized (the runs on the nodes
                                                       it left end; the others are
                                                       told its new nodes)
anything               pending, or already completing  none: no process to tell
=====================  ==============================  =============================

Four effects are the store's, not the table's, since they depend on slurm.conf:
``Granted`` when an allocation starts and PrologSlurmctld is set (it runs before
salloc or srun may use the nodes), ``NodeProlog`` when a job starts under
PrologFlags=Alloc and a Prolog is set (it runs on each node at once),
``NodeEpilog`` when a job gives its nodes back and an Epilog (or a Prolog, whose
record of where it ran is then dropped) is set, and ``Ended`` then when
EpilogSlurmctld is set. A resize gives ``NodeProlog`` for the nodes it adds (under
PrologFlags=Alloc) and ``NodeEpilog`` for those it gives back, as if the job had
started or ended there.

A running job's time limit changed by ``scontrol update`` or its reservation
gives ``NewLimit``; ``scancel --signal`` and ``--signal=SIG@T`` give ``Signal``.
Those are not state changes, so their callers emit them through the same queue.

``JobStore`` queues what ``follow`` returns; ``Durability.flush`` hands each batch's
effects to one dispatcher (``AgentLink.dispatch``) once the changes that caused them
are on disk, so no agent acts on a change the journal could still lose. Two
messages stay outside the queue on purpose: a step's launch (a step is not a job
transition, and srun's latency should not wait for the commit) and the link's own
reconciliation with a reconnecting agent (``AgentLink._reconcile``).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.jobstate import (
    COMPLETING,
    Cancel,
    Event,
    Finish,
    JobState,
    NodeFail,
    Preempt,
    Requeue,
    Resize,
    Resume,
    Suspend,
)
from controller.mail import Notice
from controller.model import Job

#: A requeue's kill waits this long: a job often requeues itself (submitit), and the
#: scontrol that asked must get its answer before the job is ended.
REQUEUE_KILL_DELAY_S = 0.2

#: The kill that follows each ending event of a running job, by its reason.
KILLS: dict[type, str] = {
    Cancel: "cancel",
    Preempt: "preempt",
    Requeue: "requeue",
    NodeFail: "node_down",
}

#: An allocation's end, by ``Finish.outcome``: why its nodes are told to clean up.
ALLOCATION_ENDS = {"exited": "complete", "timeout": "timeout"}

#: What an allocation waits for while PrologSlurmctld runs (``JobStore.configuring``;
#: the others are node names, whose Prolog it waits for).
PROLOG_SLURMCTLD = "PrologSlurmctld"


def prolog_at_allocation(flags: tuple[str, ...]) -> bool:
    """Whether PrologFlags runs the Prolog on every node at allocation: Alloc, or
    Contain or X11, which imply it."""
    return any(flag in flags for flag in ("alloc", "contain", "x11"))


@dataclass(frozen=True, slots=True)
class Launch:
    """Start the batch script on the job's first node (``LaunchJob``)."""

    job: Job


@dataclass(frozen=True, slots=True)
class Kill:
    """End every process of the job on its nodes (``SignalJob`` with signal 0)."""

    job: Job  # as it was when it ran: the nodes to tell
    reason: str
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Signal:
    """Deliver ``signal`` to the job's processes, its batch shell alone, or one step."""

    job: Job
    signal: int
    batch_only: bool = False
    full: bool = False
    step_id: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class NewLimit:
    """The running job's time limit moved (``UpdateJob``)."""

    job: Job


@dataclass(frozen=True, slots=True)
class Granted:
    """An allocation (salloc, srun outside a job) started: PrologSlurmctld runs.
    Emitted by the store, and only when slurm.conf names a PrologSlurmctld (a batch
    job's runs from its ``Launch``)."""

    job: Job


@dataclass(frozen=True, slots=True)
class NodeProlog:
    """The job got its nodes and PrologFlags=Alloc is set: the Prolog runs on each
    node that does not run its batch script (``JobHook``); on ``nodes`` alone when
    given (the nodes a resize added)."""

    job: Job
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeEpilog:
    """The job gave its nodes back: the Epilog runs on each node that does not run
    its batch script (``JobHook``; that one's supervisor runs its own); on ``nodes``
    alone when given (the nodes a resize gave back)."""

    job: Job  # as it ran: its nodes
    exit_status: int
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ended:
    """The job gave its nodes back (it ended, or was requeued): EpilogSlurmctld runs.
    Emitted by the store, and only when slurm.conf names an EpilogSlurmctld."""

    job: Job  # as it ran: its nodes
    exit_status: int


@dataclass(frozen=True, slots=True)
class Stop:
    """Suspend every process of the job on its nodes (``SuspendJob``)."""

    job: Job


@dataclass(frozen=True, slots=True)
class Continue:
    """Resume the job's processes on its nodes (``SuspendJob`` with ``resume``);
    ``job.suspended_secs`` moves the time limit the agents enforce."""

    job: Job


@dataclass(frozen=True, slots=True)
class Resized:
    """The running job's allocation changed (``ResizeJob``): on the nodes it left its
    runs end; the others write its new nodes into each run's resize file and, for an
    elastic job, send the job its signal (docs/design.md, "Elastic jobs")."""

    old: Job  # as it was: the nodes it may have left
    job: Job  # as it is now


@dataclass(frozen=True, slots=True)
class Mail:
    """Mail the job's user asked for (--mail-type): MailProg runs off the event loop
    (controller/mail.py). Emitted by the store, only for jobs that asked."""

    notices: tuple[Notice, ...]


@dataclass(frozen=True, slots=True)
class RebootNode:
    """Tell ``node``'s agent to run RebootProgram: ``scontrol reboot`` issued once the
    node is idle (``controller/reboots.py``), sent once the issue is journaled."""

    node: str


Effect = (
    Launch
    | Kill
    | Signal
    | NewLimit
    | Granted
    | NodeProlog
    | NodeEpilog
    | Ended
    | Stop
    | Continue
    | Resized
    | Mail
    | RebootNode
)


def follow(old: Job, new: Job, event: Event) -> tuple[Effect, ...]:
    """The effects of ``old`` becoming ``new`` by ``event`` (see the table above)."""
    if old.state is JobState.PENDING:
        if new.state is JobState.RUNNING and not new.interactive:
            return (Launch(new),)
        return ()
    if isinstance(event, Suspend):
        return (Stop(new),) if old.state is JobState.RUNNING else ()
    if isinstance(event, Resume):
        return (Continue(new),)
    if isinstance(event, Resize):
        return (Resized(old, new),)
    if old.state not in (JobState.RUNNING, JobState.SUSPENDED) or COMPLETING in old.flags:
        return ()
    reason = KILLS.get(type(event))
    if reason is not None:
        delay = REQUEUE_KILL_DELAY_S if isinstance(event, Requeue) else 0.0
        return (Kill(old, reason, delay),)
    if isinstance(event, Finish) and old.interactive:
        return (Kill(old, ALLOCATION_ENDS.get(event.outcome, event.outcome)),)
    return ()
