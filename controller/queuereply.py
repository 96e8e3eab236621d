"""``corral queues``' answer (the Queues RPC) and a job's queue, for ``corral why``
and ``scontrol show job``.

Part of the service layer, like ``priorityviews.py``: the numbers are
``core/queuestatus.statuses`` of the QueueView of a fresh snapshot, the same
view the next scheduling pass would start from. The queues hold no user's data
(amounts and counts per queue), so any authenticated user may read them, as
``sinfo`` shows every partition.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from controller import queueviews
from controller.associations import AssocSet
from controller.core import quota
from controller.core.queueplan import QueueView
from controller.core.queuestatus import QueueStatus, ResourceStatus, statuses
from controller.model import Job
from controller.store import JobStore
from corral import errors
from corral.errors import SlurmError
from corral.queueconf import QueueConf
from corral.wire import corral_pb2 as pb

__all__ = ["NO_QUEUES", "job_queue", "queues_reply", "why_queue"]

#: What the Queues RPC answers without a queues.conf (``corral queues: error: ...``).
NO_QUEUES = "no queues are configured"


def queues_reply(store: JobStore, now: int) -> pb.QueuesReply:
    """Every queue now, root first, depth first."""
    view = store.snapshot().queues
    if view is None:
        raise SlurmError(errors.ESLURM_DISABLED, NO_QUEUES)
    reply = pb.QueuesReply(now=now)
    for status in statuses(view):
        info = reply.queues.add(**_fields(status, skip="resources"))
        info.resources.extend(pb.QueueResource(**_fields(r)) for r in status.resources)
    return reply


def _fields(status: QueueStatus | ResourceStatus, skip: str = "") -> dict[str, Any]:
    """A status's fields by name, as the wire message has them (an unset limit left out)."""
    named = {f.name: getattr(status, f.name) for f in fields(status) if f.name != skip}
    return {name: value for name, value in named.items() if value is not None}


#: The last (queues.conf, associations) a job's queue was looked up under, and
#: the account parents worked out from them: ``squeue`` asks once per job.
_parents: list[tuple[QueueConf, AssocSet | None, dict[str, str]]] = []


def job_queue(store: JobStore, job: Job) -> str:
    """The leaf queue ``job`` is in ("": no queues, or none takes it)."""
    conf = store.conf.queue_conf
    if conf is None:
        return ""
    assocs = store.associations
    if not _parents or _parents[0][0] is not conf or _parents[0][1] is not assocs:
        _parents[:] = [(conf, assocs, queueviews.account_parents(assocs))]
    return queueviews.queue_of(conf, job, _parents[0][2]) or ""


def why_queue(view: QueueView, job_id: int) -> list[pb.WhyQueueResource]:
    """For a pending job in a queue: per governed resource its queue's guarantee,
    fair share and holdings, what the job asks, and what it would borrow if it
    started now (what the queue would hold above its guarantee, at most the
    request)."""
    entry = view.entries.get(job_id)
    if entry is None:
        return []
    held = quota.Tree(view.conf).totals(view.allocated)[entry.queue]
    out = []
    for r in view.shares.resources:
        guarantee = view.shares.guarantee_of(entry.queue, r)
        allocated = held.get(r, 0)
        asked = entry.request.get(r, 0)
        over = max(0, allocated + asked - guarantee)
        out.append(
            pb.WhyQueueResource(
                resource=r,
                guarantee=guarantee,
                fair_share=view.shares.fair_of(entry.queue, r),
                allocated=allocated,
                request=asked,
                would_borrow=min(asked, over),
            )
        )
    return out
