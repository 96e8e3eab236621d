"""Becoming the job's user, and what a job's processes open as that user.

Shared by the supervisor (batch scripts) and the step runner (srun's
tasks): both stay root themselves and switch in the forked child just before
exec, so that they can still signal the job, enforce its time limit and
write into the root-owned spool however the user's processes behave. Files
named by the user (output, input, their directories) are opened with the
user's identity: the supervisor's child opens them after its switch; the step
runner, which opens them once for several tasks, takes the user's effective
ids for the while (:func:`as_user`), as slurmstepd does.

Standard library only, and little of it: every job and step imports this.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
from collections.abc import Sequence

# Importing typing costs every job milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator


class LaunchError(Exception):
    """Why a job or step could not be started (a message for the user or the log)."""


class OutputError(LaunchError):
    """An output or error file could not be opened: a launch failure Slurm records
    with its own exit code (``spool.OUTPUT_FAILED_STATUS``)."""


class InputError(LaunchError):
    """An input file could not be opened: for a step, Slurm's slurmstepd fails the
    node's IO setup, and srun says so task by task (``stepio.IO_FAILED``)."""


def user_groups(uid: int, gid: int, user: str) -> list[int] | None:
    """The groups to run ``uid`` with; None when no switch is needed (or possible).

    Raises :class:`LaunchError` when the switch is impossible: an unknown uid,
    or another user's job on an agent that is not root.
    """
    euid = os.geteuid()
    if euid != 0:
        if uid != euid:
            raise LaunchError(f"cannot run as uid {uid}: the node agent is not root")
        return None
    try:
        pwd.getpwuid(uid)
    except KeyError:
        raise LaunchError(f"invalid user id {uid} ({user}) on this node") from None
    try:
        return os.getgrouplist(user, gid)
    except OSError as exc:
        raise LaunchError(f"cannot read the groups of user {user}: {exc}") from None


def become_user(uid: int, gid: int, user: str, groups: list[int] | None = None) -> None:
    """Switch for good to ``uid``, ``gid`` and the user's groups (when root).

    ``groups`` as :func:`user_groups` gave them, or looked up now. Any step that
    fails is a :class:`LaunchError`, and it is checked that the switch took: a
    job must never go on as root, or with root's groups, by accident.
    """
    if groups is None:
        groups = user_groups(uid, gid, user)
        if groups is None:
            return
    try:
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
    except OSError as exc:
        raise LaunchError(f"cannot become user {user} (uid {uid}, gid {gid}): {exc}") from None
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid or os.getegid() != gid:
        raise LaunchError(f"cannot become user {user} (uid {uid}, gid {gid}): ids not taken")


@contextlib.contextmanager
def as_user(uid: int, gid: int, groups: list[int] | None) -> Iterator[None]:
    """Take the user's effective ids for the block, then root's again.

    Files and directories made meanwhile belong to the user, and the user's
    permissions decide what may be opened. ``groups`` None: nothing to switch.
    """
    if groups is None:
        yield
        return
    saved_groups, saved_egid = os.getgroups(), os.getegid()
    os.setgroups(groups)
    os.setegid(gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(saved_egid)
        os.setgroups(saved_groups)


def enter_work_dir(path: str) -> OSError | None:
    """chdir to ``path``, or to /tmp; the reason /tmp was used, if it was."""
    try:
        os.chdir(path)
    except OSError as exc:
        os.chdir("/tmp")
        return exc
    return None


def open_output(path: str, append: bool, truncate: bool | None = None) -> int:
    """Open an output file (close-on-exec); ``OutputError`` when it cannot be.

    A missing directory is not made: Slurm fails the launch and creates nothing,
    so a mistyped ``--output`` path shows as a failed job, not as files elsewhere.

    ``truncate`` defaults to ``not append``; a file several processes write
    through one open file is best opened appending and truncated, since some
    writes (copy_file_range(2), as cat uses) do not share its offset safely.
    """
    if truncate is None:
        truncate = not append
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    flags |= (os.O_APPEND if append else 0) | (os.O_TRUNC if truncate else 0)
    try:
        return os.open(path, flags, 0o666)
    except OSError as exc:
        raise OutputError(f"cannot open output file {path}: {exc.strerror}") from None


def open_input(path: str) -> int:
    """Open an input file (close-on-exec); ``InputError`` when it cannot be."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"cannot open input file {path}: {exc.strerror}") from None


def apply_umask(environment: dict[str, str]) -> None:
    """The umask the submitting command recorded (SLURM_UMASK), if any."""
    umask = environment.get("SLURM_UMASK")
    if umask:
        os.umask(int(umask, 8))


def reset_signals() -> None:
    """In a child about to exec: no blocked signals, default SIGPIPE and SIGXFSZ.

    Python ignores those two, and an ignored signal stays ignored across exec.
    """
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)


def pin_cpus(cpus: Sequence[int]) -> None:
    """Pin this process (and what it starts) to ``cpus``, the CPUs near its GPUs the
    controller chose; nothing for none. A CPU this host lacks (an emulated node
    larger than its host) is left out; none left: not pinned."""
    present = os.sched_getaffinity(0)
    wanted = {c for c in cpus if c in present}
    if wanted:
        os.sched_setaffinity(0, wanted)
