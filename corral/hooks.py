"""Site programs run as Slurm runs them: one program (or a glob of them), an
environment, a time limit, the output kept; and what a TaskProlog's output asks.

Every hook of slurm.conf goes through :func:`run`: Prolog and Epilog in the
batch supervisor, TaskProlog and TaskEpilog beside the task, HealthCheckProgram
in the agent, PrologSlurmctld and EpilogSlurmctld in the controller and
SrunProlog and SrunEpilog in srun. The daemons with an event loop call
:func:`run_async`, which runs it in a worker thread. Like slurmd, the program
gets no PATH of its own, only the environment it is given; its standard
output and error are kept (a bounded tail) for the log and for a drain
reason. A program that overruns its time limit is killed with its whole
process group and counts as failed, as PrologEpilogTimeout says.

The job variables a Prolog or Epilog sees (:func:`job_environment`) are those
slurmd 22.05 gives them, picked from the batch script's environment, so that
the controller's PrologSlurmctld and the node's Prolog agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The most output kept from one program (its tail).
OUTPUT_LIMIT = 64 * 1024

#: The job variables a Prolog, Epilog or their controller twins get, taken from the
#: batch script's environment when it has them.
JOB_VARIABLES = (
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_JOB_USER",
    "SLURM_JOB_UID",
    "SLURM_JOB_GID",
    "SLURM_JOB_GROUP",
    "SLURM_JOB_NAME",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_GPUS",
    "SLURM_JOB_CONSTRAINTS",
    "SLURM_JOB_COMMENT",
    "SLURM_CLUSTER_NAME",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_CONF",
)


@dataclass(frozen=True, slots=True)
class HookResult:
    """How one run ended: ``status`` is the raw wait status (-1: it could not start)."""

    program: str
    status: int
    output: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 0 and not self.timed_out

    def describe(self) -> str:
        """slurmd's words for a failure (``rc:1``, ``signal:9``, ``timed out``)."""
        if self.timed_out:
            return "timed out"
        if self.status < 0:
            return "could not be run"
        if self.status & 0x7F:
            return f"signal:{self.status & 0x7F}"
        return f"rc:{self.status >> 8}"

    def first_line(self) -> str:
        """The first non-empty line of its output ("" if none)."""
        return next((line.strip() for line in self.output.splitlines() if line.strip()), "")


@dataclass(frozen=True, slots=True)
class RunAs:
    """The user a program runs as (the job's, for TaskProlog and SrunProlog)."""

    uid: int
    gid: int
    user: str


def programs(pattern: str) -> list[str]:
    """The programs ``pattern`` names: itself, or each match of a glob, sorted (as
    slurm.conf lets Prolog and Epilog be ``/etc/slurm/prolog.d/*``)."""
    if not glob.has_magic(pattern):
        return [pattern]
    return sorted(glob.glob(pattern))


def run(
    pattern: str,
    env: Mapping[str, str],
    *,
    timeout: float = 0,
    argv: Sequence[str] = (),
    user: RunAs | None = None,
    cwd: str = "/",
) -> HookResult:
    """Run every program of ``pattern`` in turn until one fails; the last run's result.

    ``timeout`` (seconds, 0: none) bounds each program; ``user`` is whom it runs
    as (None: this process's user). Never raises for the program's sake: one that
    cannot start is a failure with the reason as its output.
    """
    result = HookResult(pattern, 0)
    for program in programs(pattern):
        result = _run_one(program, env, timeout, argv, user, cwd)
        if not result.ok:
            break
    return result


async def run_async(
    pattern: str,
    env: Mapping[str, str],
    *,
    timeout: float = 0,
    argv: Sequence[str] = (),
    user: RunAs | None = None,
) -> HookResult:
    """:func:`run` in a worker thread, so that an event loop goes on meanwhile."""
    return await asyncio.to_thread(run, pattern, env, timeout=timeout, argv=argv, user=user)


def _run_one(
    program: str,
    env: Mapping[str, str],
    timeout: float,
    argv: Sequence[str],
    user: RunAs | None,
    cwd: str,
) -> HookResult:
    switch = user is not None and user.uid != os.geteuid()
    try:
        proc = subprocess.Popen(
            [program, *argv],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: a timeout kills all it started
            user=user.uid if switch and user else None,
            group=user.gid if switch and user else None,
            extra_groups=_groups(user) if switch and user else None,
        )
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return HookResult(program, -1, str(exc))
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout or None)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid)
        out, _ = proc.communicate()
    _kill_group(proc.pid)  # what it left running in its group goes with it
    status = _wait_status(proc.returncode)
    return HookResult(program, status, out[-OUTPUT_LIMIT:].decode(errors="replace"), timed_out)


def _groups(user: RunAs | None) -> list[int]:
    if user is None:
        return []
    try:
        return os.getgrouplist(user.user, user.gid)
    except OSError:
        return [user.gid]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _wait_status(returncode: int) -> int:
    """Popen's return code as a raw wait status (exit << 8 | signal)."""
    return -returncode if returncode < 0 else returncode << 8


def job_environment(job_env: Mapping[str, str], context: str) -> dict[str, str]:
    """A Prolog's or Epilog's environment: the job's variables from ``job_env`` and
    ``SLURM_SCRIPT_CONTEXT`` (``prolog_slurmd``, ``epilog_slurmctld``, ...)."""
    env = {name: job_env[name] for name in JOB_VARIABLES if job_env.get(name)}
    if "SLURM_JOB_UID" in env:
        env["SLURM_UID"] = env["SLURM_JOB_UID"]
    env["SLURM_SCRIPT_CONTEXT"] = context
    return env


def exit_variables(status: int) -> dict[str, str]:
    """An Epilog's view of how the job ended (raw wait status ``status``)."""
    return {
        "SLURM_JOB_EXIT_CODE": str(status),
        "SLURM_JOB_EXIT_CODE2": f"{status >> 8 & 0xFF}:{status & 0x7F}",
        "SLURM_JOB_DERIVED_EC": str(status >> 8 & 0xFF),
    }


@dataclass(frozen=True, slots=True)
class TaskSetup:
    """What a TaskProlog's output asks for: the task's environment, and lines to print."""

    environment: dict[str, str]
    printed: tuple[str, ...]


def task_setup(output: str, env: Mapping[str, str]) -> TaskSetup:
    """Apply a TaskProlog's output to ``env``, line by line in order, as slurmstepd does:
    ``export NAME=value`` sets (the value is the rest of the line), ``unset NAME``
    removes, ``print text`` is a line for the task's standard output; anything else
    is ignored."""
    result = dict(env)
    printed = []
    for line in output.splitlines():
        word, _, rest = line.partition(" ")
        if word == "export":
            name, eq, value = rest.lstrip().partition("=")
            if eq and name and " " not in name:
                result[name] = value
        elif word == "unset":
            result.pop(rest.strip(), None)
        elif word == "print":
            printed.append(rest)
    return TaskSetup(result, tuple(printed))
