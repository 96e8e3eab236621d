"""sattach: who may attach to a running step, and the runners told to connect.

A step's runners connect to srun's I/O socket when the step starts
(``corral/stepio.py``); sattach opens a socket of its own and asks, through the
``StepAttach`` RPC, that each runner of the step connect there too. The
controller checks the caller (the job's owner, root or SlurmUser, as Slurm's
sattach allows: not operators, who may manage a job but not read its I/O) and the
step (running), then sends each node's agent an ``AttachStep`` on its
authenticated stream; the agent hands it to the step's runner. The key that seals
the new connection is sattach's own, carried only on those authenticated paths.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller import visibility
from controller.broadcast import Outbox
from controller.jobstate import JobState
from controller.model import Job, Step
from controller.principal import Principal
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb


def running_step(
    jobs: Mapping[int, Job], conf: SlurmConfig, req: pb.StepAttachRequest, who: Principal
) -> tuple[Job, Step]:
    """The job and step ``who`` may attach to; SlurmError in Slurm's words if none."""
    job = jobs.get(req.job_id)
    if job is None or not who.may_see(job.uid, job.account, visibility.private(conf, "jobs")):
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    if who.uid != job.uid and not who.is_admin:
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)
    if job.state is JobState.PENDING:
        raise SlurmError(errors.ESLURM_JOB_PENDING)
    if job.state not in (JobState.RUNNING, JobState.SUSPENDED):
        raise SlurmError(errors.ESLURM_ALREADY_DONE)
    for step in job.steps:
        if step.step_id == req.step_id and step.state == "RUNNING":
            return job, step
    raise SlurmError(errors.ESLURM_INVALID_JOB_ID)


def attach(
    jobs: Mapping[int, Job],
    conf: SlurmConfig,
    req: pb.StepAttachRequest,
    who: Principal,
    sessions: Mapping[str, Outbox],
) -> pb.StepAttachReply:
    """The step's layout; unless ``layout_only``, each of its nodes' agents sent an
    AttachStep for it (a node without an agent has no runner to attach to)."""
    job, step = running_step(jobs, conf, req, who)
    reply = pb.StepAttachReply(
        nodes=step.nodes,
        tasks=step.tasks,
        het_node_offset=step.het_offset[0],
        het_task_offset=step.het_offset[1],
    )
    if step.task_ids:
        reply.task_ids.extend(task for ids in step.task_ids for task in ids)
    else:  # block order
        first = 0
        for count in step.tasks:
            reply.task_ids.extend(range(first, first + count))
            first += count
    if req.layout_only:
        return reply
    if not req.io_port or len(req.io_key) != 32:
        raise SlurmError(errors.EINVAL, "no I/O socket to attach to")
    for node in step.nodes:
        session = sessions.get(node)
        if session is None:
            continue
        message = pb.AttachStep(
            job_id=job.job_id,
            step_id=step.step_id,
            node=node,
            io_host=req.io_host,
            io_port=req.io_port,
            io_key=req.io_key,
        )
        session.send(pb.ControllerMessage(attach_step=message))
    return reply
