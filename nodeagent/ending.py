"""How a supervised run ends: the one kill sequence and the one account of its use.

Every run's process (:mod:`nodeagent.runner`: the batch script's and a
step's) ends its tasks the way slurmstepd does: SIGCONT and SIGTERM to the
process group now, SIGKILL once the kill wait is over, whether the reason is
the time limit, a cancel or (for a step) srun going away. It then SIGKILLs
whatever is left in the group, and turns wait4's resource use into the
figures of its result. This module is where each of those is written, once.

Standard library only, and only what the supervisor imports anyway: it runs
once per job and step, and every import costs their start-up.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass

# Importing typing costs every job milliseconds; mypy honours the name.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def kill_group(pgid: int) -> None:
    """SIGKILL what is left of process group ``pgid`` (gone already, or no longer
    ours to signal: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class KillSequence:
    """CONT and TERM now, KILL at a deadline: one run's ending, once begun.

    ``send`` delivers a signal to the run's processes (its process group);
    the owner calls :meth:`begin` when the run must end and :meth:`due` on
    every wake-up, which sends the KILL once its time has come.
    """

    def __init__(self, send: Callable[[int], None]) -> None:
        self._send = send
        #: Why the run is being ended (None: it is not).
        self.why: str | None = None
        #: When KILL is due (None: not pending, or already sent).
        self.kill_at: float | None = None

    def begin(self, why: str, kill_at: float) -> bool:
        """End the run: CONT and TERM now, KILL at ``kill_at``.

        A second request keeps the first reason and sends no second TERM; it
        only brings the KILL forward when its own deadline is sooner. True
        when this call began the ending.
        """
        self.kill_at = kill_at if self.kill_at is None else min(self.kill_at, kill_at)
        if self.why is not None:
            return False
        self.why = why
        self._send(signal.SIGCONT)
        self._send(signal.SIGTERM)
        return True

    def due(self, now: float) -> float | None:
        """Send the KILL if it is due at ``now``; otherwise when it will be (None: never)."""
        if self.kill_at is None:
            return None
        if now < self.kill_at:
            return self.kill_at
        self._send(signal.SIGKILL)
        self.kill_at = None
        return None


@dataclass(frozen=True)
class Use:
    """What a run's processes used: the largest max RSS, the sum of them all (for
    AveRSS; KiB, as Linux reports it) and the summed CPU times."""

    max_rss_kb: int = 0
    sum_rss_kb: int = 0
    user_cpu_us: int = 0
    sys_cpu_us: int = 0


def use_of(usages: list[Any]) -> Use:
    """The :class:`Use` of the processes whose wait4 rusages are ``usages``."""
    rss = [int(usage.ru_maxrss) for usage in usages]
    return Use(
        max_rss_kb=max(rss, default=0),
        sum_rss_kb=sum(rss),
        user_cpu_us=sum(int(usage.ru_utime * 1e6) for usage in usages),
        sys_cpu_us=sum(int(usage.ru_stime * 1e6) for usage in usages),
    )
