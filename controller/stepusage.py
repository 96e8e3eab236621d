"""Live step statistics for sstat: the agents' latest samples, and who may read them.

Slurm's sstat asks the slurmd of each of a step's nodes. In Corral clients talk
to the controller alone, so the agents push instead: every JobAcctGatherFrequency
seconds each agent sends the use of all its live runs in one ``StepUsages``
message on its AgentLink stream (``nodeagent/acctgather.py``), and the
``UsageBoard`` here keeps the latest per node, replacing the node's whole set
each time (so a run that ended leaves within one interval). It lives in memory
only: a sample is worth nothing after the next, and a restarted controller has
fresh ones within an interval. At 10,000 running steps that is 10,000 small
messages' worth of memory, a replacement of one node's entries per message, and a
read that touches only the asked job's nodes.

sstat's reading (``step_stats``) follows Slurm's rules: a job PrivateData=jobs
hides is an invalid job id; a job the caller may see but does not own (nor
operates, nor coordinates the account of) is refused (ESLURM_ACCESS_DENIED), as
slurmd refuses another user's stat request; a job that is not running has no
steps running. Without ``-a`` and without a step, the lowest-numbered srun step
is chosen (none when the job runs only its batch script, as in Slurm).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from controller import visibility
from controller.jobstate import JobState
from controller.model import Job, Step
from controller.principal import Principal
from corral import errors
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb

BATCH = "batch"


class UsageBoard:
    """The latest StepUsage of each live run, by node and (job, step)."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[tuple[int, str], pb.StepUsage]] = {}

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._by_node.values())

    def take(self, usage: Iterable[pb.StepUsage], nodes: Collection[str]) -> int:
        """Replace what ``nodes`` (one agent's) run with ``usage``; an entry for a node
        not among them is dropped. Returns how many were dropped."""
        fresh: dict[str, dict[tuple[int, str], pb.StepUsage]] = {node: {} for node in nodes}
        dropped = 0
        for entry in usage:
            runs = fresh.get(entry.node)
            if runs is None:
                dropped += 1
            else:
                runs[(entry.job_id, entry.step)] = entry
        self._by_node.update(fresh)
        return dropped

    def forget(self, nodes: Iterable[str]) -> None:
        """A node's agent went away: its samples say nothing any more."""
        for node in nodes:
            self._by_node.pop(node, None)

    def of(self, job_id: int, step: str, nodes: Iterable[str]) -> list[pb.StepUsage]:
        """The samples of ``job_id``'s ``step`` on ``nodes``, in their order."""
        found = []
        for node in nodes:
            entry = self._by_node.get(node, {}).get((job_id, step))
            if entry is not None:
                found.append(entry)
        return found


def running_steps(job: Job) -> list[str]:
    """The job's steps that run now: its batch script's first (Slurm creates that step
    first), then srun's in order."""
    if job.state is not JobState.RUNNING:
        return []
    steps = [] if job.interactive else [BATCH]
    return steps + [label(step) for step in job.steps if step.running]


def label(step: Step) -> str:
    """A step as sstat names it: ``0``, or a part of ``srun a : b`` in an ordinary job
    ``0+1`` (``controller/mpmdsteps.py``), whose agents sample it as step ``0``."""
    return f"{step.step_id}+{step.het_comp}" if step.het_comp >= 0 else str(step.step_id)


def step_nodes(job: Job, step: str) -> tuple[str, ...]:
    """Where ``step`` (a ``label``) of ``job`` runs: the batch script on the first node."""
    if step == BATCH:
        return job.nodes[:1]
    return next((s.nodes for s in job.steps if label(s) == step), ())


def chosen_steps(running: list[str], req: pb.StepStatsRequest) -> list[str]:
    """The running steps sstat asked for: one named (``0`` is a step's first running
    part, ``0+1`` that part, as 22.05's sstat shows them), every one (``-a``), or
    the lowest srun step."""
    if req.step:
        return [s for s in running if req.step in (s, s.partition("+")[0])][:1]
    if req.all_steps:
        return running
    return [s for s in running if s != BATCH][:1]


def step_stats(
    jobs: dict[int, Job],
    conf: SlurmConfig,
    board: UsageBoard,
    req: pb.StepStatsRequest,
    who: Principal,
) -> pb.StepStatsReply:
    """sstat's answer for one job (see the module's docstring for the rules)."""
    job = jobs.get(req.job_id)
    if job is None or not who.may_see(job.uid, job.account, visibility.private(conf, "jobs")):
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    if not who.may_manage(job.uid, job.account):
        raise SlurmError(errors.ESLURM_ACCESS_DENIED)
    running = running_steps(job)
    chosen = chosen_steps(running, req)
    reply = pb.StepStatsReply(running=bool(running), steps=chosen)
    for step in chosen:
        for sample in board.of(job.job_id, step.partition("+")[0], step_nodes(job, step)):
            named = reply.usage.add()
            named.CopyFrom(sample)
            named.step = step
    return reply
