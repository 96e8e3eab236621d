"""Starting a job's supervisor (or a step's runner), fully detached from the agent.

Everything below holds for step runners too (:func:`spawn_step_runner`,
their directory a :class:`~nodeagent.spool.StepDir`), which the zygote forks
like supervisors or posix_spawn starts as ``python -m nodeagent.steprunner``.

The supervisor gets a session of its own (no signal aimed at the agent's
process group or terminal reaches it), stdin from /dev/null, stdout and
stderr appended to ``supervisor.log`` in the job directory, SIGUSR1 and
SIGCHLD blocked (so an early cancel signal is kept pending, not fatal), and
two descriptors:

* the job directory's lock file, already locked by the agent, so the lock is
  held from the very instant the supervisor exists (a restarted agent can
  never mistake a starting supervisor for a dead one);
* the write end of a pipe whose read end the agent watches: a line means
  "look at ``started``", end-of-file means the supervisor has exited.

Two ways give it exactly that. Normally the zygote (:mod:`nodeagent.zygote`)
forks it, which costs the agent a round trip of about a millisecond and the
node no interpreter start-up. While the zygote is starting, restarting or
broken, posix_spawn (vfork underneath) starts ``python -m
nodeagent.supervisor`` instead: a launch never waits for the zygote to come
back, and never runs twice because of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib.util
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

from nodeagent.spool import LOCK, SUPERVISOR_LOG, RunDir, StepDir
from nodeagent.zygote import READY

log = logging.getLogger(__name__)

#: Where this package lives, so the supervisor imports the very code the agent runs.
CODE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Blocked in every supervisor from its first instant (its WATCHED signals).
BLOCKED = {signal.SIGUSR1, signal.SIGCHLD}
#: How long a launch waits for the zygote's answer (a healthy one takes about 1 ms).
REPLY_TIMEOUT = 2.0
#: Delay before a zygote that failed is replaced; it doubles while replacements keep failing.
RESTART_DELAY = 1.0
RESTART_DELAY_MAX = 60.0
#: Longest answer the zygote sends.
MAX_REPLY = 4096
#: The modules a spawned supervisor and step runner run.
SUPERVISOR = "nodeagent.supervisor"
STEP_RUNNER = "nodeagent.steprunner"
#: How soon to retry reaping a spawned child whose pipe closed before it became a zombie.
REAP_RETRY = 0.01


def _libraries() -> str:
    """The directory ``cryptography`` is installed in (site-packages, usually).

    Supervisors and step runners start with -S, no site-packages, for a fast
    start; but runners seal srun's I/O with ``cryptography``, so its directory
    goes on their path, after everything else.
    """
    spec = importlib.util.find_spec("cryptography")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the cryptography package is not installed")
    return os.path.dirname(next(iter(spec.submodule_search_locations)))


def with_libraries(env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``_libraries()`` at the end of PYTHONPATH (where it is not already)."""
    where = _libraries()
    old = env.get("PYTHONPATH", "")
    if where in old.split(os.pathsep):
        return env
    return {**env, "PYTHONPATH": f"{old}{os.pathsep}{where}" if old else where}


def supervisor_environment() -> dict[str, str]:
    """The agent's environment with this package first on the import path."""
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = f"{CODE_ROOT}{os.pathsep}{old}" if old else CODE_ROOT
    return env


@dataclass(frozen=True)
class SupervisorProcess:
    """A supervisor this agent started: its pid and the read end of its pipe.

    The pid is None in one case only: the zygote forked the supervisor but
    died before saying so. The supervisor's own ``supervisor.pid`` tells.
    """

    pid: int | None
    notify_fd: int


class LaunchInDoubt(Exception):
    """The zygote stopped answering with a launch in hand: did it fork? Ask the spool."""


class Zygote:
    """The agent's handle on its zygote: start, readiness, launches, restarts.

    ``python``, ``env`` and ``spool_root`` are those of the supervisors; the
    zygote's command line names the spool like theirs. A launch waits for the
    answer on the agent's thread, as posix_spawn would, but never longer than
    ``reply_timeout``: a hung or dead zygote is killed and replaced after
    ``restart_delay``, and meanwhile :func:`spawn_supervisor` spawns.
    """

    def __init__(
        self,
        spool_root: str,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
        *,
        reply_timeout: float = REPLY_TIMEOUT,
        restart_delay: float = RESTART_DELAY,
    ) -> None:
        self.spool_root = spool_root
        self.python = python
        self.env = supervisor_environment() if env is None else env
        self.reply_timeout = reply_timeout
        self.restart_delay = restart_delay
        self.pid: int | None = None
        self._sock: socket.socket | None = None
        self._ready = False
        self._delay = restart_delay
        self._start_at = 0.0

    def available(self) -> bool:
        """True if the zygote can take a launch now; starts a new one when one is due."""
        if self._sock is None:
            if time.monotonic() >= self._start_at:
                self.start()
            return False
        if not self._ready:
            self._ready = self._says_ready(self._sock)
        return self._ready

    def start(self) -> None:
        """Start a zygote now (at agent start-up, so it is ready for the first launch)."""
        if self._sock is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            theirs.set_inheritable(True)
            argv = [
                self.python,
                "-S",
                "-m",
                "nodeagent.supervisor",
                self.spool_root,
                "--zygote-fd",
                str(theirs.fileno()),
            ]
            self.pid = os.posix_spawn(
                self.python,
                argv,
                with_libraries(self.env),
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_DUP2, 2, 1),  # its messages go to the agent's log
                ],
                setsid=True,
                setsigmask=BLOCKED,  # kept blocked, so that every child starts so
            )
        except OSError as exc:
            ours.close()
            log.warning("cannot start the zygote: %s", exc)
            self._retry_later()
            return
        finally:
            theirs.close()
        ours.settimeout(self.reply_timeout)
        self._sock = ours
        log.info("zygote started, pid %d", self.pid)

    def _says_ready(self, sock: socket.socket) -> bool:
        """Whether the zygote has announced itself; it is replaced if it died instead."""
        sock.setblocking(False)
        try:
            message = sock.recv(MAX_REPLY)
        except BlockingIOError:
            return False
        except OSError:
            message = b""
        finally:
            sock.settimeout(self.reply_timeout)
        if message == READY:
            log.info("zygote %d ready", self.pid)
            return True
        log.warning("zygote %d ended before it was ready (%r)", self.pid, message)
        self._fail()
        return False

    def launch(self, path: str, lock_fd: int, notify_fd: int) -> int | None:
        """Have the zygote fork the supervisor of ``path``: its pid, or None if nothing started.

        Raises :class:`LaunchInDoubt` when the request was sent but no answer
        came; the zygote is dead and reaped by then, so nothing more can start.
        """
        sock = self._sock
        if sock is None or not self._ready:
            return None
        try:
            socket.send_fds(sock, [os.fsencode(path)], [lock_fd, notify_fd])
        except OSError as exc:
            log.warning("zygote %d unreachable (%s), replacing it", self.pid, exc)
            self._fail()
            return None
        try:
            reply = sock.recv(MAX_REPLY)
        except OSError as exc:  # TimeoutError included
            reply = f"no answer: {exc}".encode()
        word, _, rest = reply.partition(b" ")
        if word == b"pid" and rest.isdigit():
            self._delay = self.restart_delay
            return int(rest)
        if word == b"error":
            reason = rest.decode(errors="replace")
            log.warning("zygote could not start the supervisor of %s: %s", path, reason)
            return None
        log.warning("zygote %d failed a launch of %s (%r), replacing it", self.pid, path, reply)
        self._fail()
        raise LaunchInDoubt(path)

    def _retry_later(self) -> None:
        self._start_at = time.monotonic() + self._delay
        self._delay = min(self._delay * 2, RESTART_DELAY_MAX)

    def _fail(self) -> None:
        self.close()
        self._retry_later()

    def close(self) -> None:
        """Kill and reap the zygote; the supervisors it forked carry on."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = None
        self._ready = False


def _prepare(jobdir: RunDir) -> tuple[int, int, int]:
    """The job's lock file, locked, and a notify pipe: (lock, read end, write end)."""
    lock_fd = os.open(jobdir.file(LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        notify_r, notify_w = os.pipe()
    except BaseException:
        os.close(lock_fd)
        raise
    return lock_fd, notify_r, notify_w


def _through_zygote(zygote: Zygote, jobdir: RunDir) -> SupervisorProcess | None:
    """The supervisor of ``jobdir`` as the zygote forked it; None if nothing was started."""
    lock_fd, notify_r, notify_w = _prepare(jobdir)
    try:
        forked: bool | None
        try:
            pid = zygote.launch(jobdir.path, lock_fd, notify_w)
            forked = pid is not None
        except LaunchInDoubt:
            pid, forked = None, None
        finally:
            os.close(lock_fd)
            os.close(notify_w)
        if forked is None:
            # No supervisor can appear any more. One that was forked holds the
            # lock while it lives and writes its pid before it runs anything.
            pid = jobdir.read_supervisor_pid()
            forked = pid is not None or jobdir.supervisor_alive()
    except BaseException:
        os.close(notify_r)
        raise
    if not forked:
        os.close(notify_r)
        return None
    os.set_blocking(notify_r, False)
    return SupervisorProcess(pid=pid, notify_fd=notify_r)


def spawn_supervisor(
    jobdir: RunDir,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    zygote: Zygote | None = None,
    module: str = SUPERVISOR,
) -> SupervisorProcess:
    """Start the supervisor of ``jobdir`` and return at once.

    Through ``zygote`` when it is ready, else ``python -m MODULE`` with
    ``env`` (:func:`supervisor_environment` unless given); the job's own
    environment comes from the launch, not this.
    """
    if zygote is not None and zygote.available():
        proc = _through_zygote(zygote, jobdir)
        if proc is not None:
            return proc
    lock_fd, notify_r, notify_w = _prepare(jobdir)
    try:
        os.set_inheritable(lock_fd, True)
        os.set_inheritable(notify_w, True)
        argv = [
            python,
            "-S",  # no site-packages: the supervisor needs only the stdlib and CODE_ROOT
            "-m",
            module,
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
            with_libraries(supervisor_environment() if env is None else env),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, log_path, log_flags, 0o600),
                (os.POSIX_SPAWN_DUP2, 1, 2),
            ],
            setsid=True,
            setsigmask=BLOCKED,
        )
    except BaseException:
        os.close(notify_r)
        raise
    finally:
        os.close(lock_fd)
        os.close(notify_w)
    os.set_blocking(notify_r, False)
    return SupervisorProcess(pid=pid, notify_fd=notify_r)


def spawn_step_runner(
    stepdir: StepDir,
    python: str = sys.executable,
    env: dict[str, str] | None = None,
    zygote: Zygote | None = None,
) -> SupervisorProcess:
    """Start the step runner of ``stepdir`` (as :func:`spawn_supervisor`) and return at once."""
    return spawn_supervisor(stepdir, python, env, zygote, STEP_RUNNER)


def reap_soon(pid: int) -> None:
    """Reap a spawned child that has closed its notify pipe (it may not have exited yet).

    Needs a running event loop; a child forked by the zygote is not ours to reap.
    """
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return
    if done == 0:
        asyncio.get_running_loop().call_later(REAP_RETRY, reap_soon, pid)


def signal_supervisor(pid: int) -> None:
    """Ask a supervisor to re-read its control files (cancel, time limit)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1)
