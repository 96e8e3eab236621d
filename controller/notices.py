"""``scontrol notify``: messages for the salloc or srun holding a job's allocation.

Slurm's controller sends SRUN_USER_MSG to the port the allocating client left;
Corral's clients poll their allocation (``Allocation``) instead, so the messages
wait here, per job, until its client asks with how many it has printed. They are
not journaled: like Slurm's, a message is a best-effort word to a live client, and
one lost in a controller restart is lost. A job's messages go when it ends.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.jobstate import JobState
from controller.model import Job
from controller.principal import Principal
from corral import errors
from corral.errors import SlurmError

#: The most messages kept for one job (the oldest go first): a client that stopped
#: polling must not make the controller grow.
KEPT = 100


class NoticeBoard:
    """Each running interactive job's messages, in the order sent."""

    def __init__(self) -> None:
        self._sent: dict[int, list[str]] = {}
        self._dropped: dict[int, int] = {}

    def post(self, jobs: Mapping[int, Job], job_id: int, message: str, who: Principal) -> None:
        """Keep ``message`` for the client of job ``job_id`` (of ``jobs``, the live
        ones): the job's owner, an operator or its account's coordinator may send one,
        to a job whose salloc or srun listens."""
        for gone in [i for i in self._sent if i not in jobs or jobs[i].state.finished]:
            self._forget(gone)
        job = jobs.get(job_id)
        if job is None:
            raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
        if not who.may_manage(job.uid, job.account):
            raise SlurmError(errors.ESLURM_ACCESS_DENIED)
        if job.state.finished:
            raise SlurmError(errors.ESLURM_ALREADY_DONE)
        if job.state is not JobState.RUNNING:
            raise SlurmError(errors.ESLURM_JOB_NOT_RUNNING)
        if not job.interactive:
            raise SlurmError(
                errors.ESLURM_NOT_SUPPORTED,
                f"job {job.job_id} is a batch job: no salloc or srun listens for its messages",
            )
        sent = self._sent.setdefault(job.job_id, [])
        sent.append(message)
        if len(sent) > KEPT:
            del sent[0]
            self._dropped[job.job_id] = self._dropped.get(job.job_id, 0) + 1

    def after(self, job: Job, seen: int) -> list[str]:
        """The messages for ``job`` after the first ``seen`` its client printed."""
        if job.state.finished:
            self._forget(job.job_id)
            return []
        skip = max(seen - self._dropped.get(job.job_id, 0), 0)
        return self._sent.get(job.job_id, [])[skip:]

    def _forget(self, job_id: int) -> None:
        self._sent.pop(job_id, None)
        self._dropped.pop(job_id, None)
