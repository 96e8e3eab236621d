"""sbcast's blocks: who may send them, to which nodes, and the wait for the agents.

A ``BroadcastRequest`` carries one block of a file. The controller checks it as
it checks srun's steps (``target``: the job's owner, an operator or the job's
account's coordinator; a running job; the step's nodes with ``-j job.step``),
then ``FileBroadcasts.send`` puts a ``FileBlock`` on the AgentLink stream of each
agent serving those nodes: the channel that already carries launches, TLS
encrypted and with the controller's credential on every message, so no node
takes a file from anyone else. Each agent writes the block as the job's user
(``nodeagent/filebcast.py``) and answers with a ``FileBlockDone`` naming the
transfer; a session may answer only for the transfers it was sent. The reply
lists the nodes written and the failures, each node's in Slurm's words; the
client (``cli/sbcast.py``) prints them as ``REQUEST_FILE_BCAST(node): ...``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from controller import jobcontrol, visibility
from controller.jobstate import JobState
from controller.model import Job
from controller.principal import Principal
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb

log = logging.getLogger(__name__)

#: Seconds a block waits for the agents when the request names no timeout
#: (Slurm's default MessageTimeout).
DEFAULT_TIMEOUT = 10
#: What a node that did not answer in time reports (Slurm's errno for it).
TIMED_OUT = errors.SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT
#: What a node without a connected agent reports.
UNREACHABLE = errors.SLURM_COMMUNICATIONS_CONNECTION_ERROR


def target(
    jobs: Mapping[int, Job], conf: SlurmConfig, req: pb.BroadcastRequest, who: Principal
) -> tuple[Job, list[str]]:
    """The job a block is for and the nodes it goes to; SlurmError (Slurm's errno, as
    ``job_alloc_info`` refuses sbcast's lookup) when ``who`` may not send it there.
    Under PrivateData=jobs another user's job does not exist for ``who``."""
    job = jobs.get(req.job_id)
    if job is None or not who.may_see(job.uid, job.account, visibility.private(conf, "jobs")):
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    jobcontrol.owned(job, who)
    if job.state is JobState.PENDING:
        raise SlurmError(errors.ESLURM_JOB_PENDING)
    if job.state not in (JobState.RUNNING, JobState.SUSPENDED) or not job.nodes:
        raise SlurmError(errors.ESLURM_ALREADY_DONE)
    if not req.dest.startswith("/") or "\0" in req.dest:
        raise SlurmError(errors.EINVAL, f"destination {req.dest!r} is not an absolute path")
    if not req.step:
        return job, list(job.nodes)
    step_id, part = step_part(req.step)
    for step in job.steps:
        if step.step_id == step_id and step.state == "RUNNING" and step.het_comp in part:
            return job, list(step.nodes)
    raise SlurmError(errors.ESLURM_INVALID_JOB_ID)


def step_part(text: str) -> tuple[int, tuple[int, ...]]:
    """``STEP`` or ``STEP+PART`` (sbcast -j JOB.STEP+PART): the step id and the parts
    (``Step.het_comp``) it names. A step of parts (``srun a : b``) named by its id alone
    is its first part, as Slurm 22.05's sbcast reaches only that part's nodes (measured:
    ``-j J.S+1`` reaches the next part's). SlurmError for malformed text."""
    step, plus, part = text.partition("+")
    if not step.isdigit() or (plus and not part.isdigit()):
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    if plus and int(part) > 0:
        return int(step), (int(part),)
    return int(step), (-1, 0)  # a plain step has no parts (-1)


def step_copy(req: pb.StepCreateRequest, job_id: int, step_id: int, node: str) -> str:
    """Where ``srun --bcast`` puts the executable on ``node`` ("": no --bcast): DEST,
    each ``%n`` the node's name, or Slurm 22.05's default, measured there:
    ``slurm_bcast_JOB.STEP_NODE`` in BcastParameters' DestDir, else srun's cwd (srun
    sends the blocks to the same path, ``%n`` expanded by each node's writer)."""
    if req.bcast_dest:
        return req.bcast_dest.replace("%n", node)
    if not req.bcast_dir:
        return ""
    return f"{req.bcast_dir.rstrip('/') or ''}/slurm_bcast_{job_id}.{step_id}_{node}"


class Outbox(Protocol):
    """An agent's session as seen here: messages queued for its stream."""

    def send(self, message: pb.ControllerMessage) -> None: ...


@dataclass
class _Transfer:
    """One block sent to one agent: the nodes it is for and the answer awaited."""

    owner: Outbox  # the agent's session: only it may answer
    nodes: tuple[str, ...]
    answer: asyncio.Future[pb.FileBlockDone] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class FileBroadcasts:
    """The blocks sent to agents and not yet answered, by transfer number."""

    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self._waiting: dict[int, _Transfer] = {}

    async def send(
        self,
        job: Job,
        nodes: Sequence[str],
        req: pb.BroadcastRequest,
        sessions: Mapping[str, Outbox],
    ) -> pb.BroadcastReply:
        """Send ``req``'s block to the agents of ``nodes`` (``sessions``: node →
        its agent's session) and wait for their answers, at most ``req.timeout``
        seconds."""
        block = pb.BroadcastRequest()
        block.CopyFrom(req)
        block.ClearField("cred")
        reply = pb.BroadcastReply()
        by_session: dict[int, tuple[Outbox, list[str]]] = {}
        for node in nodes:
            session = sessions.get(node)
            if session is None:
                _fail(reply, node, UNREACHABLE)
                continue
            by_session.setdefault(id(session), (session, []))[1].append(node)
        sent: list[int] = []
        for session, served in by_session.values():
            number = next(self._numbers)
            transfer = _Transfer(session, tuple(served))
            self._waiting[number] = transfer
            sent.append(number)
            message = pb.FileBlock(
                transfer=number,
                job_id=job.job_id,
                nodes=served,
                uid=job.uid,
                gid=job.gid,
                user=job.user,
                block=block,
            )
            session.send(pb.ControllerMessage(file_block=message))
        try:
            await asyncio.wait(
                [self._waiting[n].answer for n in sent], timeout=req.timeout or DEFAULT_TIMEOUT
            )
        finally:
            transfers = [self._waiting.pop(n) for n in sent]
        for transfer in transfers:
            if not transfer.answer.done():
                for node in transfer.nodes:
                    _fail(reply, node, TIMED_OUT)
                continue
            done = transfer.answer.result()
            reply.nodes.extend(n for n in done.nodes if n in transfer.nodes)
            reply.failures.extend(f for f in done.failures if f.node in transfer.nodes)
        return reply

    def answered(self, done: pb.FileBlockDone, session: Outbox) -> None:
        """An agent's answer: taken if that agent was sent that transfer, else logged."""
        transfer = self._waiting.get(done.transfer)
        if transfer is None or transfer.owner is not session:
            log.warning("file block answer %d from an agent not waited on: dropped", done.transfer)
            return
        if not transfer.answer.done():
            transfer.answer.set_result(done)


def _fail(reply: pb.BroadcastReply, node: str, code: int) -> None:
    reply.failures.append(pb.NodeFailure(node=node, code=code, message=errors.MESSAGES[code]))
