"""Starting a job's supervisor, fully detached from the agent.

The supervisor gets a session of its own (no signal aimed at the agent's
process group or terminal reaches it), stdin from /dev/null, stdout and
stderr appended to ``supervisor.log`` in the job directory, and two
inherited descriptors:

* the job directory's lock file, already locked by the agent, so the lock is
  held from the very instant the supervisor exists (a restarted agent can
  never mistake a starting supervisor for a dead one);
* the write end of a pipe whose read end the agent watches: a line means
  "look at ``started``", end-of-file means the supervisor has exited.

posix_spawn (vfork underneath) keeps a launch to well under a millisecond of
the agent's event loop, and the spawned process starts with SIGUSR1 and
SIGCHLD blocked so an early cancel signal is kept pending, not fatal.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import sys
from dataclasses import dataclass

from nodeagent.spool import LOCK, SUPERVISOR_LOG, JobDir

#: Where this package lives, so the supervisor imports the very code the agent runs.
CODE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def supervisor_environment() -> dict[str, str]:
    """The agent's environment with this package first on the import path."""
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = f"{CODE_ROOT}{os.pathsep}{old}" if old else CODE_ROOT
    return env


@dataclass(frozen=True)
class SupervisorProcess:
    """A supervisor this agent started: its pid and the read end of its pipe."""

    pid: int
    notify_fd: int


def spawn_supervisor(
    jobdir: JobDir, python: str = sys.executable, env: dict[str, str] | None = None
) -> SupervisorProcess:
    """Start ``python -m nodeagent.supervisor`` on ``jobdir`` and return at once.

    ``env`` is the supervisor's environment (:func:`supervisor_environment`
    unless given); the job's own environment comes from the launch, not this.
    """
    lock_fd = os.open(jobdir.file(LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    notify_r, notify_w = os.pipe()
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.set_inheritable(lock_fd, True)
        os.set_inheritable(notify_w, True)
        argv = [
            python,
            "-S",  # no site-packages: the supervisor needs only the stdlib and CODE_ROOT
            "-m",
            "nodeagent.supervisor",
            jobdir.path,
            "--lock-fd",
            str(lock_fd),
            "--notify-fd",
            str(notify_w),
        ]
        log_path = jobdir.file(SUPERVISOR_LOG)
        log_flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        pid = os.posix_spawn(
            python,
            argv,
            supervisor_environment() if env is None else env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, log_path, log_flags, 0o600),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
            setsigmask={signal.SIGUSR1, signal.SIGCHLD},
        )
    except BaseException:
        os.close(notify_r)
        raise
    finally:
        os.close(lock_fd)
        os.close(notify_w)
    os.set_blocking(notify_r, False)
    return SupervisorProcess(pid=pid, notify_fd=notify_r)


def signal_supervisor(pid: int) -> None:
    """Ask a supervisor to re-read its control files (cancel, time limit)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1)
