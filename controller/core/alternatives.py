"""A job's alternatives ("flavors", in Kueue's word): the ways it may run, in its order.

A job names alternatives with ``--gres=gpu:h100:8|gpu:a100:8`` (``Job.gres_alternatives``)
and with ``--prefer=FEATURES``, Slurm's soft constraint. Each alternative is the job
as that one way asks: its ``--gres`` replaced by one of the alternatives, and, for
``--prefer``, its ``--constraint`` replaced by the preferred features (Slurm 22.05 and
24.11 try the preference in place of ``-C``, "override whatever is set there if
possible"; ``features_use = prefer``), then as ``-C`` says. The order is GRES first,
preference within: ``h100 --prefer``, ``h100``, ``a100 --prefer``, ``a100``: the GPU
type is the harder choice to take back.

This module only lists them and places a job by trying them in order
(``first_fit``: what "could it start if these jobs were gone?" asks, for preemption
and reclaim); which one a job gets, with its queue's policy, is ``core/flavors.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller.core import placement
from controller.core.plan import Start
from controller.core.snapshot import NodeView, Snapshot
from controller.jobstate import Reason
from controller.model import Job

__all__ = ["Flavor", "first_fit", "flavors_of", "fungible", "label"]


@dataclass(frozen=True, slots=True)
class Flavor:
    """One alternative of a job: its place in the job's order (``rank``), which
    ``--gres`` alternative it is (``option``, an index into ``gres_alternatives``)
    and whether it asks for the ``--prefer`` features."""

    rank: int
    option: int
    gres: str
    preferred: bool
    job: Job  # the job as this alternative asks: plain, with no alternatives of its own
    label: str


def fungible(job: Job) -> bool:
    """Whether ``job`` names alternatives (a plain job is placed as ever)."""
    return bool(job.gres_alternatives or job.prefer)


def label(gres: str, prefer: str) -> str:
    """An alternative in words: ``gpu:h100:8``, ``gpu:h100:8 --prefer=nvlink``."""
    words = [word for word in (gres, f"--prefer={prefer}" if prefer else "") if word]
    return " ".join(words) or "without --prefer"


def flavors_of(job: Job) -> tuple[Flavor, ...]:
    """``job``'s alternatives in its order of preference (one for a plain job)."""
    options = job.gres_alternatives or (job.gres,)
    tries = (True, False) if job.prefer else (False,)
    out: list[Flavor] = []
    for option, gres in enumerate(options):
        for preferred in tries:
            asked = replace(
                job,
                gres=gres,
                constraint=job.prefer if preferred else job.constraint,
                prefer="",
                gres_alternatives=(),
                flavor="",
            )
            words = label(gres, job.prefer if preferred else "")
            out.append(Flavor(len(out), option, gres, preferred, asked, words))
    return tuple(out)


def first_fit(
    job: Job, snap: Snapshot, nodes: Mapping[str, NodeView], blocked: set[str]
) -> Start | Reason:
    """``placement.first_fit`` over ``job``'s alternatives in order: where the first
    that fits starts, else the first one's reason. For the what-ifs of preemption and
    reclaim ("would it fit once these are gone?"); the scheduling pass chooses with
    ``flavors.Chooser``, which also weighs the job's queue."""
    if not fungible(job):
        return placement.first_fit(job, snap, nodes, blocked)
    first: Reason | None = None
    for flavor in flavors_of(job):
        outcome = placement.first_fit(flavor.job, snap, nodes, blocked)
        if isinstance(outcome, Start):
            return outcome
        first = first or outcome
    return first or Reason.RESOURCES
