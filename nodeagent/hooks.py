"""The node's site programs: Prolog and Epilog around a job, TaskProlog and
TaskEpilog around its tasks, HealthCheckProgram on a timer.

Where slurmd runs Prolog and Epilog, Corral's batch supervisor does: Prolog
before the script starts, Epilog once its processes are gone, both as root
with the job's variables (``SLURM_SCRIPT_CONTEXT=prolog_slurmd``), bounded by
PrologEpilogTimeout. The supervisor is a process of its own, so a slow
program holds up nothing but its job. A failure is written into the run's
result (``drain``), which the agent reports and the controller keeps until it
is acknowledged: a failed Prolog ends the run with outcome ``prolog_failed``
(the controller drains the node with reason "Prolog error" and requeues the
job held), a failed Epilog drains it with "Epilog error". Both are Slurm's
reasons. ``PrologFlags=Serial`` takes a lock on one file in the spool around
each program, so they run one at a time on the host.

TaskProlog runs as the job's user in the task's own process, after the user
switch and before the exec, and its output's ``export``/``unset``/``print``
lines change the task's environment and output (:func:`corral.hooks.task_setup`).
TaskEpilog runs as the user after each task: the batch script's in the supervisor
(:func:`after`), a step's in its runner once the tasks are over
(:func:`step_task_epilogs`), with the task's environment as the job gave it
(TaskProlog's exports changed only the task's own process, as in slurmstepd).

The health check (:class:`HealthCheck`) runs in the agent, off its event loop,
at start and every HealthCheckInterval while the served nodes are in one of
HealthCheckNodeState's states. Slurm leaves any action to the program itself
(``scontrol update ... state=drain``), which works here too; Corral also
drains a node whose program exits non-zero, with the program's first output
line as the reason, so that a failed check is never only a log line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping

from corral import hooks
from nodeagent.spool import LAUNCH_FAILED_STATUS, LaunchSpec, Result, SiteHooks, StepSpec

log = logging.getLogger(__name__)

PROLOG_ERROR = "Prolog error"
EPILOG_ERROR = "Epilog error"


def node_environment(spec: LaunchSpec, context: str) -> dict[str, str]:
    """A Prolog's or Epilog's variables on this node, as slurmd 22.05 sets them."""
    env = hooks.job_environment(spec.environment, context)
    env.update(
        SLURMD_NODENAME=spec.node,
        SLURM_JOB_WORK_DIR=spec.work_dir,
        SLURM_JOB_RESTART_COUNT=str(spec.restarts),
        SLURM_JOB_STDIN=spec.std_in or "/dev/null",
    )
    if spec.slurm_conf:
        env["SLURM_CONF"] = spec.slurm_conf
    return env


@contextlib.contextmanager
def _serial(site: SiteHooks) -> Iterator[None]:
    """Hold the host's hook lock for PrologFlags=Serial (nothing otherwise)."""
    if not site.lock:
        yield
        return
    fd = os.open(site.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def run_node_program(
    site: SiteHooks, program: str, env: dict[str, str], job_id: int, context: str
) -> hooks.HookResult:
    """Run a Prolog or Epilog as root (one at a time under PrologFlags=Serial), bounded
    by PrologEpilogTimeout; a failure is logged with its output."""
    with _serial(site):
        result = hooks.run(program, env, timeout=site.timeout)
    if not result.ok:
        log.error(
            "job_id=%d %s failed: %s output:%s",
            job_id,
            context.split("_")[0],
            result.describe(),
            result.output.strip(),
        )
    return result


def _run(spec: LaunchSpec, program: str, context: str, extra: dict[str, str]) -> hooks.HookResult:
    env = {**node_environment(spec, context), **extra}
    return run_node_program(spec.hooks, program, env, spec.job_id, context)


def prolog(spec: LaunchSpec, now: int, tell: Callable[[str], None]) -> Result | None:
    """Run the Prolog before the job's script: None when it succeeded (or there is
    none), else the run's result, which drains the node and requeues the job;
    ``tell`` writes slurmd's note of it into the job's output."""
    if not spec.hooks.prolog:
        return None
    result = _run(spec, spec.hooks.prolog, "prolog_slurmd", {})
    if result.ok:
        return None
    tell(f"Error running slurm prolog: {result.status >> 8 if result.status > 0 else 1}\n")
    return Result(
        exit_status=LAUNCH_FAILED_STATUS,
        outcome="prolog_failed",
        end_time=now,
        message=f"prolog failed: {result.describe()}",
        drain=PROLOG_ERROR,
    )


def after(spec: LaunchSpec, ended: Result, started: bool) -> Result:
    """Once the job is over: TaskEpilog (if its script ``started``), then the Epilog;
    ``ended`` with the node's drain reason added when the Epilog fails (a Prolog's
    reason, already there, is kept)."""
    site = spec.hooks
    if started and site.task_epilog:
        user = hooks.RunAs(spec.uid, spec.gid, spec.user)
        cwd = spec.work_dir if os.path.isdir(spec.work_dir) else "/"
        task_epilog(site, dict(spec.environment), user, cwd)
    if not site.epilog:
        return ended
    status = ended.exit_status if started else 0
    result = _run(spec, site.epilog, "epilog_slurmd", hooks.exit_variables(status))
    if result.ok or ended.drain:
        return ended
    return dataclasses.replace(ended, drain=EPILOG_ERROR)


def task_prolog(site: SiteHooks, env: dict[str, str], node: str) -> dict[str, str]:
    """In a task's process, already its user's: run TaskProlog and return the task's
    environment as its output says, its ``print`` lines written to standard output.
    When it fails the task does not run: slurmstepd's line on its standard error and
    exit status 1, as in Slurm 22.05."""
    result = hooks.run(site.task_prolog, env, cwd=os.getcwd())
    if not result.ok:
        code = result.status >> 8 if result.status > 0 and not result.status & 0x7F else 1
        os.write(2, f"slurmstepd-{node}: error: TaskProlog failed status={code}\n".encode())
        os._exit(1)
    setup = hooks.task_setup(result.output, env)
    for line in setup.printed:
        os.write(1, f"{line}\n".encode())
    return setup.environment


def task_epilog(site: SiteHooks, env: dict[str, str], user: hooks.RunAs, cwd: str) -> None:
    """Run TaskEpilog as the task's user once the task is over (a failure is logged)."""
    result = hooks.run(site.task_epilog, env, user=user, cwd=cwd)
    if not result.ok:
        log.warning("task epilog %s failed: %s", site.task_epilog, result.describe())


def step_task_epilogs(
    spec: StepSpec, env: Mapping[str, str], tasks: Iterable[tuple[int, int, int]]
) -> None:
    """Run TaskEpilog for each task of a step that started, given as (SLURM_PROCID,
    SLURM_LOCALID, pid): as the job's user, in the step's working directory (``/tmp``
    when it is gone, where the task went too), with the task's variables. Slurm runs
    it after each task's end; the runner runs them once all its tasks ended, so that
    a slow one never holds up the output of the others, and before the step's
    result, so that srun ends after them, as it does in Slurm."""
    user = hooks.RunAs(spec.uid, spec.gid, spec.user)
    cwd = spec.cwd if os.path.isdir(spec.cwd) else "/tmp"
    for task_id, local_id, pid in tasks:
        task_env = {
            **env,
            "SLURM_PROCID": str(task_id),
            "SLURM_LOCALID": str(local_id),
            "SLURM_TASK_PID": str(pid),
        }
        task_epilog(spec.hooks, task_env, user, cwd)
