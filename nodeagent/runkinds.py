"""The two kinds of run on a node: the batch script (step ``batch``) and a step's tasks.

The agent's one table (:mod:`nodeagent.runs`) launches, watches, signals and
recovers both alike; what differs between them is here, one small policy
each (:class:`BatchKind`, :class:`StepKind`), with what each is launched from
and reported with:

* **Durability.** The batch script's result is durable: its supervisor
  fsyncs it, the directory is kept until the controller's AckDone and a
  restarted agent reports it again (JobDone). A step's result is reported
  once (StepDone) and its directory deleted: srun has the tasks' statuses
  already, and nothing acknowledges a StepDone.
* **The messages.** LaunchJob, JobRunning and JobDone for the batch script;
  LaunchStep and StepDone for a step. The wire protocol is the same as
  before the table was one.
* **A run that never started** when the previous agent process stopped: a
  batch launch is forgotten (the controller, not seeing it in the hello,
  sends it again); a step's runner is started now (srun still waits for it).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from corral.ociconf import OciConf
from corral.wire import corral_pb2 as pb
from nodeagent import oci, watch
from nodeagent.containment import Containment
from nodeagent.devcgroup import BATCH as BATCH_CGROUP
from nodeagent.devcgroup import DeviceGuard
from nodeagent.gpubinding import granted, mps_gpu
from nodeagent.runas import LaunchError
from nodeagent.spool import (
    LAUNCH_FAILED_STATUS,
    NOT_STARTED,
    JobDir,
    LaunchSpec,
    Result,
    RunDir,
    Started,
    StepDir,
    StepResult,
    StepSpec,
)

#: The batch script's step name (Slurm's ``N.batch``).
BATCH = "batch"

#: (job id, step, instance): the step is a step id or :data:`BATCH`; the instance
#: is the batch run's restart count (a requeued job runs again under its id, and
#: a late AckDone of the previous run must not delete the new one) or a step's
#: node (one agent may serve several nodes of a step).
RunKey = tuple[int, int | str, int | str]


def batch_key(job_id: int, restarts: int) -> RunKey:
    return (job_id, BATCH, restarts)


def step_key(job_id: int, step_id: int, node: str) -> RunKey:
    return (job_id, step_id, node)


class Kind:
    """What differs between the kinds of run (see the module's docstring)."""

    #: Whether the result is kept until the controller acknowledges it.
    durable = False
    #: Whether a run the previous agent left unstarted is started now
    #: (rather than forgotten, for the controller to launch again).
    restarts_unstarted = False

    def ended(self, run: Run) -> pb.AgentMessage | None:
        """The report of the result in ``run``'s directory (None: none yet)."""
        raise NotImplementedError

    def lost(self, run: Run) -> pb.AgentMessage:
        """Record and report the end of a run whose process died without a result."""
        raise NotImplementedError

    def running(self, run: Run) -> pb.AgentMessage | None:
        """What is reported once the run has started (None: nothing)."""
        raise NotImplementedError


@dataclass(kw_only=True)
class Run(watch.Run):
    """One run on this host, from launch to report (its process: the supervisor or
    the step runner)."""

    kind: Kind
    key: RunKey
    tasks: tuple[int, ...] = ()  # a step's global task ids here
    identity: bytes = b""  # which LaunchStep this is (srun's key makes each one unique)
    started: Started | None = None
    done: pb.AgentMessage | None = None  # its report, once it has ended

    @property
    def job_id(self) -> int:
        return self.key[0]

    @property
    def is_batch(self) -> bool:
        return self.key[1] == BATCH

    @property
    def name(self) -> str:
        job, step, instance = self.key
        if step == BATCH:
            return f"{job}.batch (run {instance})"
        return f"{job}.{step} on {instance}"


def _jobdir(run: Run) -> JobDir:
    assert isinstance(run.dir, JobDir)
    return run.dir


def _stepdir(run: Run) -> StepDir:
    assert isinstance(run.dir, StepDir)
    return run.dir


class BatchKind(Kind):
    durable = True

    def ended(self, run: Run) -> pb.AgentMessage | None:
        result = _jobdir(run).read_result()
        return None if result is None else pb.AgentMessage(done=done_message(run.key, result))

    def lost(self, run: Run) -> pb.AgentMessage:
        return pb.AgentMessage(done=done_message(run.key, _jobdir(run).settle_lost()))

    def running(self, run: Run) -> pb.AgentMessage | None:
        return pb.AgentMessage(running=running_message(run))


class StepKind(Kind):
    restarts_unstarted = True

    def ended(self, run: Run) -> pb.AgentMessage | None:
        result = _stepdir(run).read_result()
        if result is None:
            return None
        return pb.AgentMessage(step_done=step_done(run.key, run.tasks, result))

    def lost(self, run: Run) -> pb.AgentMessage:
        result = _stepdir(run).settle_lost(len(run.tasks))
        return pb.AgentMessage(step_done=step_done(run.key, run.tasks, result))

    def running(self, run: Run) -> pb.AgentMessage | None:
        return None  # srun hears of it from the runner


BATCH_KIND = BatchKind()
STEP_KIND = StepKind()


def kind_of(rundir: RunDir) -> Kind:
    return BATCH_KIND if isinstance(rundir, JobDir) else STEP_KIND


# ---------------------------------------------------------------- the batch script's messages


def running_message(run: Run) -> pb.JobRunning:
    """JobRunning of a batch run (pid and start time 0 while its supervisor is still
    starting it, so that the controller does not take it for lost)."""
    started = run.started
    return pb.JobRunning(
        job_id=run.job_id,
        restarts=_jobdir(run).restarts,
        start_time=started.start_time if started else 0,
        pid=started.pid if started else 0,
    )


def done_message(key: RunKey, result: Result) -> pb.JobDone:
    assert isinstance(key[2], int)
    return pb.JobDone(
        job_id=key[0],
        restarts=key[2],
        exit_status=result.exit_status,
        outcome=result.outcome,
        end_time=result.end_time,
        message=result.message,
        max_rss_kb=result.max_rss_kb,
        user_cpu_us=result.user_cpu_us,
        sys_cpu_us=result.sys_cpu_us,
        drain=result.drain,
    )


def launch_failure(message: str) -> Result:
    """The result of a batch launch that ran nothing."""
    return Result(
        exit_status=LAUNCH_FAILED_STATUS,
        outcome="launch_failed",
        end_time=int(time.time()),
        message=message,
    )


def _fence(
    msg: pb.LaunchJob | pb.LaunchStep, name: str, gpus: set[int], devices: DeviceGuard | None
) -> tuple[str, list[list[int]], str]:
    """The device cgroup of run ``name`` of the launch's job and the GPU device files it may
    not open; or, when they cannot be fenced here, why the run must not start."""
    if devices is None:
        return "", [], ""
    try:
        cgroup, deny = devices.confine(msg.node, msg.job_id, name, gpus)
    except LaunchError as exc:
        return "", [], str(exc)
    return cgroup, deny, ""


def _contained(
    msg: pb.LaunchJob | pb.LaunchStep, leaf: str, containment: Containment | None
) -> dict[str, Any]:
    """The cgroups and limits of run ``leaf`` of the launch's job ({}: not contained): a
    step's own memory (srun --mem) limits its cgroup, the job's the job's cgroup."""
    if containment is None:
        return {}
    own = msg.step_mem_mib if isinstance(msg, pb.LaunchStep) else 0
    return containment.describe(
        msg.node, msg.job_id, leaf, msg.mem_mib, list(msg.cpu_ids), run_mem_mib=own
    )


def _container(
    msg: pb.LaunchJob | pb.LaunchStep,
    gpus: set[int],
    devices: DeviceGuard | None,
    contained: bool,
    conf: OciConf | None,
) -> tuple[dict[str, Any], str]:
    """The OCI container of the launch's run ({}: none; nodeagent.oci.describe) with
    the device files of its GPUs, or why it must not start: no oci.conf here."""
    if not msg.container:
        return {}, ""
    if conf is None:
        return {}, oci.NOT_CONFIGURED
    files: list[str] = []
    if devices is not None:
        for index, paths in devices.gpus.get(msg.node, ()):
            if index in gpus:
                files += [path for path in paths if path not in files]
    launch = oci.describe(msg.container, conf, files)
    launch["contained"] = contained
    return launch, ""


def launch_spec(
    msg: pb.LaunchJob,
    hostname: str,
    slurm_conf: str,
    devices: DeviceGuard | None = None,
    containment: Containment | None = None,
    oci_conf: OciConf | None = None,
) -> LaunchSpec:
    """The supervisor's view of a LaunchJob, plus the node's own facts (and, with
    ``devices``, the GPU device files the job may not open: those of the node's GPUs
    its grant neither gives it nor shares with it; ``refused`` when they cannot be
    fenced here; with ``containment``, its cgroups and limits; with ``oci_conf``,
    this node's oci.conf, the container it runs in)."""
    gpus = granted(msg.grant)
    cgroup, deny, refused = _fence(msg, BATCH_CGROUP, gpus, devices)
    container, no_container = _container(msg, gpus, devices, containment is not None, oci_conf)
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
        refused=refused or no_container,
        containment=_contained(msg, BATCH_CGROUP, containment),
        container=container,
    )


# ---------------------------------------------------------------- a step's messages


def step_spec(
    msg: pb.LaunchStep,
    devices: DeviceGuard | None = None,
    containment: Containment | None = None,
    oci_conf: OciConf | None = None,
) -> StepSpec:
    """The runner's view of a LaunchStep (with ``devices``, the GPU device files its
    tasks may not open: those of the node's GPUs its grant neither gives it nor
    shares with its job; ``refused`` when they cannot be fenced here; with
    ``containment``, its cgroups and limits; with ``oci_conf``, the container)."""
    gpus = granted(msg.grant)
    leaf = f"step_{msg.step_id}"
    cgroup, deny, refused = _fence(msg, leaf, gpus, devices)
    container, no_container = _container(msg, gpus, devices, containment is not None, oci_conf)
    return StepSpec(
        job_id=msg.job_id,
        step_id=msg.step_id,
        node=msg.node,
        uid=msg.uid,
        gid=msg.gid,
        user=msg.user,
        node_id=msg.node_id,
        tasks=tuple(msg.tasks),
        argv=_copied(msg),
        environment=_bcast_environment(msg),
        cwd=msg.cwd,
        io_host=msg.io_host,
        io_port=msg.io_port,
        io_key=msg.io_key.hex(),
        std_out=msg.std_out,
        std_err=msg.std_err,
        std_in=msg.std_in,
        append=msg.append,
        cpus=msg.cpus,
        time_limit=msg.time_limit,
        start_time=msg.start_time,
        kill_wait=msg.kill_wait,
        job_name=msg.job_name,
        array_job_id=msg.array_job_id,
        array_task_id=msg.array_task_id if msg.HasField("array_task_id") else None,
        ntasks=msg.ntasks,
        cgroup=cgroup,
        deny_devices=deny,
        refused=refused or no_container,
        cpu_ids=[] if msg.unpinned else list(msg.cpu_ids),
        gpus=sorted(gpus),
        unbuffered=msg.unbuffered,
        pty=msg.pty,
        mpi=msg.mpi,
        node_tasks=list(msg.node_tasks),
        containment=_contained(msg, leaf, containment),
        container=container,
        task_argv=_task_argv(msg),
        task_cpus=[] if msg.unpinned else [list(t.cpus) for t in msg.task_cpus],
        cpu_verbose=msg.cpu_bind_verbose,
        cpu_kind="none" if msg.unpinned else msg.cpu_bind_type,
        bcast=bool(msg.bcast_path),
    )


def _copied(msg: pb.LaunchStep) -> tuple[str, ...]:
    """The tasks' command line: under srun --bcast, the copy srun sends in place of the
    executable (Slurm's tasks see the copy's path in argv[0], as measured on 22.05)."""
    argv = tuple(msg.argv)
    if msg.bcast_path and argv:
        return (msg.bcast_path, *argv[1:])
    return argv


def _bcast_environment(msg: pb.LaunchStep) -> dict[str, str]:
    """The tasks' environment: srun --send-libs puts the copy's ``_libs`` directory
    first in LD_LIBRARY_PATH, as slurmstepd 22.05 does."""
    env = dict(msg.environment)
    if msg.bcast_path and msg.bcast_libs:
        libs = f"{msg.bcast_path}_libs"
        old = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = f"{libs}:{old}" if old else libs
    return env


def _task_argv(msg: pb.LaunchStep) -> list[list[str]]:
    """Each local task's command line under srun --multi-prog (srun checked the file
    against the step's tasks); [] without."""
    if not msg.multi_prog:
        return []
    from corral import multiprog  # only a --multi-prog step pays for it

    return multiprog.commands(msg.multi_prog, msg.ntasks, list(msg.tasks))


def step_done(key: RunKey, tasks: tuple[int, ...], result: StepResult) -> pb.StepDone:
    statuses = list(result.statuses[: len(tasks)])
    statuses += [NOT_STARTED] * (len(tasks) - len(statuses))
    assert isinstance(key[1], int) and isinstance(key[2], str)
    return pb.StepDone(
        job_id=key[0],
        step_id=key[1],
        node=key[2],
        tasks=tasks,
        statuses=statuses,
        start_time=result.start_time,
        end_time=result.end_time,
        max_rss_kb=result.max_rss_kb,
        user_cpu_us=result.user_cpu_us,
        sys_cpu_us=result.sys_cpu_us,
        message=result.message,
        sum_rss_kb=result.sum_rss_kb,
        oom_kills=result.oom_kills,
    )


def launch_identity(msg: pb.LaunchStep) -> bytes:
    """Which launch ``msg`` is: a repeat of it is the same message."""
    return hashlib.sha256(msg.SerializeToString(deterministic=True)).digest()


def step_refusal(msg: pb.LaunchStep, message: str) -> pb.AgentMessage:
    """The StepDone of a launch that ran nothing."""
    now = int(time.time())
    result = StepResult(statuses=(), start_time=now, end_time=now, message=message)
    key = step_key(msg.job_id, msg.step_id, msg.node)
    return pb.AgentMessage(step_done=step_done(key, tuple(msg.tasks), result))
