"""Pending jobs moved to another cluster that would start them sooner (issue 20).

Every MoveInterval (``SchedulerParameters=corral_move_interval=N``, seconds; 0 turns
moves off) the controller looks at the jobs ``movespec.may_move`` allows: pending,
never started, their ``-M`` list naming several clusters. For each it asks the other
named clusters, as the job's user, when they would start it (``--test-only``'s plan,
as ``sbatch -M a,b`` asks). Where one starts it more than MoveMargin
(``corral_move_margin=N``, seconds) before this cluster's backfill expects to (a
job that no backfill pass has planned yet is left for the next round; one a pass
found no start for within bf_window counts as never starting here), the job moves
there:

1. ``JobStore.send_to`` marks it as being sent, and that is journaled first: from
   then it never starts here, and a restart sends it again rather than lose it;
2. it is submitted there as its user (never as root: the credential is signed for
   the job's uid and gid), keyed "this cluster:job id", which the other controller
   keeps on the job it makes and answers again to a retry, so a resend never makes
   a second copy;
3. it ends here in state REVOKED (CANCELLED+REVOKED, Slurm's name for a federation
   sibling removed because another cluster runs it), ``MovedTo=cluster:job_id``.

The other cluster refusing the job (a Slurm error) leaves it here, where it waits as
any job and never moves again; an unreachable one is asked again next interval. A job
cancelled while its submission was on its way has the copy it made cancelled too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller import movespec
from controller.jobstate import InvalidTransition, JobState, Revoke
from controller.model import Job
from controller.store import JobStore
from corral import SLURM_PROTOCOL_VERSION, auth, errors
from corral.clusterroute import ControllerCalls, Lookup
from corral.config import SlurmConfig
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)

#: The start of a job backfill found none for within its window (bf_window).
NEVER = 2**62

#: How often a controller with moves turned off looks whether a reconfigure turned
#: them on.
IDLE_LOOK_S = 30.0


@dataclass(frozen=True, slots=True)
class MoveSettings:
    interval: int  # seconds between looks; 0: no job moves
    margin: int  # seconds sooner the other cluster must start it


def settings(conf: SlurmConfig) -> MoveSettings:
    """MoveInterval (default 30 s) and MoveMargin (default 60 s) from
    SchedulerParameters, whose numbers ``corral.config`` checked."""
    interval = conf.scheduler_param("corral_move_interval")
    margin = conf.scheduler_param("corral_move_margin")
    return MoveSettings(
        interval=30 if interval is None else int(interval),
        margin=60 if margin is None else int(margin),
    )


class Mover:
    """The controller's moves of pending jobs to other clusters (``run``: the task)."""

    def __init__(
        self,
        store: JobStore,
        calls: ControllerCalls,
        lookup: Lookup,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.calls = calls
        self.lookup = lookup
        self.clock = clock
        self.own = store.conf.cluster_name.lower()

    async def run(self) -> None:
        while True:
            every = settings(self.store.conf).interval
            await asyncio.sleep(every or IDLE_LOOK_S)
            if not every:
                continue
            try:
                await self.once()
            except Exception:  # dbd or a controller away: the next interval tries again
                log.exception("job moves: this round failed")

    async def once(self) -> None:
        """One round: jobs being sent are sent again, then the others looked at (dbd is
        asked where the clusters are only when there is a job to move)."""
        sending = [j for j in self.store.jobs.values() if _being_sent(j)]
        last = self.store.backfill_pass  # a job no pass planned yet may start here now
        planned = {j.job_id for j in last[0].pending} if last is not None else set()
        candidates = [
            i for i, j in self.store.jobs.items() if i in planned and movespec.may_move(j)
        ]
        if not sending and not candidates:
            return
        targets = await self.lookup()
        for marked in sending:
            await self._send(marked, targets)
        margin = settings(self.store.conf).margin
        for job_id in candidates:
            job = self._still_movable(job_id)  # it may have changed while others were asked
            if job is None:
                continue
            # Backfill's expected start (squeue --start); none: not within its window.
            here = job.expected_start or NEVER
            if here <= int(self.clock()) + margin:
                continue  # it starts soon enough here
            sooner = await self._sooner(job, targets, here - margin)
            # Checked again with no await before the mark: it may have started meanwhile.
            if sooner is not None and self._still_movable(job_id) is not None:
                moving = self.store.send_to(job_id, sooner)
                await self.store.flush()
                log.info("job_id=%d moves to cluster %s", job_id, sooner)
                await self._send(moving, targets)

    def _still_movable(self, job_id: int) -> Job | None:
        job = self.store.jobs.get(job_id)
        return job if job is not None and movespec.may_move(job) else None

    async def _sooner(self, job: Job, targets: dict[str, str], before: int) -> str | None:
        """Of the other clusters ``job`` named, the one whose plan starts it first, if
        that is before ``before``; asked as its user."""
        payload = self.store.payload(job)
        if payload is None or not payload.spec:
            return None
        best, start = None, before
        for name in movespec.names(job.clusters):
            if name == self.own or name not in targets:
                continue
            ask = movespec.request(job, payload, self.own, _working(name, targets[name]))
            ask.test_only = True
            ask.ClearField("moved_from")
            reply = await self._call(name, targets[name], "Submit", ask, job)
            if reply.code:  # it cannot take the job: not a place to move to
                log.debug("job_id=%d: %s cannot take it: %s", job.job_id, name, reply.error)
                continue
            when = pb.SubmitReply.FromString(reply.body).start_time
            if when < start:
                best, start = name, when
        return best

    async def _send(self, job: Job, targets: dict[str, str]) -> None:
        """Submit ``job`` (being sent to ``job.moved_to``) there, then revoke it here."""
        name = job.moved_to
        payload = self.store.payload(job)
        if name not in targets or payload is None:
            log.warning("job_id=%d: cluster %s not reachable now; sent later", job.job_id, name)
            return
        submit = movespec.request(job, payload, self.own, _working(name, targets[name]))
        reply = await self._call(name, targets[name], "Submit", submit, job)
        if reply.code == errors.SLURM_UNEXPECTED_MSG_ERROR:  # unreachable: try again later
            log.warning("job_id=%d: not sent to %s yet: %s", job.job_id, name, reply.error)
            return
        if reply.code:
            log.info(
                "job_id=%d: cluster %s refused it (%s); it stays", job.job_id, name, reply.error
            )
            self.store.keep_here(job.job_id)
            await self.store.flush()
            return
        there = pb.SubmitReply.FromString(reply.body).job_id
        try:
            self.store.post(job.job_id, Revoke(int(self.clock()), f"{name}:{there}"))
        except InvalidTransition:  # cancelled while it was being sent: so is its copy
            cancel = pb.SignalRequest(filter=pb.JobFilter(job_ids=[str(there)]))
            await self._call(name, targets[name], "Signal", cancel, job)
            return
        await self.store.flush()
        log.info("job_id=%d moved to cluster %s as job %d", job.job_id, name, there)

    async def _call(self, name: str, target: str, method: str, request: Any, job: Job) -> pb.Frame:
        """``request`` made at cluster ``name``'s controller as ``job``'s user."""
        frame = pb.Frame(method=method, body=request.SerializeToString())
        return await self.calls.call(
            target, auth.controller_receiver(name), frame, job.uid, job.gid
        )


def _being_sent(job: Job) -> bool:
    return job.state is JobState.PENDING and bool(job.moved_to)


def _working(name: str, target: str) -> str:
    """``SLURM_WORKING_CLUSTER`` for the cluster ``name`` at ``target`` ("host:port")."""
    host, _, port = target.rpartition(":")
    return f"{name}:{host}:{port}:{SLURM_PROTOCOL_VERSION}"
