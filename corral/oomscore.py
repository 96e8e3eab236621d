"""Keeping the kernel's OOM killer off the daemons and job supervisors, not off the jobs.

When a node runs out of memory the kernel kills the process with the highest
badness, which ``/proc/PID/oom_score_adj`` shifts (-1000 exempts a process,
0 is the default, 1000 makes it the first choice). A job that overruns its
memory must be what goes, never the daemon that would report it or the
supervisor that would record how it ended. So, as slurmd and slurmstepd do,
every Corral daemon and every supervisor and step runner sets its own value to
-1000 as it starts (:func:`protect`), and the job's processes get the default
0 back in the forked child, before exec (:func:`unprotect`): the value is
inherited across fork and exec, and a job must not be immune.

Lowering the value needs CAP_SYS_RESOURCE (root): a daemon that is not root
can only raise it, so there :func:`protect` fails, with a warning in the log,
unless what started the daemon lowered it already (systemd's
``OOMScoreAdjust=``), which is then left as it is.

Standard library only, and little of it: every job's supervisor imports this.
"""

from __future__ import annotations

import contextlib
import logging
import os

PATH = "/proc/self/oom_score_adj"
#: OOM_SCORE_ADJ_MIN: never chosen by the OOM killer.
PROTECTED = -1000
#: What a process gets when nothing set it.
DEFAULT = 0

log = logging.getLogger(__name__)


def current() -> int:
    """This process's oom_score_adj."""
    with open(PATH, "rb") as src:
        return int(src.read())


def write(value: int) -> None:
    """Set this process's oom_score_adj; OSError when it may not (lowering, not root)."""
    fd = os.open(PATH, os.O_WRONLY)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)


def protect(name: str) -> bool:
    """Exempt this process (the program ``name``) from the OOM killer; False, with a
    warning in the log, where that is not allowed."""
    try:
        if current() != PROTECTED:
            write(PROTECTED)
        return True
    except (OSError, ValueError) as exc:
        log.warning(
            "%s: cannot set oom_score_adj to %d (%s): the OOM killer may choose it",
            name,
            PROTECTED,
            getattr(exc, "strerror", None) or exc,
        )
        return False


def unprotect() -> None:
    """In a job's forked child, before exec: the default back. Raising is always
    allowed; where this process was never exempt, there is nothing to undo."""
    with contextlib.suppress(OSError):
        write(DEFAULT)
