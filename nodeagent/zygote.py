"""The zygote: a supervisor started ahead of its jobs, which forks one per launch.

It forks step runners (:mod:`nodeagent.steprunner`, one per node of an
``srun`` step) the same way: a request naming a step directory
(``step<job>.<step>``) becomes a step runner, any other a supervisor. A step
runner forked here carries the supervisor's command line too.

Starting ``python -S -m nodeagent.supervisor`` costs about 50 ms of CPU per
job, nearly all of it interpreter start-up and imports. The agent therefore
keeps one zygote, ``python -S -m nodeagent.supervisor SPOOL --zygote-fd N``,
with the supervisor code already imported. Its command line names the
supervisor module and the spool like that of a directly started supervisor,
so ``ps`` and ``pkill -f "nodeagent.supervisor SPOOL"`` find the supervisors
it forks, which carry that command line too.

The agent itself never forks: it runs gRPC threads and an event loop, and a
fork would copy their locks in whatever state they happen to be. The zygote
is single-threaded and does nothing but wait for requests.

Protocol, over a SOCK_SEQPACKET socketpair (one message per request):

* zygote to agent, once imports are done: ``ready``;
* agent to zygote: a job (or step) directory's path, with two descriptors attached
  (the locked lock file and the write end of the notify pipe, exactly what a
  directly started supervisor inherits);
* zygote to agent: ``pid N`` once the supervisor is forked, or
  ``error ERRNO MESSAGE`` when nothing was started.

The zygote ignores SIGCHLD, so the kernel reaps its children (the
supervisors) as they exit: no zombies, no waitpid, and a supervisor never
depends on pid 1 reaping it while the zygote lives. Each child resets what
the zygote changed before it becomes the supervisor: its own session, the
default SIGCHLD disposition, stdio on ``/dev/null`` and ``supervisor.log``,
and no descriptor but its two. SIGUSR1 and SIGCHLD stay blocked, as in a
directly started supervisor, so that an early cancel signal is kept pending.
The supervisor outlives the zygote and the agent alike; the zygote exits
when the agent closes its end of the socket.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import sys

from nodeagent.spool import SUPERVISOR_LOG, is_step_dir

# Importing typing costs the zygote milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

    #: The supervisor's body: (job directory, lock fd, notify fd) -> exit status.
    Supervise = Callable[[str, int | None, int | None], int]

READY = b"ready"
#: Longest job directory path a request may carry, in bytes.
MAX_PATH = 4096
#: Descriptors attached to a request: the lock file and the notify pipe's write end.
REQUEST_FDS = 2


def _error(code: int, message: str) -> bytes:
    return f"error {code} {message}".encode()


def _close_all_but(keep: set[int]) -> None:
    """Close every descriptor not in ``keep`` (close_range(2) underneath).

    Empty ranges are skipped: ``os.closerange(n, n)`` would close from n on.
    """
    low = 0
    for fd in sorted(keep):
        if low < fd:
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, max(low + 1, os.sysconf("SC_OPEN_MAX")))


def _become_supervisor(
    sock: socket.socket, path: str, lock_fd: int, notify_fd: int, log_fd: int, supervise: Supervise
) -> NoReturn:
    """In the forked child: shed the zygote's state and supervise ``path``; never returns."""
    status = 1
    try:
        # Detached, the socket object cannot close its number once that is reused.
        sock.detach()
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        _close_all_but({0, 1, 2, lock_fd, notify_fd})
        status = supervise(path, lock_fd, notify_fd)
    except BaseException:
        import traceback  # what an uncaught exception would print; rarely needed

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)


def _fork(
    sock: socket.socket,
    request: bytes,
    fds: list[int],
    root: str,
    supervise: Supervise,
    run_step: Supervise | None,
) -> bytes:
    """Fork the supervisor (or step runner) a request asks for; the reply for the agent."""
    path = os.path.normpath(os.fsdecode(request))
    if len(fds) != REQUEST_FDS or not path.startswith(root + os.sep):
        return _error(errno.EINVAL, f"bad request for {path!r} with {len(fds)} descriptors")
    if is_step_dir(path):
        if run_step is None:
            return _error(errno.EINVAL, f"no step runner for {path!r}")
        supervise = run_step
    lock_fd, notify_fd = fds
    log_flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
    try:
        log_fd = os.open(os.path.join(path, SUPERVISOR_LOG), log_flags, 0o600)
    except OSError as exc:
        return _error(exc.errno or errno.EIO, exc.strerror or str(exc))
    try:
        sys.stderr.flush()  # nothing of the zygote's may be written twice
        pid = os.fork()
    except OSError as exc:
        os.close(log_fd)
        return _error(exc.errno or errno.EIO, exc.strerror or str(exc))
    if pid == 0:
        _become_supervisor(sock, path, lock_fd, notify_fd, log_fd, supervise)
    os.close(log_fd)
    return f"pid {pid}".encode()


def serve(sock_fd: int, root: str, supervise: Supervise, run_step: Supervise | None = None) -> int:
    """Fork a supervisor per request on ``sock_fd`` until the agent hangs up.

    ``root`` is the spool: job directories elsewhere are refused.
    ``supervise`` is the supervisor's body, run in each child; ``run_step``
    the step runner's, run instead for a step directory.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    sock = socket.socket(fileno=sock_fd)
    sock.set_inheritable(False)
    root = root.rstrip(os.sep)
    try:
        sock.send(READY)
        while True:
            request, fds, _, _ = socket.recv_fds(sock, MAX_PATH, REQUEST_FDS)
            if not request and not fds:
                return 0
            try:
                reply = _fork(sock, request, fds, root, supervise, run_step)
            finally:
                for fd in fds:
                    os.close(fd)
            sock.send(reply)
    except ConnectionError:
        return 0
