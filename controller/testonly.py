"""``sbatch --test-only``: where and when a submission would start, read from a plan.

The controller admits the submission's jobs without recording them, adds them to a
snapshot's pending jobs and runs a whole scheduling pass (``service._test_only``);
this module reads that pass's answer for them. A heterogeneous job's components are
planned together, as the scheduler plans them (``core/hetgroup.py``: all start or
none), so the answer is the group's: one start time for all, their processors
summed and their nodes merged, as Slurm 22.05's sbatch prints one line for the
whole heterogeneous job (``Job 5 to start at ... using 3 processors on node[1-2]``,
with no partition).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.core.plan import Plan
from controller.model import Job
from corral import hostlist

#: When a job the pass gave no estimate is said to start: a year from now.
NO_ESTIMATE = 365 * 86400


@dataclass(frozen=True, slots=True)
class Answer:
    """The --test-only line's figures."""

    start_time: int
    num_cpus: int
    nodes: str
    partition: str  # "" for a heterogeneous job (Slurm prints none)


def answer(plan: Plan, jobs: Sequence[Job], now: int) -> Answer:
    """When ``jobs`` (one job, or every component of a heterogeneous job) start in
    ``plan``: now, where the pass starts them all; else the latest of the starts
    backfill expects (a group starts when its last component can); a year on when
    any has no estimate."""
    het = len(jobs) > 1
    starts = {s.job_id: s for s in plan.starts}
    if all(job.job_id in starts for job in jobs):
        chosen = [starts[job.job_id] for job in jobs]
        return Answer(
            start_time=now,
            num_cpus=sum(sum(s.cpus) for s in chosen),
            nodes=hostlist.compress(name for s in chosen for name in s.nodes),
            partition="" if het else chosen[0].partition,
        )
    expected = [plan.expected.get(job.job_id) for job in jobs]
    known = [e for e in expected if e is not None]
    when = max(e.start_time for e in known) if len(known) == len(jobs) else now + NO_ESTIMATE
    partition = known[0].partition if known else jobs[0].partitions[0]
    return Answer(
        start_time=when,
        num_cpus=sum(job.cpus_needed for job in jobs),
        nodes=hostlist.compress(name for e in known for name in e.nodes),
        partition="" if het else partition,
    )
