"""The agent's table of jobs: launch, signal, update, watch, report, forget.

Every job the agent knows is a job directory (:mod:`nodeagent.spool`); this
table is a cache of those directories plus the pipes of the supervisors this
agent process started. What it learns goes to the controller through
``send``, which the link points at the current stream (or at nothing while
disconnected: the hello and the JobDone backlog of the next stream carry
everything that matters).

How a job's progress is noticed:

* supervisors started by this agent: their notify pipe (a line when the
  script started, end-of-file when the supervisor exited);
* supervisors found on disk at start-up, or whose exit could not be settled
  at once: a poll of the job directory every ``poll_interval`` seconds.

Keys are ``(job_id, restarts)``: a requeued job runs again under the same id,
and a late AckDone for the previous run must not delete the new one.

The job steps (``srun``) run here are in :attr:`JobTable.steps`
(:class:`~nodeagent.steps.StepTable`), which shares the spool, zygote
and stream; steps end with their job (see :meth:`JobTable.signal`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from corral.wire import corral_pb2 as pb
from nodeagent.devcgroup import BATCH, DeviceGuard
from nodeagent.gpubinding import bind_gpus, granted, mps_gpu
from nodeagent.gpus.neuron import NeuronBinding
from nodeagent.mps import MpsServers
from nodeagent.process import Zygote, spawn_supervisor, supervisor_environment
from nodeagent.runas import LaunchError
from nodeagent.spool import (
    LAUNCH_FAILED_STATUS,
    JobDir,
    LaunchSpec,
    Phase,
    Result,
    Spool,
    Started,
)
from nodeagent.steps import StepTable
from nodeagent.watch import Run, Watch

log = logging.getLogger(__name__)

Key = tuple[int, int]
Send = Callable[[pb.AgentMessage], None]

#: How often job directories without a notify pipe are looked at.
POLL_INTERVAL = 0.1


def _discard(message: pb.AgentMessage) -> None:
    """The ``send`` used while no stream is up."""


@dataclass
class Job(Run):
    """One run of one job on this host (its process: the supervisor)."""

    dir: JobDir
    started: Started | None = None
    result: Result | None = None

    @property
    def key(self) -> Key:
        return (self.dir.job_id, self.dir.restarts)

    @property
    def job_id(self) -> int:
        return self.dir.job_id

    def running_message(self) -> pb.JobRunning:
        started = self.started
        return pb.JobRunning(
            job_id=self.dir.job_id,
            restarts=self.dir.restarts,
            start_time=started.start_time if started else 0,
            pid=started.pid if started else 0,
        )


def _key(job: Job) -> Key:
    return job.key


def _unfinished(job: Job) -> bool:
    return job.result is None


def done_message(key: Key, result: Result) -> pb.JobDone:
    return pb.JobDone(
        job_id=key[0],
        restarts=key[1],
        exit_status=result.exit_status,
        outcome=result.outcome,
        end_time=result.end_time,
        message=result.message,
        max_rss_kb=result.max_rss_kb,
        user_cpu_us=result.user_cpu_us,
        sys_cpu_us=result.sys_cpu_us,
    )


def launch_spec(
    msg: pb.LaunchJob, hostname: str, slurm_conf: str, devices: DeviceGuard | None = None
) -> LaunchSpec:
    """The supervisor's view of a LaunchJob, plus the node's own facts (and, with
    ``devices``, the GPU device files the job may not open: those of the node's GPUs
    its grant neither gives it nor shares with it; ``refused`` when they cannot be
    fenced here)."""
    cgroup: str = ""
    deny: list[list[int]] = []
    refused = ""
    gpus = granted(msg.grant)
    if devices is not None:
        try:
            cgroup, deny = devices.confine(msg.node, msg.job_id, BATCH, gpus)
        except LaunchError as exc:
            refused = str(exc)
    return LaunchSpec(
        job_id=msg.job_id,
        restarts=msg.restarts,
        node=msg.node,
        uid=msg.uid,
        gid=msg.gid,
        user=msg.user,
        argv=tuple(msg.argv),
        work_dir=msg.work_dir,
        std_out=msg.std_out,
        std_err=msg.std_err,
        std_in=msg.std_in,
        append=msg.append,
        environment=dict(msg.environment),
        time_limit=msg.time_limit,
        start_time=msg.start_time,
        kill_wait=msg.kill_wait,
        array_job_id=msg.array_job_id,
        array_task_id=msg.array_task_id if msg.HasField("array_task_id") else None,
        job_name=msg.job_name,
        signal_num=msg.signal_num,
        signal_time=msg.signal_time,
        signal_batch_only=msg.signal_batch_only,
        hostname=hostname,
        slurm_conf=slurm_conf,
        cgroup=cgroup,
        deny_devices=deny,
        cpu_ids=list(msg.cpu_ids),
        gpus=sorted(gpus),
        mps_gpu=mps_gpu(msg.grant),
        refused=refused,
    )


class JobTable:
    """Every job run on the served nodes that the controller has not yet forgotten."""

    def __init__(
        self,
        *,
        spool: Spool,
        hostnames: Mapping[str, str],
        slurm_conf: str,
        kill_wait: int,
        python: str,
        devices: DeviceGuard | None = None,
        mps: MpsServers | None = None,
        neuron: NeuronBinding | None = None,
    ) -> None:
        self.spool = spool
        self.hostnames = dict(hostnames)  # served node name -> HOSTNAME for its jobs
        self.slurm_conf = slurm_conf
        self.kill_wait = kill_wait  # for terminate requests; the controller's Welcome updates it
        self.python = python
        self.devices = devices  # GPU isolation (None: none)
        self.mps = mps  # MPS servers for jobs with GPU shares (None: no MPS here)
        self.neuron = neuron  # NeuronCores for jobs on Neuron nodes (None: none served)
        self.mig: dict[str, dict[int, str]] = {}  # per node, MIG instances' UUIDs by index
        self.supervisor_env = supervisor_environment()
        self.zygote = Zygote(spool.root(), python, self.supervisor_env)
        self.steps = StepTable(
            spool=spool,
            hostnames=hostnames,
            python=python,
            env=self.supervisor_env,
            zygote=self.zygote,
            devices=devices,
            mps=mps,
            neuron=neuron,
            mig=self.mig,
        )
        self._jobs: dict[Key, Job] = {}
        self._live: dict[int, dict[int, Job]] = {}  # job_id -> restarts -> unfinished run
        self._rejected: dict[Key, pb.JobDone] = {}  # launches refused without a job directory
        self._watch: Watch[Key, Job] = Watch(self._check, _key, _unfinished)
        self._send: Send = _discard

    # ------------------------------------------------------------ the stream

    def connect(self, send: Send) -> None:
        self._send = send
        self.steps.connect(send)

    def disconnect(self) -> None:
        self._send = _discard
        self.steps.disconnect()

    def running(self) -> list[pb.JobRunning]:
        """Jobs alive on this host, for the hello.

        A job whose supervisor is still starting it is listed with pid 0 and
        start time 0, so the controller does not take it for lost.
        """
        return [job.running_message() for job in self._jobs.values() if job.result is None]

    def unacked(self) -> list[pb.JobDone]:
        """Every JobDone the controller has not acknowledged yet."""
        done = [done_message(k, j.result) for k, j in self._jobs.items() if j.result is not None]
        return done + list(self._rejected.values())

    # ------------------------------------------------------------ start-up

    def recover(self) -> None:
        """Adopt the job directories left by a previous agent process."""
        for node in self.hostnames:
            self.spool.prepare(node)
            for jobdir in self.spool.jobs(node):
                job = Job(dir=jobdir, pid=jobdir.read_supervisor_pid())
                phase = jobdir.phase()
                if phase is Phase.DONE:
                    job.result = jobdir.read_result()
                elif phase is Phase.LOST and jobdir.read_started() is None:
                    # The previous agent died mid-launch: nothing ran. Forget
                    # it; the controller, not seeing it in the hello, sends the
                    # launch again.
                    jobdir.delete()
                    log.info("job_id=%d was never started; awaiting its launch again", job.job_id)
                    continue
                elif phase is Phase.LOST:
                    job.result = jobdir.settle_lost()
                    log.warning(
                        "job_id=%d supervisor gone without a result: %s",
                        job.job_id,
                        job.result.message,
                    )
                else:
                    job.started = jobdir.read_started()
                    self._watch.adopt(job)
                    spec = jobdir.read_launch()
                    if self.mps is not None and spec is not None:
                        self.mps.adopt(spec.node, spec.job_id, spec.mps_gpu)
                self._add(job)
                log.info("job_id=%d recovered as %s", job.job_id, phase.value)
        self.steps.recover()
        for job in self._jobs.values():
            if job.result is not None and job.job_id not in self._live:
                # The job ended while no agent watched: its steps end too.
                self.steps.terminate(job.job_id, self.kill_wait, "job ended")

    def _add(self, job: Job) -> None:
        self._jobs[job.key] = job
        if job.result is None:
            self._live.setdefault(job.job_id, {})[job.dir.restarts] = job

    def _latest(self, job_id: int) -> Job | None:
        """The most recent unfinished run of ``job_id`` (signals name no run)."""
        runs = self._live.get(job_id)
        return runs[max(runs)] if runs else None

    # ------------------------------------------------------------ controller requests

    def refuse(self, msg: pb.LaunchJob, reason: str) -> None:
        """A launch whose credential did not verify: nothing runs. A run this agent has
        is left alone; otherwise the controller hears of a failed launch."""
        key = (msg.job_id, msg.restarts)
        if key in self._jobs or key in self._rejected:
            log.warning("job_id=%d launch refused (%s): the run here is left alone", key[0], reason)
            return
        log.warning("job_id=%d launch refused: %s", msg.job_id, reason)
        self._reject(key, reason)

    def launch(self, msg: pb.LaunchJob) -> None:
        key = (msg.job_id, msg.restarts)
        known = self._jobs.get(key)
        if known is not None:
            self._repeat(known)
            return
        if key in self._rejected:
            self._send(pb.AgentMessage(done=self._rejected[key]))
            return
        hostname = self.hostnames.get(msg.node)
        if hostname is None:
            log.warning("job_id=%d launch for node %s not served here", msg.job_id, msg.node)
            self._reject(key, f"node {msg.node} is not served by this agent")
            return
        jobdir = self.spool.job_dir(msg.node, msg.job_id, msg.restarts)
        try:
            jobdir.create()
        except OSError as exc:
            log.error("job_id=%d cannot create %s: %s", msg.job_id, jobdir.path, exc)
            self._reject(key, f"cannot create job directory: {exc.strerror}")
            return
        job = Job(dir=jobdir)
        self._add(job)
        try:
            spec = launch_spec(msg, hostname, self.slurm_conf, self.devices)
            bind_gpus(
                spec.environment,
                msg.node,
                msg.job_id,
                msg.grant,
                self.mps,
                self.neuron,
                self.mig,
            )
            jobdir.write_launch(spec)
            jobdir.write_script(msg.script, msg.uid, msg.gid)
            proc = spawn_supervisor(jobdir, self.python, self.supervisor_env, self.zygote)
        except OSError as exc:
            result = self._failure(f"cannot start job supervisor: {exc}")
            with contextlib.suppress(OSError):
                jobdir.write_result(result)
            self._finish(job, result)
            return
        self._watch.attach(job, proc)
        log.info("job_id=%d launched on %s, supervisor pid %s", msg.job_id, msg.node, proc.pid)

    def _failure(self, message: str) -> Result:
        return Result(
            exit_status=LAUNCH_FAILED_STATUS,
            outcome="launch_failed",
            end_time=int(time.time()),
            message=message,
        )

    def _reject(self, key: Key, message: str) -> None:
        done = done_message(key, self._failure(message))
        self._rejected[key] = done
        self._send(pb.AgentMessage(done=done))

    def _repeat(self, job: Job) -> None:
        """Answer a launch we already had: the same report as the first time."""
        log.info("job_id=%d duplicate launch, answering again", job.job_id)
        if job.result is not None:
            self._send(pb.AgentMessage(done=done_message(job.key, job.result)))
        elif job.started is not None:
            self._send(pb.AgentMessage(running=job.running_message()))

    def signal(self, msg: pb.SignalJob) -> None:
        """Deliver a signal, by Slurm's rules for who receives it.

        * signal 0 (terminate: cancel, requeue, node failure): every
          unfinished run of the batch job here, and every step of the job
          here (TERM, then KILL after KillWait). SignalJob names no run: no
          run of the job should go on, older ones (stale after a requeue)
          included. With ``step_id``, that step alone.
        * ``batch_only``: the batch shell alone (of the current run).
        * ``full``: the batch script's process group and every step's tasks.
        * neither (``scancel --signal``): the tasks of the job's steps only,
          or of step ``step_id`` when it is set; not the batch script.
        """
        job = self._latest(msg.job_id)
        reason = msg.reason or "no reason"
        if msg.signal == 0 and msg.HasField("step_id"):
            self.steps.terminate(msg.job_id, self.kill_wait, reason, msg.step_id)
            return
        if msg.signal == 0:
            self.steps.terminate(msg.job_id, self.kill_wait, reason)
            if job is None:
                log.info("job_id=%d terminate: no batch job here", msg.job_id)
                return
            for run in list(self._live[msg.job_id].values()):
                log.info("job_id=%d terminate run %d (%s)", msg.job_id, run.dir.restarts, reason)
                run.dir.request_cancel(self.kill_wait)
                self._watch.poke(run)
            return
        if msg.batch_only or msg.full:
            self._signal_batch(job, msg)
        if not msg.batch_only:
            step_id = msg.step_id if msg.HasField("step_id") and not msg.full else None
            sent = self.steps.signal(msg.job_id, msg.signal, step_id)
            log.info(
                "job_id=%d signal %d to %d step(s)%s (%s)",
                msg.job_id,
                msg.signal,
                sent,
                "" if step_id is None else f" of step {step_id}",
                reason,
            )

    def _signal_batch(self, job: Job | None, msg: pb.SignalJob) -> None:
        """The batch shell (``batch_only``) or the batch script's process group (``full``)."""
        if job is None:
            log.info("job_id=%d signal %d: no batch job here", msg.job_id, msg.signal)
            return
        started = job.started or job.dir.read_started()
        if started is None:
            log.warning("job_id=%d signal %d dropped: not started yet", msg.job_id, msg.signal)
            return
        log.info(
            "job_id=%d signal %d to %s (%s)",
            msg.job_id,
            msg.signal,
            "batch shell" if msg.batch_only else "batch process group",
            msg.reason or "no reason",
        )
        try:
            if msg.batch_only:
                os.kill(started.pid, msg.signal)
            else:
                os.killpg(started.pid, msg.signal)
        except OSError as exc:
            log.warning("job_id=%d signal %d failed: %s", msg.job_id, msg.signal, exc)

    def update(self, msg: pb.UpdateJob) -> None:
        job = self._latest(msg.job_id)
        if job is None:
            log.info("job_id=%d time limit update: no running job here", msg.job_id)
            return
        log.info("job_id=%d time limit now %d", msg.job_id, msg.time_limit)
        job.dir.request_time_limit(msg.time_limit)
        self._watch.poke(job)

    def ack(self, msg: pb.AckDone) -> None:
        key = (msg.job_id, msg.restarts)
        if self._rejected.pop(key, None) is not None:
            return
        job = self._jobs.get(key)
        if job is None:
            log.debug("job_id=%d ack for an unknown run %d", msg.job_id, msg.restarts)
            return
        if job.result is None:
            log.warning("job_id=%d ack for a job still running, ignored", msg.job_id)
            return
        job.dir.delete()
        del self._jobs[key]
        log.debug("job_id=%d acknowledged, directory removed", msg.job_id)

    # ------------------------------------------------------------ watching

    def _check(self, job: Job) -> None:
        """Look at a job's directory and report whatever changed."""
        if job.result is not None:
            return
        phase = job.dir.phase()
        if job.started is None and phase is not Phase.LAUNCHING:
            job.started = job.dir.read_started()
            if job.started is not None:
                log.debug("job_id=%d running, pid %d", job.job_id, job.started.pid)
                self._send(pb.AgentMessage(running=job.running_message()))
        if phase is Phase.DONE:
            result = job.dir.read_result()
            if result is not None:
                self._finish(job, result)
        elif phase is Phase.LOST and job.notify_fd is None:
            result = job.dir.settle_lost()
            log.warning("job_id=%d supervisor died: %s", job.job_id, result.message)
            self._finish(job, result)

    def _finish(self, job: Job, result: Result) -> None:
        self.steps.settle(job.job_id)  # steps that ended first are reported first
        job.result = result
        self._watch.forget(job)
        runs = self._live.get(job.job_id, {})
        runs.pop(job.dir.restarts, None)
        if result.outcome == "launch_failed":  # the supervisor's reason, in the agent's log
            log.error("job_id=%d launch failed: %s", job.job_id, result.message)
        log.info(
            "job_id=%d done: outcome=%s status=%d", job.job_id, result.outcome, result.exit_status
        )
        self._send(pb.AgentMessage(done=done_message(job.key, result)))
        if not runs:
            self._live.pop(job.job_id, None)
            if self.mps is not None:
                self.mps.release(job.job_id)
            # Steps end with their job (as Slurm ends them when the batch script ends).
            self.steps.terminate(job.job_id, self.kill_wait, "job ended")

    async def poll_forever(self, interval: float = POLL_INTERVAL) -> None:
        """Check the jobs no pipe tells us about."""
        while True:
            await asyncio.sleep(interval)
            self.steps.poll()  # steps before jobs: a job's steps end before it does
            self._watch.poll(self._jobs)

    def close(self) -> None:
        """Stop watching pipes and the zygote (agent shutdown); the supervisors carry on."""
        self.zygote.close()
        self.steps.close()
        self._watch.close(self._jobs.values())
