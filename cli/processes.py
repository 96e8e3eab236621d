"""Processes on this machine, read from /proc, and ending the ones found.

``corral down`` uses it to find what a cluster's jobs left running (see
:mod:`cli.shutdown`), and the test suite to find what its tests left running
(``tests/conftest.py``). What counts as left behind is the caller's test on
a :class:`Process`; this module only reads and signals. The caller itself and
its ancestors are never candidates: ``corral down`` run from a job's own
shell, or pytest started with ``SLURM_CONF`` pointing into its temporary
directory, must not end itself.

A process is named by its pid and its start time (field 22 of
``/proc/PID/stat``, in clock ticks since boot), and every signal is sent only
after checking that the pid still has that start time: a pid freed and reused
between the scan and the signal is left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

PROC = "/proc"
#: How often the wait for processes to go away looks again.
POLL_S = 0.05


@dataclass(frozen=True)
class Process:
    """One live process as a scan found it."""

    pid: int
    start: int  # clock ticks after boot: with the pid, names the process for good
    argv: tuple[str, ...]

    def describe(self) -> str:
        """``pid command line`` for a report (the command line cut at 200 characters)."""
        line = " ".join(self.argv) or "?"
        return f"{self.pid} {line[:200]}"

    def cwd(self) -> str:
        """The working directory ('' when it cannot be read: gone, or another user's)."""
        try:
            return os.readlink(f"{PROC}/{self.pid}/cwd")
        except OSError:
            return ""

    def environ(self) -> dict[str, str]:
        """The environment it started with (empty when it cannot be read)."""
        raw = _read(self.pid, "environ")
        env = {}
        for item in raw.split(b"\0") if raw else ():
            name, sep, value = item.partition(b"=")
            if sep:
                env[os.fsdecode(name)] = os.fsdecode(value)
        return env


def _read(pid: int, name: str) -> bytes | None:
    try:
        with open(f"{PROC}/{pid}/{name}", "rb") as src:
            return src.read()
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, parent pid, start time) of ``pid``; None when it is gone."""
    raw = _read(pid, "stat")
    if raw is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return fields[0].decode(), int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def ancestors(pid: int | None = None) -> set[int]:
    """``pid`` (default: this process) and every process above it."""
    found = set()
    current = os.getpid() if pid is None else pid
    while current > 0 and current not in found:
        found.add(current)
        stat = _stat(current)
        current = stat[1] if stat else 0
    return found


def scan(keep: Callable[[Process], bool]) -> list[Process]:
    """Every live process (no zombie, not this one nor its ancestors) that ``keep`` accepts."""
    spared = ancestors()
    found = []
    for entry in os.listdir(PROC):
        if not entry.isdigit() or int(entry) in spared:
            continue
        pid = int(entry)
        stat = _stat(pid)
        raw = _read(pid, "cmdline")
        if stat is None or raw is None or stat[0] in "ZX":
            continue
        argv = tuple(os.fsdecode(a) for a in raw.split(b"\0")[:-1])
        process = Process(pid, stat[2], argv)
        with contextlib.suppress(OSError):
            if keep(process):
                found.append(process)
    return found


def alive(process: Process) -> bool:
    """True while ``process`` (this very one, not a reuse of its pid) runs; a zombie has ended."""
    stat = _stat(process.pid)
    return stat is not None and stat[2] == process.start and stat[0] not in "ZX"


def _send(processes: list[Process], signum: int) -> None:
    for process in processes:
        if alive(process):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, signum)


def _wait(processes: list[Process], seconds: float) -> list[Process]:
    deadline = time.monotonic() + seconds
    left = [p for p in processes if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)
        left = [p for p in left if alive(p)]
    return left


def end(processes: list[Process], grace: float) -> list[Process]:
    """CONT and TERM each, KILL what is left after ``grace`` seconds; those that
    survive even that (another user's, or stuck in the kernel) are returned."""
    _send(processes, signal.SIGCONT)
    _send(processes, signal.SIGTERM)
    left = _wait(processes, grace)
    _send(left, signal.SIGKILL)
    return _wait(left, 2.0)


def mentions(values: Iterable[str], path: str) -> bool:
    """True if one of ``values`` names ``path`` or a path below it, anywhere in it
    (``--chdir=PATH/x``, ``sh -c 'cd PATH; ...'``); ``PATH2`` or ``PATH.x`` is not ``PATH``."""
    path = path.rstrip(os.sep)
    for value in values:
        at = value.find(path)
        while at >= 0:
            after = value[at + len(path) : at + len(path) + 1]
            if not after or not (after.isalnum() or after in "._-"):
                return True
            at = value.find(path, at + 1)
    return False
