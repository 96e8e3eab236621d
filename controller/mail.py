"""Mail about a job's events (``--mail-type``/``--mail-user``), sent as slurmctld sends it.

What is mailed follows Slurm: BEGIN when the job starts; when it ends, END for
COMPLETED or CANCELLED and, for any other end (FAILED, TIMEOUT, NODE_FAIL, ...),
FAIL if asked for, else END; TIME_LIMIT when it ends by its time limit;
REQUEUE when it is requeued; INVALID_DEPEND when its dependency can never be
satisfied; TIME_LIMIT_50/80/90 once per run as its run time reaches that share
of its limit. An array without ARRAY_TASKS is mailed about as a whole: BEGIN
when its first task starts, END or FAIL when its last task ends.

Each mail is MailProg (default ``/bin/mail``) run as ``MailProg -s SUBJECT
RECIPIENT`` with an empty body and the ``SLURM_JOB_*`` variables slurmctld
sets, as the controller's user, off the event loop (``corral.hooks.run_async``):
a slow or missing MailProg never holds up scheduling, and a failure is logged,
never fatal. The decisions here are pure (``notices``, ``subject``); the store
emits a ``effects.Mail`` per notice, sent after the journal flush like every
other effect, so a mail is never sent for a change the journal could still lose.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from controller.jobstate import JobState, Reason
from controller.model import Job
from corral import hooks, mailtype
from corral.config import SlurmConfig
from corral.timefmt import format_hms

log = logging.getLogger(__name__)

#: The words of each mail type in a subject line (and SLURM_JOB_MAIL_TYPE).
WORDS = {
    "BEGIN": "Began",
    "END": "Ended",
    "FAIL": "Failed",
    "REQUEUE": "Requeued",
    "TIME_LIMIT": "Reached time limit",
    "TIME_LIMIT_90": "Reached 90% of time limit",
    "TIME_LIMIT_80": "Reached 80% of time limit",
    "TIME_LIMIT_50": "Reached 50% of time limit",
    "INVALID_DEPEND": "Invalid dependency",
    "STAGE_OUT": "Staged Out",
}
#: Ends that are mailed as END; every other final state is a failure (FAIL if asked).
_ENDED_WELL = frozenset({JobState.COMPLETED, JobState.CANCELLED})
#: Seconds MailProg may run before it is killed.
MAIL_TIMEOUT = 120


@dataclass(frozen=True, slots=True)
class Notice:
    """One mail to send: the job (as it is after the event), its type, and ``summary``
    when it speaks for a whole array (its tasks' ``states`` and exit ``codes``)."""

    job: Job
    kind: str
    now: int
    summary: bool = False
    states: tuple[JobState, ...] = ()
    codes: tuple[int, ...] = ()


def _requeued(old: Job, new: Job) -> bool:
    return old.state in (JobState.RUNNING, JobState.SUSPENDED) and new.state is JobState.PENDING


def notices(old: Job, new: Job, now: int) -> list[str]:
    """The mail types ``old`` becoming ``new`` calls for, among those the job asked for
    (array summaries aside: see ``JobStore``)."""
    asked = mailtype.kinds(new.mail_type)
    if not asked:
        return []
    kinds: list[str] = []
    if old.state is JobState.PENDING and new.state is JobState.RUNNING:
        kinds.append("BEGIN")
    elif new.state.finished and not old.state.finished:
        kinds.append(end_kind(new.state, asked))
        if new.state is JobState.TIMEOUT:
            kinds.append("TIME_LIMIT")
    elif _requeued(old, new):
        kinds.append("REQUEUE")
    if (
        new.reason is Reason.DEPENDENCY_NEVER_SATISFIED
        and old.reason is not Reason.DEPENDENCY_NEVER_SATISFIED
    ):
        kinds.append("INVALID_DEPEND")
    return [kind for kind in kinds if kind in asked]


def end_kind(state: JobState, asked: frozenset[str]) -> str:
    """Slurm's choice for an end: END for a good one, FAIL (if asked) for a bad one."""
    if state in _ENDED_WELL:
        return "END"
    return "FAIL" if "FAIL" in asked else "END"


def time_limit_due(job: Job, now: int) -> list[str]:
    """The time-limit warnings (50/80/90%) due for a running job and not yet sent."""
    if job.state is not JobState.RUNNING or job.time_limit <= 0 or not job.start_time:
        return []
    asked = mailtype.kinds(job.mail_type)
    sent = mailtype.kinds(job.mail_sent)
    elapsed = now - job.start_time - job.suspended_secs
    return [
        kind
        for kind, share in mailtype.TIME_LIMIT_SHARES.items()
        if kind in asked and kind not in sent and elapsed * 100 >= job.time_limit * 60 * share
    ]


def _exit_code(status: int) -> int:
    """The exit code of a wait status (0 when a signal ended it)."""
    return (status >> 8) & 0xFF if not status & 0x7F else 0


def _name(notice: Notice) -> str:
    job = notice.job
    if notice.summary:
        return f"Slurm Array Summary Job_id={job.array_job_id}_* ({job.array_job_id})"
    if job.array_task_id is not None:
        return f"Slurm Array Task Job_id={job.array_job_id}_{job.array_task_id} ({job.job_id})"
    return f"Slurm Job_id={job.job_id}"


def _times(notice: Notice) -> str:
    job = notice.job
    if notice.kind == "BEGIN":
        return f", Queued time {format_hms(max(0, job.start_time - job.submit_time))}"
    if notice.kind in ("END", "FAIL", "REQUEUE") and job.start_time:
        end = job.end_time or notice.now
        return f", Run time {format_hms(max(0, end - job.start_time))}"
    if notice.kind in ("TIME_LIMIT", *mailtype.TIME_LIMIT_SHARES) and job.start_time:
        end = job.end_time or notice.now
        return f", Run time {format_hms(max(0, end - job.start_time - job.suspended_secs))}"
    return ""


def _ending(notice: Notice) -> str:
    if notice.kind not in ("END", "FAIL"):
        return ""
    if notice.summary:
        states = set(notice.states)
        state = states.pop().name if len(states) == 1 else "Mixed"
        codes = [_exit_code(code) for code in notice.codes] or [0]
        return f", {state}, ExitCode [{min(codes)}-{max(codes)}]"
    return f", {notice.job.state.name}, ExitCode {_exit_code(notice.job.exit_status)}"


def subject(notice: Notice) -> str:
    """Slurm's subject line: ``Slurm Job_id=12 Name=x Ended, Run time 00:01:02,
    COMPLETED, ExitCode 0``."""
    words = WORDS[notice.kind]
    return f"{_name(notice)} Name={notice.job.name} {words}{_times(notice)}{_ending(notice)}"


def environment(notice: Notice, cluster: str) -> dict[str, str]:
    """The variables slurmctld gives MailProg."""
    job = notice.job
    env = {
        "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOB_NAME": job.name,
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_MAIL_TYPE": WORDS[notice.kind],
        "SLURM_JOB_STATE": job.state.name,
        "SLURM_JOB_WORK_DIR": job.work_dir,
    }
    if job.array_task_id is not None:
        env["SLURM_ARRAY_JOB_ID"] = str(job.array_job_id)
        env["SLURM_ARRAY_TASK_ID"] = str(job.array_task_id)
    if job.start_time:
        env["SLURM_JOB_QUEUED_TIME"] = format_hms(max(0, job.start_time - job.submit_time))
        env["SLURM_JOB_RUN_TIME"] = format_hms(
            max(0, (job.end_time or notice.now) - job.start_time)
        )
    if notice.kind in ("END", "FAIL"):
        env["SLURM_JOB_EXIT_CODE_MAX"] = str(_exit_code(job.exit_status))
    return env


class Mailer:
    """Runs MailProg for each notice, off the event loop; failures are logged."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, notices: Iterable[Notice], conf: SlurmConfig) -> None:
        """Mail each notice by ``conf``'s MailProg (the configuration now in force)."""
        for notice in notices:
            if notice.job.mail_user:
                self._spawn(self._mail(notice, conf.hooks.mail_prog, conf.cluster_name))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the mails under way (tests, and a clean shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _mail(self, notice: Notice, program: str, cluster: str) -> None:
        line = subject(notice)
        argv = ("-s", line, notice.job.mail_user)
        env = environment(notice, cluster)
        result = await hooks.run_async(program, env, timeout=MAIL_TIMEOUT, argv=argv)
        if not result.ok:
            log.error(
                "job_id=%d MailProg %s failed: %s output:%s",
                notice.job.job_id,
                program,
                result.describe(),
                result.output.strip(),
            )
        else:
            log.info("email msg to %s: %s", notice.job.mail_user, line)


def for_transition(old: Job, new: Job, now: int, tasks: Iterable[Job]) -> list[Notice]:
    """The notices of ``old`` becoming ``new``. ``tasks`` is read only for an array
    task mailed as part of its array (no ARRAY_TASKS): every record of its array, ``new``
    included, from which the summary's first start and last end are told."""
    kinds = notices(old, new, now)
    if not kinds:
        return []
    if new.array_task_id is None or "ARRAY_TASKS" in mailtype.kinds(new.mail_type):
        return [Notice(new, kind, now) for kind in kinds]
    out = []
    others = [task for task in tasks if task.job_id != new.job_id]
    for kind in kinds:
        if kind == "BEGIN":
            if not any(task.start_time for task in others):
                out.append(Notice(new, kind, now, summary=True))
        elif kind in ("END", "FAIL"):
            if all(t.state.finished and not t.array_pending for t in others):
                everyone = [*others, new]
                states = tuple(task.state for task in everyone)
                summary_kind = (
                    "END"
                    if all(s in _ENDED_WELL for s in states)
                    else end_kind(JobState.FAILED, mailtype.kinds(new.mail_type))
                )
                codes = tuple(task.exit_status for task in everyone)
                out.append(Notice(new, summary_kind, now, True, states, codes))
        else:
            out.append(Notice(new, kind, now))
    return out
