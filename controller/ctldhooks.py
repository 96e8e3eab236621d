"""PrologSlurmctld and EpilogSlurmctld: the controller's site programs.

Both run as the controller's user (SlurmUser) in a worker thread
(:func:`corral.hooks.run_async`), so the event loop serves on while they run,
with the job's variables and ``SLURM_SCRIPT_CONTEXT`` as slurmctld gives them,
bounded by PrologEpilogTimeout.

PrologSlurmctld runs for every job allocation, as in Slurm. For a batch job it
runs when the job starts, before its launch is sent: the job is RUNNING on
its nodes meanwhile (Slurm's CONFIGURING). When it succeeds the launch goes
out, unless the job was cancelled or requeued in the meantime; when it fails
or overruns, the job is requeued (Slurm's rule: "the job being requeued to be
executed on another node if possible"). For an allocation (salloc, srun
outside a job) it runs when the allocation starts; the job is in the store's
``configuring`` from its start until the program ends, which the Allocation
call reports as CONFIGURING, so its client waits before it uses the nodes.
As only batch jobs can be requeued (slurm.conf(5)), a failure kills the
allocation (CANCELLED) and its client says it was revoked. ``configuring``
lives in memory only: after a controller restart an allocation whose program
was running is simply ready.
EpilogSlurmctld runs once a job has given its nodes back (ended, or
requeued), with how it ended; a failure is only logged, as in Slurm.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from controller import jobstate
from controller.effects import PROLOG_SLURMCTLD
from controller.jobenv import batch_environment
from controller.model import Job
from controller.store import JobStore
from corral import hooks

log = logging.getLogger(__name__)


class ControllerHooks:
    """Runs the controller's site programs around a job's launch and end."""

    def __init__(
        self, store: JobStore, launch: Callable[[Job], None], on_change: Callable[[], None]
    ) -> None:
        self.store = store
        self.conf = store.conf.hooks
        self._launch = launch  # sends the LaunchJob
        self.on_change = on_change
        self._tasks: set[asyncio.Task[None]] = set()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _environment(self, job: Job, context: str) -> dict[str, str]:
        payload = self.store.payload(job)
        job_env = (
            {} if payload is None else batch_environment(job, payload, self.store.conf.cluster_name)
        )
        env = hooks.job_environment(job_env, context)
        env.setdefault("SLURM_JOB_ID", str(job.job_id))
        env.setdefault("SLURM_JOBID", str(job.job_id))
        env["SLURM_CONF"] = self.store.conf.path
        return env

    # ------------------------------------------------------------ PrologSlurmctld

    def launch(self, job: Job) -> None:
        """Send ``job``'s launch, after PrologSlurmctld when there is one."""
        if not self.conf.prolog_slurmctld:
            self._launch(job)
            return
        self._spawn(self._prolog(job))

    def granted(self, job: Job) -> None:
        """An allocation started: run PrologSlurmctld while its client waits."""
        if self.conf.prolog_slurmctld:
            self._spawn(self._prolog(job))
        else:  # taken out of slurm.conf by a reconfigure meanwhile
            self.store.configured(job.job_id, PROLOG_SLURMCTLD)

    async def _prolog(self, job: Job) -> None:
        env = self._environment(job, "prolog_slurmctld")
        try:
            result = await hooks.run_async(
                self.conf.prolog_slurmctld, env, timeout=self.conf.timeout
            )
        finally:
            self.store.configured(job.job_id, PROLOG_SLURMCTLD)
        now = self.store.jobs.get(job.job_id)
        if (
            now is None
            or now.restarts != job.restarts
            or now.state is not jobstate.JobState.RUNNING
            or jobstate.COMPLETING in now.flags
        ):
            return  # cancelled, requeued or ended meanwhile: nothing to launch
        if result.ok:
            if not now.interactive:
                self._launch(now)
            return
        log.error(
            "job_id=%d prolog_slurmctld failed: %s output:%s: %s",
            job.job_id,
            result.describe(),
            result.output.strip(),
            "killed" if now.interactive else "requeued",
        )
        stamp = int(time.time())
        if now.interactive:  # only batch jobs can be requeued
            self.store.end_interactive(now, stamp, 0x9, "cancelled")
        else:
            self.store.post(job.job_id, jobstate.Requeue(stamp))
            self.store.post(job.job_id, jobstate.Finish(stamp, 0, "prolog_failed"))
        await self.store.durable.kept()
        self.on_change()

    # ------------------------------------------------------------ EpilogSlurmctld

    def ended(self, job: Job, exit_status: int) -> None:
        """``job`` (as it ran) gave its nodes back: run EpilogSlurmctld."""
        if self.conf.epilog_slurmctld:
            self._spawn(self._epilog(job, exit_status))

    async def _epilog(self, job: Job, exit_status: int) -> None:
        env = self._environment(job, "epilog_slurmctld") | hooks.exit_variables(exit_status)
        result = await hooks.run_async(self.conf.epilog_slurmctld, env, timeout=self.conf.timeout)
        if not result.ok:
            log.error(
                "job_id=%d epilog_slurmctld failed: %s output:%s",
                job.job_id,
                result.describe(),
                result.output.strip(),
            )
