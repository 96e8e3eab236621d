"""A job's flavor choice in words: ``scontrol show job``'s ``Flavor=`` line.

The scheduling core records, for a job that names alternatives (``--gres=a|b``,
``--prefer``), which one it chose and what it found for each
(``core/plan.Choice``, ``core/flavors.py``). A running job keeps the words of its
start (journaled with it: ``jobstate.Start.flavor``); a pending job's are derived
anew by each pass, as its reason and expected start are, and not journaled.

The words are one line: the alternative, its place among them, and why:

    gpu:a100:8 (2 of 2; before it: gpu:h100:8 Resources)
    gpu:h100:8 (1 of 2; expected soonest: gpu:h100:8 at 2026-03-01T10:00:00, ...)
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import replace

from controller.core.plan import Alternative, Choice, Plan
from controller.jobstate import JobState
from controller.model import Job
from corral.timefmt import format_timestamp

#: Why a choice was made, for each ``Choice.why`` (see core/plan.py).
WHY = {
    "first": "the first choice",
    "next": "the ones before it cannot start now",
    "borrowing": "none fits without borrowing (WhenCanBorrow=TryNextFlavor)",
    "soonest": "expected to start soonest",
    "preempting": "preemption may make room for it (WhenCanPreempt=MayStopSearch)",
    "waiting": "none can start now, and none has an expected start",
}


def describe(choice: Choice) -> str:
    """``choice`` as the ``Flavor=`` line says it."""
    chosen = choice.alternatives[choice.chosen]
    place = f"{choice.chosen + 1} of {len(choice.alternatives)}"
    words = [WHY.get(choice.why, choice.why)]
    others = [_outcome(a) for a in choice.alternatives if a is not chosen and _told(a)]
    if others:
        words.append("; ".join(others))
    return f"{chosen.label} ({place}: {'; '.join(words)})"


def _told(alternative: Alternative) -> bool:
    """Whether an alternative other than the chosen one has anything to say."""
    return alternative.outcome != "untried" or bool(alternative.start)


def _outcome(alternative: Alternative) -> str:
    found = alternative.outcome
    if alternative.start:
        found = f"{found}, expected {format_timestamp(alternative.start)}"
    return f"{alternative.label} {found}"


def note_waiting(jobs: MutableMapping[int, Job], plan: Plan, pending: Iterable[int]) -> None:
    """Give the pending jobs that name alternatives the words of ``plan``'s choice for
    them (none: ""): derived each pass, like a reason. With a backfill pass every
    pending job of ``pending`` is visited (one it no longer plans loses its words);
    otherwise only those the plan chose for."""
    visit = pending if plan.backfilled else plan.choices
    for job_id in visit:
        job = jobs.get(job_id)
        if job is None or job.state is not JobState.PENDING:
            continue
        if not (job.gres_alternatives or job.prefer):
            continue
        choice = plan.choices.get(job_id)
        text = describe(choice) if choice is not None else ""
        if job.flavor != text:
            jobs[job_id] = replace(job, flavor=text)
