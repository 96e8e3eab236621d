"""The batch script's run (step ``batch``): runs one batch script and records how it ended.

``python -m nodeagent.supervisor JOBDIR [--lock-fd N] [--notify-fd N]`` plays
slurmstepd's part for a batch job. The agent starts it in a session of its
own with SIGUSR1 and SIGCHLD blocked, so that neither killing nor restarting
the agent touches the job, and a request signalled before Python is up is
kept pending rather than killing it; usually it is forked, in that same
state, by the zygote (``SPOOL --zygote-fd N``, see :mod:`nodeagent.zygote`),
which saves the interpreter's start-up. Everything it needs is in the job
directory (see :mod:`nodeagent.spool`); everything it reports goes back there:

* ``started`` once the script has been exec'd (plus a line on the notify
  pipe, the agent's cue to look);
* ``result``, written atomically and fsync'ed just before exiting.

Its body is the one process model of every run (:class:`~nodeagent.runner.Runner`,
the step runner's too): :class:`BatchRun` adds what only the batch script has,
its exec as the job's user with its own environment, its output files,
``--signal=B:``, ``time_limit`` (a new limit from ``scontrol update``), read
with ``cancel`` on every SIGUSR1, and a failed launch's result and note in the
user's error file. Signals other than terminate go straight from the agent
to the job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import time

from corral import configless, filepattern, oomscore
from nodeagent import cgroups, devcgroup, runas
from nodeagent.ending import use_of
from nodeagent.runas import LaunchError, OutputError
from nodeagent.runner import KILL_TASK_FAILED, WATCHED, Runner, Task, child_signals
from nodeagent.spool import (
    LAUNCH_FAILED_STATUS,
    OUTPUT_FAILED_STATUS,
    SCRIPT,
    JobDir,
    LaunchSpec,
    Result,
    Started,
)
from nodeagent.startargs import start

# Importing typing costs every job milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

log = logging.getLogger(__name__)

#: The outcome of a run whose processes the OOM killer killed (JobDone.outcome).
OUT_OF_MEMORY = "out_of_memory"

#: The exec child's exit code when the job's output or error file cannot be opened
#: (any other launch failure exits 127): how the parent tells the two apart.
_OUTPUT_FAILED_EXIT = 53


def job_environment(spec: LaunchSpec, task_pid: int) -> dict[str, str]:
    """The controller's environment plus what only the node knows."""
    env = dict(spec.environment)
    env["SLURMD_NODENAME"] = spec.node
    env["SLURM_TASK_PID"] = str(task_pid)
    env["HOSTNAME"] = spec.hostname or spec.node
    env["ENVIRONMENT"] = "BATCH"
    if spec.slurm_conf:
        env["SLURM_CONF"] = spec.slurm_conf
    return env


def expand(spec: LaunchSpec, pattern: str) -> str:
    """Expand a %-pattern with this job's fields (the batch step on node 0)."""
    return filepattern.expand(
        pattern,
        job_id=spec.job_id,
        array_job_id=spec.array_job_id,
        array_task_id=spec.array_task_id,
        user=spec.user,
        job_name=spec.job_name,
        node=spec.node,
        restarts=spec.restarts,
    )


def default_output(spec: LaunchSpec) -> str:
    """sbatch's default output name, used when the controller sent none."""
    return "slurm-%A_%a.out" if spec.array_task_id is not None else "slurm-%j.out"


# ---------------------------------------------------------------- the child


def _enter_work_dir(spec: LaunchSpec) -> str:
    """chdir to the working directory, or to /tmp with a note for stderr."""
    error = runas.enter_work_dir(spec.work_dir)
    if error is None:
        return ""
    return (
        f"corral: job {spec.job_id}: cannot enter working directory {spec.work_dir} "
        f"({error.strerror}); running in /tmp instead\n"
    )


def _redirect(spec: LaunchSpec) -> None:
    """Point fds 0, 1 and 2 at the job's files (relative to the current directory)."""
    out_path = expand(spec, spec.std_out or default_output(spec))
    err_path = expand(spec, spec.std_err) if spec.std_err else out_path
    in_path = expand(spec, spec.std_in) if spec.std_in else "/dev/null"
    out_fd = runas.open_output(out_path, spec.append)
    if os.path.abspath(err_path) == os.path.abspath(out_path):
        err_fd = out_fd
    else:
        err_fd = runas.open_output(err_path, spec.append)
    in_fd = runas.open_input(in_path)
    os.dup2(in_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)


def _exec_job(run: BatchRun, script: str, error_fd: int) -> NoReturn:
    """In the forked child: become the job and exec the script; never returns.

    Any failure is written to ``error_fd`` (close-on-exec, so a successful
    exec shows up in the parent as end-of-file with nothing read).
    """
    spec = run.spec
    message = "unknown launch failure"
    code = 127
    try:
        os.setpgid(0, 0)
        confined = run.enter_cgroups(bool(spec.cgroup))
        runas.pin_cpus(spec.cpu_ids)
        child_signals()
        oomscore.unprotect()
        runas.apply_umask(spec.environment)
        if spec.container:
            from nodeagent import oci  # loaded only for a job in a container

            oci.make_bundle_dir(run.jobdir.path, 0, spec.uid, spec.gid)
        runas.become_user(spec.uid, spec.gid, spec.user)
        note = _enter_work_dir(spec)
        _redirect(spec)
        if note:
            os.write(2, note.encode())
        env = job_environment(spec, os.getpid())
        if spec.hooks.task_prolog:
            from nodeagent import hooks  # loaded only where a site program is set

            env = hooks.task_prolog(spec.hooks, env, spec.node)
        if confined:
            devcgroup.local_binding(env, set(spec.gpus))
        if spec.container:
            oci.exec_container(
                spec.container,
                run_dir=run.jobdir.path,
                args=[script, *spec.argv],
                env=env,
                cwd=os.getcwd(),
                ids=(spec.uid, spec.gid, spec.user),
                job_id=spec.job_id,
                node=spec.node,
                step=oci.BATCH_STEP,
                task=0,
            )
        os.execve(script, [script, *spec.argv], env)
    except OutputError as exc:
        message, code = str(exc), _OUTPUT_FAILED_EXIT
    except LaunchError as exc:
        message = str(exc)
    except OSError as exc:
        message = f"cannot execute {script}: {exc.strerror}"
        if spec.container:
            message = f"container launch failed: {exc.filename or ''}: {exc.strerror}"
    except BaseException as exc:
        message = f"{type(exc).__name__}: {exc}"
    try:
        os.write(error_fd, message.encode())
    finally:
        os._exit(code)


def _tell_user(spec: LaunchSpec, text: str) -> None:
    """Append ``text`` to the job's error file, as its user, if that can be done:
    where the user looks when a job failed to launch. Done in a child, since the
    user switch is for good; a user that cannot be become has no file written."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            runas.become_user(spec.uid, spec.gid, spec.user)
            runas.enter_work_dir(spec.work_dir)
            path = expand(spec, spec.std_err or spec.std_out or default_output(spec))
            fd = runas.open_output(path, append=True)
            os.write(fd, text.encode())
            status = 0
        finally:  # whatever failed, the log has the reason already
            os._exit(status)
    os.waitpid(pid, 0)


# ---------------------------------------------------------------- the parent


class BatchRun(Runner):
    """One run of one job's batch script, from fork to result: the batch kind's parts
    of a run's process (the script exec'd as the one task of step ``batch``, its
    output files, ``--signal=B:``, time-limit updates, the launch failure and the
    user's note of it), the rest being the :class:`~nodeagent.runner.Runner`'s."""

    def __init__(self, jobdir: JobDir, spec: LaunchSpec, notify_fd: int | None) -> None:
        super().__init__(jobdir, notify_fd, f"job_id={spec.job_id}")
        self.jobdir = jobdir
        self.spec = spec
        self.tasks = [Task(0, 0)]
        self.signal_sent = False

    def _result(self, status: int, outcome: str, message: str = "", usage: Any = None) -> Result:
        if usage is None:
            return Result(status, outcome, int(time.time()), message)
        use = use_of([usage])
        return Result(
            exit_status=status,
            outcome=outcome,
            end_time=int(time.time()),
            message=message,
            max_rss_kb=use.max_rss_kb,
            user_cpu_us=use.user_cpu_us,
            sys_cpu_us=use.sys_cpu_us,
        )

    def run(self) -> Result:
        spec = self.spec
        self._catch_signals()
        if self.jobdir.read_cancel() is not None:
            log.info("job_id=%d cancelled before start", spec.job_id)
            return self._result(0, "cancelled", "cancelled before start")
        if spec.refused:
            return self._launch_failed(spec.refused)
        if spec.hooks.prolog:
            from nodeagent import hooks  # loaded only where a site program is set

            failed = hooks.prolog(spec, int(time.time()), lambda text: _tell_user(spec, text))
            if failed is not None:
                return failed
        refused = self._contain(spec.containment, spec.cgroup, spec.deny_devices)
        if refused:
            return self._launch_failed(refused)
        published = self._publish()
        try:
            return self._run_script()
        finally:
            if published:
                configless.withdraw(published, spec.job_id)

    def _publish(self) -> str:
        """Tell the clients the script starts where to find slurm.conf without
        SLURM_CONF (``corral.configless``); the entry's path, "" if it cannot be made
        (the job still runs: only a client that lost SLURM_CONF misses it)."""
        spec = self.spec
        if not spec.slurm_conf:
            return ""
        cluster = spec.environment.get("SLURM_CLUSTER_NAME", "")
        try:
            return configless.publish(os.getsid(0), spec.job_id, cluster, spec.slurm_conf)
        except OSError as exc:
            log.warning("job_id=%d no configless entry: %s", spec.job_id, exc)
            return ""

    def _run_script(self) -> Result:
        """Fork the script as the job's user, follow it to its end, say how it ended."""
        spec = self.spec
        script = self.jobdir.file(SCRIPT)
        error_r, error_w = os.pipe()
        try:
            pid = self._fork(lambda: _exec_job(self, script, error_w))
        finally:
            os.close(error_w)
        start_time = int(time.time())
        chunks = []
        while chunk := os.read(error_r, 4096):
            chunks.append(chunk)
        os.close(error_r)
        if chunks:
            _, status = os.waitpid(pid, 0)
            message = b"".join(chunks).decode(errors="replace")
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _OUTPUT_FAILED_EXIT:
                return self._output_failed(message)
            return self._launch_failed(message)
        task = self.tasks[0]
        self.pgid = task.pid = pid
        self.by_pid[pid] = task
        self.started_at = spec.start_time or start_time
        self.jobdir.write_started(Started(pid=pid, start_time=start_time, tasks=((pid, 0, 0),)))
        self._notify(b"started\n")
        log.info("job_id=%d started pid=%d", spec.job_id, pid)
        self._check_requests()
        self._reap()
        self._loop()
        return self._finish()

    def _launch_failed(self, message: str) -> Result:
        """The script never ran: say why in the log and the job's error file."""
        log.error("job_id=%d launch failed: %s", self.spec.job_id, message)
        _tell_user(self.spec, f"corral: error: job {self.spec.job_id}: launch failed: {message}\n")
        return self._result(LAUNCH_FAILED_STATUS, "launch_failed", message)

    def _output_failed(self, message: str) -> Result:
        """The job's output or error file could not be opened: as Slurm, a launch
        failure with its own exit code (ExitCode 0:53), and nothing written for
        the user, since where they would look is what could not be opened."""
        log.error("job_id=%d launch failed: %s", self.spec.job_id, message)
        return self._result(OUTPUT_FAILED_STATUS, "launch_failed", message)

    def _requests(self) -> None:
        """A new time limit (``scontrol update``), else the launch's."""
        limit = self.jobdir.read_time_limit()
        limit = self.spec.time_limit if limit is None else limit
        self.deadline = None if limit < 0 else self.started_at + limit * 60

    def _timers(self, now: float) -> list[float]:
        """--signal=B:SIG@T is the batch shell's; without B: the controller sends it
        to the job's steps, wherever they run (as slurmctld does)."""
        spec = self.spec
        deadline = self.limit_at()
        if deadline is None or not spec.signal_num or not spec.signal_batch_only:
            return []
        if self.signal_sent:
            return []
        signal_at = deadline - spec.signal_time
        if now < signal_at:
            return [signal_at]
        log.info("job_id=%d sending signal %d to the batch shell", spec.job_id, spec.signal_num)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pgid, spec.signal_num)
        self.signal_sent = True
        return []

    def _time_up(self) -> None:
        self._end("timeout", "time limit reached", self.spec.kill_wait)

    def _cancel(self, kill_wait: int) -> None:
        self._end("cancelled", "cancelled by the controller", kill_wait)

    def _end(self, outcome: str, message: str, kill_wait: int) -> None:
        """Start ending the job: CONT and TERM now, KILL after ``kill_wait``."""
        if self._begin_end(outcome, kill_wait):
            log.info("job_id=%d terminating: %s", self.spec.job_id, message)
            self.message = message

    def _finish(self) -> Result:
        self._end_group()
        if self.spec.container:
            from nodeagent import oci

            spec = self.spec
            oci.delete_after_run(
                spec.container,
                run_dir=self.jobdir.path,
                ids=(spec.uid, spec.gid, spec.user),
                job_id=spec.job_id,
                node=spec.node,
                step=oci.BATCH_STEP,
                tasks=[0],
                groups=None,
            )
        task = self.tasks[0]
        status = task.status or 0
        outcome = self.ending.why or "exited"
        kills = self.oom_kills()
        if kills:
            # Slurm's words, in the job's error file (slurmstepd writes them there).
            _tell_user(self.spec, cgroups.oom_message(kills, f"{self.spec.job_id}.batch"))
            if outcome == "exited":
                outcome = OUT_OF_MEMORY
        log.info("job_id=%d ended status=%d outcome=%s", self.spec.job_id, status, outcome)
        result = self._result(status, outcome, self.message, task.usage)
        if self.left_behind:  # the node is drained, as slurmd has it drained
            result = dataclasses.replace(result, drain=KILL_TASK_FAILED)
        return result


USAGE = (
    "usage: python -m nodeagent.supervisor JOBDIR [--lock-fd N] [--notify-fd N]\n"
    "       python -m nodeagent.supervisor SPOOL --zygote-fd N"
)


def supervise(path: str, lock_fd: int | None, notify_fd: int | None) -> int:
    """Run the job in ``path`` to its end and record how it ended.

    The same in a process started for the job and in a child of the zygote.
    """
    jobdir = JobDir(os.path.abspath(path))
    if not jobdir.claim(lock_fd, notify_fd):
        log.error("job_id=%d another supervisor holds %s", jobdir.job_id, jobdir.path)
        return 1
    spec = jobdir.read_launch()
    if spec is None:
        result = Result(
            exit_status=LAUNCH_FAILED_STATUS,
            outcome="launch_failed",
            end_time=int(time.time()),
            message="launch description missing",
        )
        jobdir.write_result(result)
        return 0
    run = BatchRun(jobdir, spec, notify_fd)
    try:
        result = run.run()
        if spec.hooks.epilog or spec.hooks.task_epilog:
            from nodeagent import hooks  # loaded only where a site program is set

            result = hooks.after(spec, result, started=bool(run.pgid))
        jobdir.write_result(result)
    finally:
        run.release()
    return 0


def main(argv: list[str] | None = None) -> int:
    path, lock_fd, notify_fd, zygote_fd = start(argv, USAGE, WATCHED, "supervisor")
    if zygote_fd is not None:
        # Imported here, so that a supervisor started on its own never loads
        # socket nor the step runner; the zygote has both ready for its children,
        # and ctypes too (device isolation), which the others load when they need it.
        from nodeagent import steprunner, zygote

        devcgroup.preload()
        return zygote.serve(zygote_fd, os.path.abspath(path), supervise, steprunner.run_step)
    return supervise(path, lock_fd, notify_fd)


if __name__ == "__main__":
    sys.exit(main())
