"""The Prolog and Epilog on a job's nodes that do not run its batch script.

slurm.conf(5): the Prolog runs on a node "when it first sees a job step from
a new allocation", or on every node at allocation with PrologFlags=Alloc
(Contain and X11 imply it); the Epilog "always runs on every node of an
allocation when the allocation is released". The batch script's supervisor
runs both on the batch node; this module asks the agents of the job's other
nodes (all of an allocation's, which has no batch script) with a ``JobHook``:

* under Alloc, from the job's start (the store's ``NodeProlog`` effect); an
  allocation's client waits for every node's Prolog (``JobStore.configuring``)
  unless PrologFlags has NoHold, and its steps then wait on their nodes;
* otherwise just before the job's first step on the node, on the same stream,
  so that the agent starts the Prolog before it sees the step and holds the
  step until the Prolog is over;
* the Epilog from the job's end (the store's ``NodeEpilog`` effect);
* again, to an agent that re-attaches, each Prolog an allocation still waits for
  there (an agent restart loses a program it was running).

Each agent answers with a ``HookDone``, kept on its disk until the ``AckHook``
that follows the journal's commit of what it caused: a failed Prolog drains
the node ("Prolog error") and requeues the job held, as on the batch node
(:func:`prolog_failed`); a failed Epilog drains the node ("Epilog error").
An allocation cannot be requeued (only batch jobs can): its failed Prolog
kills it instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from controller import jobstate
from controller.effects import prolog_at_allocation
from controller.jobenv import allocation_environment, batch_environment
from controller.model import Job
from controller.store import JobStore
from corral import hooks
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)

PROLOG_ERROR = "Prolog error"
EPILOG_ERROR = "Epilog error"

#: Sends a message to the agent of a node; False when it has none.
SendTo = Callable[[str, pb.ControllerMessage], bool]


def hook_nodes(job: Job) -> tuple[str, ...]:
    """The job's nodes that hear of its Prolog and Epilog by JobHook: all but the
    batch node, which its supervisor serves."""
    return tuple(job.nodes) if job.interactive else tuple(job.nodes[1:])


def prolog_failed(store: JobStore, job: Job, node: str) -> None:
    """The Prolog failed on ``node``: requeue the running job, held unless
    SchedulerParameters says ``nohold_on_prolog_fail``; an allocation, which cannot
    be requeued, is killed."""
    if job.state is not jobstate.JobState.RUNNING or jobstate.COMPLETING in job.flags:
        return
    now = int(time.time())
    if job.interactive:
        log.warning("job_id=%d prolog failed on %s: killed", job.job_id, node)
        store.post(job.job_id, jobstate.Cancel(now))
        store.end_interactive(store.jobs[job.job_id], now, 0x9, "cancelled")
        return
    nohold = store.conf.scheduler_param("nohold_on_prolog_fail") is not None
    log.warning("job_id=%d prolog failed on %s: requeued", job.job_id, node)
    store.post(job.job_id, jobstate.Requeue(now, "" if nohold else jobstate.PROLOG_HOLD))


class NodeHooks:
    """Sends JobHooks and takes their HookDones."""

    def __init__(self, store: JobStore, send_to: SendTo) -> None:
        self.store = store
        self.send_to = send_to
        self._sent: set[tuple[int, int, str]] = set()  # Prologs asked for at a first step

    def _environment(self, job: Job, context: str) -> dict[str, str]:
        """The job's variables as slurmd gives its Prolog and Epilog (but the node's
        name, which the agent adds)."""
        cluster = self.store.conf.cluster_name
        payload = None if job.interactive else self.store.payload(job)
        job_env = (
            allocation_environment(job, cluster)
            if payload is None
            else batch_environment(job, payload, cluster)
        )
        env = hooks.job_environment(job_env, context)
        env.update(
            SLURM_JOB_WORK_DIR=job.work_dir,
            SLURM_JOB_RESTART_COUNT=str(job.restarts),
            SLURM_CONF=self.store.conf.path,
        )
        return env

    def _send(self, job: Job, node: str, epilog: bool, env: dict[str, str]) -> None:
        message = pb.JobHook(
            job_id=job.job_id, restarts=job.restarts, node=node, epilog=epilog, environment=env
        )
        if not self.send_to(node, pb.ControllerMessage(hook=message)):
            log.warning(
                "job_id=%d %s on %s not run: no agent",
                job.job_id,
                "epilog" if epilog else "prolog",
                node,
            )
            if not epilog:
                self.store.configured(job.job_id, node)

    def prolog(self, job: Job, nodes: tuple[str, ...] = ()) -> None:
        """PrologFlags=Alloc: the Prolog on each of the job's other nodes (on ``nodes``
        alone, a resize's new ones, when given), now."""
        env = self._environment(job, "prolog_slurmd")
        for node in nodes or hook_nodes(job):
            self._send(job, node, False, env)

    def resend(self, nodes: list[str]) -> None:
        """An agent (re)attached for ``nodes``: the Prologs allocations still wait for
        there are asked again, since an agent restart loses a program it was running
        (one that ended is answered from the agent's record, not run again)."""
        for job_id, waits in list(self.store.configuring.items()):
            job = self.store.jobs.get(job_id)
            again = [node for node in nodes if node in waits]
            if job is None or not again:
                continue
            env = self._environment(job, "prolog_slurmd")
            for node in again:
                self._send(job, node, False, env)

    def before_step(self, job: Job, node: str) -> None:
        """A step is about to be sent to ``node``: its Prolog first, unless it ran there
        (or runs at allocation, or in the batch script's supervisor)."""
        flags = self.store.conf.prolog_flags
        if not self.store.conf.hooks.prolog or prolog_at_allocation(flags):
            return
        key = (job.job_id, job.restarts, node)
        if key in self._sent or node not in hook_nodes(job):
            return
        self._sent.add(key)
        self._send(job, node, False, self._environment(job, "prolog_slurmd"))

    def epilog(self, job: Job, exit_status: int, nodes: tuple[str, ...] = ()) -> None:
        """The job gave its nodes back (``nodes`` alone, those a resize left, when
        given): the Epilog on each of its other nodes (and the Prologs asked for
        there are forgotten)."""
        for node in nodes or job.nodes:
            self._sent.discard((job.job_id, job.restarts, node))
        if not self.store.conf.hooks.epilog:
            return
        env = self._environment(job, "epilog_slurmd") | hooks.exit_variables(exit_status)
        for node in nodes or hook_nodes(job):
            self._send(job, node, True, env)

    def done(self, done: pb.HookDone, served: list[str]) -> pb.ControllerMessage | None:
        """Act on an agent's HookDone; the AckHook to send once that is kept, or None
        (and logged) when the session does not serve the node it names."""
        job = self.store.jobs.get(done.job_id)
        if done.node not in served:
            log.warning(
                "agent (%s) sent HookDone of job_id=%d for node %s: dropped",
                ",".join(served),
                done.job_id,
                done.node or "none",
            )
            return None
        what = "epilog" if done.epilog else "prolog"
        if job is not None and job.restarts == done.restarts and done.node in job.nodes:
            if not done.ok:
                log.error(
                    "job_id=%d %s failed on %s: %s", job.job_id, what, done.node, done.message
                )
                reason = EPILOG_ERROR if done.epilog else PROLOG_ERROR
                self.store.drain_failed(done.node, reason, int(time.time()))
                if not done.epilog:
                    prolog_failed(self.store, job, done.node)
            if not done.epilog:
                self.store.configured(job.job_id, done.node)
        ack = pb.AckHook(
            job_id=done.job_id, restarts=done.restarts, node=done.node, epilog=done.epilog
        )
        return pb.ControllerMessage(ack_hook=ack)
