"""How the agent hears of the detached processes it started or adopted.

The agent's table of runs (:mod:`nodeagent.runs`) watches two kinds of run
directory: a batch job's, whose process is the supervisor, and a step's,
whose process is the step runner. Both processes are started the same way
(:mod:`nodeagent.process`) and tell the agent the same things, so the table
hears of both here:

* a run started by this agent process has a notify pipe: a line is a cue to
  look at its directory, end-of-file means the process has exited;
* a run adopted at start-up, or whose process closed its pipe a moment
  before it let go of its lock, is polled instead (:meth:`Watch.poll`).

A request (cancel, a signal, a new time limit) is a file written in the
directory, then SIGUSR1 to the process (:meth:`Watch.poke`). What a look at
the directory finds is the table's business: the ``check`` it hands over.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from nodeagent.process import SupervisorProcess, reap_soon, signal_supervisor
from nodeagent.spool import RunDir


@dataclass
class Run:
    """One run directory and the process that works in it, as the agent sees them."""

    dir: RunDir
    pid: int | None = None  # the supervisor's or step runner's
    notify_fd: int | None = None  # read end of its notify pipe (None: polled, or exited)


K = TypeVar("K", bound=Hashable)
R = TypeVar("R", bound=Run)


class Watch(Generic[K, R]):
    """The notify pipes and the poll of one table's runs.

    ``check`` looks at a run's directory and reports what changed; ``key``
    names a run in its table; ``live`` says whether the table still waits
    for the run's end.
    """

    def __init__(
        self,
        check: Callable[[R], None],
        key: Callable[[R], K],
        live: Callable[[R], bool],
    ) -> None:
        self._check = check
        self._key = key
        self._live = live
        self._polled: set[K] = set()

    def attach(self, run: R, proc: SupervisorProcess) -> None:
        """Follow a process this agent has just started for ``run``."""
        run.pid = proc.pid
        run.notify_fd = proc.notify_fd
        asyncio.get_running_loop().add_reader(proc.notify_fd, self._on_notify, run)

    def adopt(self, run: R) -> None:
        """Follow ``run`` by polling (a process a previous agent process started)."""
        self._polled.add(self._key(run))

    def forget(self, run: R) -> None:
        """Stop polling ``run`` (its end has been reported)."""
        self._polled.discard(self._key(run))

    def poke(self, run: R) -> None:
        """Make the run's process read its requests now."""
        pid = run.pid or run.dir.read_supervisor_pid()
        if pid is not None:
            run.pid = pid
            signal_supervisor(pid)

    def _on_notify(self, run: R) -> None:
        fd = run.notify_fd
        if fd is None:
            return
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        if data:
            self._check(run)
            return
        asyncio.get_running_loop().remove_reader(fd)
        os.close(fd)
        run.notify_fd = None
        if run.pid is not None:
            reap_soon(run.pid)
        self._check(run)
        if self._live(run):
            # The process closed its pipe but still holds its lock: it is in
            # the middle of exiting. The poll settles it in a moment.
            self.adopt(run)

    def poll(self, runs: Mapping[K, R]) -> None:
        """Check the runs of ``runs`` (the table) that no pipe tells about."""
        for key in list(self._polled):
            run = runs.get(key)
            if run is None:
                self._polled.discard(key)
            else:
                self._check(run)

    def close(self, runs: Iterable[R]) -> None:
        """Stop watching pipes (agent shutdown); the processes carry on."""
        loop = asyncio.get_running_loop()
        for run in runs:
            if run.notify_fd is not None:
                loop.remove_reader(run.notify_fd)
                with contextlib.suppress(OSError):
                    os.close(run.notify_fd)
                run.notify_fd = None
