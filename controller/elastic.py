"""Elastic jobs in the controller: what the scheduler sees of them, and their resizes
carried out (docs/design.md, "Elastic jobs"; the decisions are ``core/elastic.py``'s).

* ``elasticviews.views`` is the snapshot's part (a module of its own: the store's
  snapshot builder calls it).
* ``apply`` carries out what a pass decided: a growth is re-checked against the
  ledger as a start is (``JobStore.start_fits``), a shrink gives back the nodes the
  waiting job needs; each is one ``Resize`` of the job's state.
* ``shrink`` is ``scontrol update job N NumNodes=K`` on a running job, as Slurm
  does it: the job keeps its first K nodes and gives back the rest.

What the job's processes hear of a resize is the ``Resized`` effect's
(``controller/effects.py``): the node agents end its runs on the nodes it left and
write its new nodes into every other run's resize file, and tell an elastic job
with its signal.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from controller import jobstate
from controller.core import Plan, Start, threads
from controller.elasticviews import resizable
from controller.model import Job

if TYPE_CHECKING:  # the loop and jobcontrol hand the store in
    from controller.store import JobStore

log = logging.getLogger(__name__)

__all__ = ["apply", "shrink", "with_allocation"]

# ---------------------------------------------------------------- carried out


def apply(store: JobStore, plan: Plan) -> list[Job]:
    """Carry out ``plan``'s growths and shrinks; the jobs resized."""
    resized = [job for job in (_grow(store, plan, i, s) for i, s in plan.grown.items()) if job]
    for job_id, gone in plan.shrunk.items():
        job = store.jobs.get(job_id)
        if job is None or not resizable(job) or job_id in plan.preempted:
            continue
        keep = [i for i, name in enumerate(job.nodes) if name not in gone]
        if len(keep) < max(job.min_nodes, 1) or keep[0] != 0:
            continue  # never below its minimum, never off its batch host
        new = store.post(job_id, _kept(job, keep, plan.now))
        log.info(
            "job_id=%d gave back %s for job_id=%d: now %d nodes (elastic, at least %d)",
            job_id,
            ",".join(gone),
            plan.shrunk_for.get(job_id, 0),
            len(new.nodes),
            new.min_nodes,
        )
        resized.append(new)
    return resized


def _grow(store: JobStore, plan: Plan, job_id: int, more: Start) -> Job | None:
    """One growth, if the job may still take it and the ledger still holds it."""
    job = store.jobs.get(job_id)
    if job is None or not resizable(job) or not job.elastic_signal:
        return None
    if len(job.nodes) + len(more.nodes) > max(job.max_nodes, len(job.nodes)):
        return None
    if set(more.nodes) & set(job.nodes) or not store.start_fits(more):
        return None
    gres = job.gres_alloc or tuple(() for _ in job.nodes)
    added = more.gres or tuple(() for _ in more.nodes)
    gpus = job.gpus or tuple(() for _ in job.nodes)
    new_gpus = more.gpus or tuple(() for _ in more.nodes)
    event = jobstate.Resize(
        plan.now,
        job.nodes + more.nodes,
        job.cpus + more.cpus,
        job.alloc_mem + more.memory,
        gres + added if any(gres + added) else (),
        gpus + new_gpus if any(gpus + new_gpus) else (),
        job.cpu_ids + more.cpu_ids if job.cpu_ids else (),
        threads.joined([(job.cpus, job.cpus_used), (more.cpus, more.used)]),
    )
    new = store.post(job_id, event)
    log.info(
        "job_id=%d grew by %s to %d nodes (elastic, at most %d)",
        job_id,
        ",".join(more.nodes),
        len(new.nodes),
        job.max_nodes,
    )
    return new


def _kept(job: Job, keep: list[int], now: int) -> jobstate.Resize:
    """The resize that leaves ``job`` with its nodes at indices ``keep``."""

    def pick(items: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
        return tuple(items[i] for i in keep) if items else ()

    cpus = tuple(job.cpus[i] for i in keep)
    return jobstate.Resize(
        now,
        tuple(job.nodes[i] for i in keep),
        cpus,
        tuple(job.alloc_mem[i] for i in keep) if job.alloc_mem else (),
        tuple(job.gres_alloc[i] for i in keep) if job.gres_alloc else (),
        pick(job.gpus),
        pick(job.cpu_ids),
        threads.joined([(cpus, tuple(job.usable_cpus[i] for i in keep))]),
    )


def with_allocation(job: Job, source: Job) -> Job:
    """``job`` with ``source``'s allocation (an update's other fields kept over a
    resize made meanwhile)."""
    return replace(
        job,
        nodes=source.nodes,
        cpus=source.cpus,
        alloc_mem=source.alloc_mem,
        gres_alloc=source.gres_alloc,
        gpus=source.gpus,
        cpu_ids=source.cpu_ids,
        cpus_used=source.cpus_used,
        resize_time=source.resize_time,
    )


def shrink(store: JobStore, job: Job, count: int, now: int) -> Job:
    """``scontrol update job N NumNodes=count`` on a running job: it keeps its first
    ``count`` nodes, as Slurm keeps the lowest of its node bitmap, and gives back the
    rest; the caller has checked ``count`` is fewer than it has."""
    new = store.post(job.job_id, _kept(job, list(range(count)), now))
    log.info(
        "job_id=%d set to %d nodes by scontrol update: gave back %s",
        job.job_id,
        count,
        ",".join(job.nodes[count:]),
    )
    return new
