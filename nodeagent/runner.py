"""The one process model of a run on a node: what the batch script's and a step's share.

A run's process (the supervisor of a batch script, :mod:`nodeagent.supervisor`;
the runner of a step's tasks, :mod:`nodeagent.steprunner`) is started detached
from the agent, the run directory's lock held, SIGUSR1 and SIGCHLD blocked
(:mod:`nodeagent.process`). Its body is a :class:`Runner`: it forks its tasks
(the batch script is the one task of step ``batch``) into one process group,
then one single-threaded loop (selectors; signals arrive through
``signal.set_wakeup_fd``) reaps them with wait4, acts on the agent's requests
(files in the directory, then SIGUSR1: ``cancel`` and whatever the kind reads
besides), ends them at the time limit or on a cancel through the one kill
sequence (:class:`~nodeagent.ending.KillSequence`: CONT and TERM, KILL after
the kill wait) and, once every task has ended, SIGKILLs what is left of the
group. What only one kind does (srun's connection and the tasks' pipes; the
batch script's files, ``--signal=B:`` and time-limit updates) is its subclass's.

A suspension is slurmstepd's: SIGTSTP to the tasks now, so that they can
prepare (MPI daemons stop their ranks), and the stop (the cgroup frozen, else
SIGSTOP) once the grace the agent passed on (PreemptParameters=
suspend_grace_time) is over, a timer of the loop like the KILL after the kill
wait; a resume during the grace cancels the stop. A resume sends SIGCONT as
well as thawing: a task that took SIGTSTP's default action is stopped by it.

The run's cgroups (:mod:`nodeagent.cgroups`: containment and limits, with the
GPU fence of :mod:`nodeagent.devcgroup` on the v2 one) are made here before the
first fork, joined by each task before it execs, signalled with the group, and
emptied with SIGKILL and removed at the end: a process that left the group
(setsid, a double fork) goes with the rest.

Standard library only (besides :mod:`nodeagent.ending`, :mod:`nodeagent.devcgroup`,
:mod:`nodeagent.cgroups` and :mod:`nodeagent.runas`): it runs once per job and step.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import signal
import time

from nodeagent import cgroups, devcgroup, runas
from nodeagent.ending import KillSequence, kill_group
from nodeagent.runas import LaunchError
from nodeagent.spool import RunDir

# Importing typing costs every run milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

#: Signals a run's process is woken by: a task ended; the agent wrote a request.
WATCHED = {signal.SIGCHLD, signal.SIGUSR1}

log = logging.getLogger(__name__)

WAKE = "wake"
#: Slurm's reason for a node whose job's processes outlived their kill.
KILL_TASK_FAILED = "Kill task failed"


class Task:
    """One local task: where it stands and the runner's end of its pipes."""

    def __init__(self, index: int, task_id: int) -> None:
        self.index = index  # SLURM_LOCALID
        self.task_id = task_id  # SLURM_PROCID, the id in frames
        self.pid = 0
        self.status: int | None = None
        self.usage: Any = None
        self.pipes: dict[int, int] = {}  # read end -> OUT or ERR


def child_signals() -> None:
    """In a forked task: the signals as a fresh process has them (unblocked), none
    of the run loop's handlers left."""
    signal.set_wakeup_fd(-1)
    for sig in (*WATCHED, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    runas.reset_signals()


def _noted(signum: int, frame: object) -> None:
    """The Python-level handler; the wakeup fd is what the loop watches."""


class Runner:
    """One run's process body, from its description to its result (see the module)."""

    def __init__(self, rundir: RunDir, notify_fd: int | None, name: str) -> None:
        self.rundir = rundir
        self.notify_fd = notify_fd
        self.name = name  # for the log
        self.tasks: list[Task] = []
        self.by_pid: dict[int, Task] = {}
        self.sel = selectors.DefaultSelector()
        self.pgid = 0
        self.started_at = 0.0
        self.deadline: float | None = None
        self.ending = KillSequence(self._signal)  # why and until when the tasks are being ended
        self.cancelled = False
        self.message = ""
        self.wake_r = -1
        self.cgroup: str | None = None  # the device cgroup the tasks run in, when not contained
        self.contained: cgroups.RunCgroups | None = None  # the tasks' cgroups
        self.left_behind: list[int] = []  # what the final kill could not end
        self.suspended = False  # scontrol suspend: its tasks are stopped, its limit paused
        self.stop_at: float | None = None  # suspended, in its grace: when its tasks stop
        self.frozen = False  # suspended by freezing its cgroup (else by SIGSTOP)
        self.suspended_secs = 0  # the job's time suspended in all: the limit moves by it
        self.holding = False  # inside signals_held: every signal blocked

    # ------------------------------------------------------------ what a kind adds

    def _requests(self) -> None:
        """Act on the kind's own requests in the directory (besides ``cancel``)."""

    def _cancel(self, kill_wait: int) -> None:
        """The agent asked for the run's end (cancel, requeue, node failure)."""
        raise NotImplementedError

    def _time_up(self) -> None:
        """The time limit is reached."""
        raise NotImplementedError

    def _timers(self, now: float) -> list[float]:
        """Do what else is due at ``now``; when something next falls due."""
        return []

    def _event(self, key: selectors.SelectorKey, mask: int) -> None:
        """A descriptor of the kind's own is ready."""

    def _exited(self, task: Task) -> None:
        """``task`` has ended (its status and use are set)."""

    # ------------------------------------------------------------ start

    def _catch_signals(self) -> None:
        """Turn SIGCHLD and SIGUSR1 (blocked until now) into bytes on a pipe."""
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for sig in WATCHED:
            signal.signal(sig, _noted)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, WATCHED)
        self.sel.register(self.wake_r, selectors.EVENT_READ, WAKE)

    @contextlib.contextmanager
    def signals_held(self) -> Iterator[None]:
        """Every signal blocked while the body forks tasks (:meth:`_fork`), then the
        mask as it was: what arrived meanwhile acts then.

        One mask change around a burst of forks rather than two per fork: each
        ``signal.pthread_sigmask`` call turns every signal of its sets into an
        enum member, about 0.2 ms a call here, which a step of 250 tasks on a
        node paid 500 times.
        """
        if self.holding:
            yield
            return
        saved_mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
            signal.pthread_sigmask(signal.SIG_SETMASK, saved_mask)

    def _fork(self, child: Callable[[], object]) -> int:
        """Fork a task that runs ``child`` (which must not return); its pid.

        Every signal stays blocked from fork until the child has reset its
        handlers (:func:`child_signals`): a signal for the tasks must not
        reach one of Python's.
        """
        with self.signals_held():
            pid = os.fork()
            if pid == 0:
                child()
                os._exit(1)
        return pid

    def _contain(self, containment: dict[str, Any], device_cgroup: str, deny: Any) -> str:
        """Make the run's cgroups and fence its GPUs (``deny``; ``device_cgroup``: the
        cgroup to fence them in when the run is not contained); why the run must not
        start, or "" when it may."""
        if containment:
            run = cgroups.RunCgroups(containment)
            try:
                run.make()
            except OSError as exc:
                return f"cannot create the job's cgroups: {exc}"
            self.contained = run
            with contextlib.suppress(OSError):
                run.record(self.rundir.path)
            if device_cgroup:
                path = run.unified()
                if path is None:
                    return f"cannot fence GPUs: no cgroup v2 hierarchy for {run.rel}"
                try:
                    devcgroup.fence(path, devcgroup.rules(deny))
                except LaunchError as exc:
                    return str(exc)
            return ""
        if device_cgroup:
            try:
                self.cgroup = devcgroup.prepare(device_cgroup, devcgroup.rules(deny))
            except LaunchError as exc:
                return str(exc)
        return ""

    def enter_cgroups(self, fenced: bool) -> bool:
        """In a forked task, still root: join the run's cgroups; whether its GPUs are
        fenced (``fenced``: the launch has GPUs to refuse). :class:`LaunchError` when
        it cannot join: it must not exec uncontained."""
        if self.contained is None:
            return devcgroup.enter(self.cgroup)
        try:
            self.contained.join()
        except OSError as exc:
            raise LaunchError(f"cannot join the job's cgroups: {exc}") from None
        return fenced

    def _notify(self, line: bytes) -> None:
        """Tell the agent (if it is still there) to look at the directory."""
        if self.notify_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.notify_fd, line)

    # ------------------------------------------------------------ the loop

    def _running(self) -> bool:
        return any(task.status is None for task in self.tasks)

    def _loop(self) -> None:
        while self._running():
            timeout = self._act(time.time())
            for key, mask in self.sel.select(timeout):
                if key.data == WAKE:
                    self._woken()
                else:
                    self._event(key, mask)

    def _woken(self) -> None:
        try:
            signals = os.read(self.wake_r, 256)
        except BlockingIOError:
            return
        if signal.SIGUSR1 in signals:
            self._check_requests()
        if signal.SIGCHLD in signals:
            self._reap()

    def _act(self, now: float) -> float | None:
        """Do what is due at ``now`` (time limit, KILL, the kind's timers); seconds
        until the next, if any."""
        wakes = []
        deadline = self.limit_at()
        if deadline is not None and not self.ending.why and not self.suspended:
            if now >= deadline:
                self._time_up()
            else:
                wakes.append(deadline)
        if not self.ending.why and not self.suspended:
            wakes += self._timers(now)
        if self.stop_at is not None:
            if now >= self.stop_at:
                self._stop()
            else:
                wakes.append(self.stop_at)
        if self.ending.kill_at is not None and now >= self.ending.kill_at:
            log.info("%s: kill wait over, SIGKILL", self.name)
        kill_at = self.ending.due(now)
        if kill_at is not None:
            wakes.append(kill_at)
        return max(0.0, min(wakes) - now) if wakes else None

    def limit_at(self) -> float | None:
        """When the time limit ends the run: the kind's deadline, moved on by the
        time the job spent suspended (None: no limit)."""
        return None if self.deadline is None else self.deadline + self.suspended_secs

    def _check_requests(self) -> None:
        """The agent's requests: the kind's, a suspension or resumption (``suspend``)
        and a terminate (``cancel``).

        Requests made before the tasks started are acted on once they have.
        """
        self._requests()
        asked = self.rundir.read_suspend()
        if asked is not None and not self.ending.why:
            self._suspend(*asked)
        kill_wait = self.rundir.read_cancel()
        if kill_wait is not None and not self.cancelled:
            self.cancelled = True
            self._cancel(kill_wait)

    def _suspend(self, suspended: bool, suspended_secs: int, grace: int) -> None:
        """Suspend the tasks (SIGTSTP now, stopped ``grace`` seconds later) or let
        them continue (scontrol suspend, resume; a preemption's or the gang
        scheduler's). A repeated request (the controller says it again to an agent
        that reconnects) changes nothing."""
        self.suspended_secs = suspended_secs
        if suspended == self.suspended or not self.pgid or not self._running():
            return
        self.suspended = suspended
        if suspended:
            self._signal(signal.SIGTSTP)
            self.stop_at = time.time() + grace
            log.info("%s: SIGTSTP, stopped in %d s", self.name, grace)
            if not grace:
                self._stop()
            return
        if self.stop_at is not None:
            self.stop_at = None  # resumed in its grace: never stopped
        elif self.frozen:
            assert self.contained is not None
            self.contained.freeze(False)
            self.frozen = False
        self._signal(signal.SIGCONT)
        log.info("%s resumed", self.name)

    def _stop(self) -> None:
        """The grace is over: stop the tasks where they are, their cgroup frozen
        where they are contained, else SIGSTOP to them."""
        self.stop_at = None
        self.frozen = self.contained is not None and self.contained.freeze(True)
        if not self.frozen:
            self._signal(signal.SIGSTOP)
        log.info("%s suspended", self.name)

    def _begin_end(self, why: str, kill_wait: int) -> bool:
        """End the tasks: CONT and TERM now, KILL after ``kill_wait`` seconds (a
        suspended run thawed first, as slurmstepd sends SIGCONT with the kill). False
        when they were being ended already (at most the KILL came forward)."""
        if self.suspended:
            self._suspend(False, self.suspended_secs, 0)
        return self.ending.begin(why, time.time() + kill_wait)

    def _groups(self) -> list[int]:
        """The tasks' process groups: the one, unless a kind needs more (a step's task
        on a terminal leads a session, which no other task can join)."""
        return [self.pgid] if self.pgid else []

    def _signal(self, sig: int) -> None:
        """Signal the tasks' process groups, and every other process of their cgroup,
        while any task is left to receive it: each process once (a second USR1 landing
        in a task's trap handler would end what the handler runs)."""
        groups = self._groups()
        if not groups or not self._running():
            return
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, sig)
        if self.contained is not None:
            for pid in self.contained.procs():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if os.getpgid(pid) not in groups:
                        os.kill(pid, sig)

    def _reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            task = self.by_pid.get(pid)
            if task is None:
                continue
            task.status, task.usage = status, usage
            self._exited(task)

    # ------------------------------------------------------------ the end

    def _end_group(self) -> None:
        """Whatever the tasks left behind in their group and their cgroup goes with
        them; what the kill cannot end is logged and kept in ``left_behind``."""
        for group in self._groups():
            kill_group(group)
        if self.contained is not None:
            stray = self.contained.procs()
            if stray:  # what left the group (setsid, a double fork): reported, then killed
                log.warning("%s: %d processes left behind, killed", self.name, len(stray))
            self.left_behind = self.contained.kill()
            if self.left_behind:
                log.error(
                    "%s: processes %s not killed: %s",
                    self.name,
                    " ".join(map(str, self.left_behind)),
                    KILL_TASK_FAILED,
                )

    def oom_kills(self) -> int:
        """How many of the tasks' processes the OOM killer killed (0: not contained)."""
        return 0 if self.contained is None else self.contained.oom_kills()

    def release(self) -> None:
        """Remove the cgroups once the tasks' processes have left them."""
        if self.contained is not None:
            self.contained.remove()
            self.contained = None
        if self.cgroup is not None:
            devcgroup.remove(self.cgroup, parents=devcgroup.PARENTS)
            self.cgroup = None
