"""Accounting limits as the core sees them: counters that a start must fit under.

The controller turns an association's or QOS's limits into ``Gate`` s per
pending job (controller/associations.py): "at most ``cap`` of ``key`` may be
in use, and this job adds ``amount``". ``Usage`` starts from what running
jobs hold and counts each start of the pass, so the main pass and backfill
never start past a limit, and a job held back by one waits with its reason
(``AssocMaxJobsLimit``, ...) without blocking the jobs behind it, as in
Slurm. A gate without a key is a limit the job breaks by itself (a time
limit over MaxWall): it always holds the job back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.jobstate import Reason


@dataclass(frozen=True, slots=True)
class Gate:
    key: str  # the counter ("" = the job breaks the limit by itself)
    cap: int
    amount: int
    reason: Reason


class Usage:
    """The counters of one pass."""

    def __init__(self, used: Mapping[str, int]) -> None:
        self.used = dict(used)

    def blocked(self, gates: Iterable[Gate]) -> Reason | None:
        """The reason of the first gate a start would break, or None."""
        used = self.used
        for gate in gates:
            if not gate.key or used.get(gate.key, 0) + gate.amount > gate.cap:
                return gate.reason
        return None

    def take(self, gates: Iterable[Gate]) -> None:
        for gate in gates:
            if gate.key:
                self.used[gate.key] = self.used.get(gate.key, 0) + gate.amount
