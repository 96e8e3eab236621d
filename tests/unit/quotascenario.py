"""Queue trees as data for the quota core's tests (controller/core/quota.py).

A scenario states only its queues' quotas; everything else is a queue's default::

    CONF = tree(team("a", gpus(4)), team("b", gpus(4)))
"""

from __future__ import annotations

from typing import Any

from controller.core.quota import RunningJob, WaitingJob
from corral.queueconf import QueueConf, QueueSpec, ResourceQuota

GPU = "gres/gpu"
CPU = "cpu"
NOW = 1_700_000_000


def gpus(
    guarantee: int = 0,
    limit: int | None = None,
    borrow: int | None = None,
    lend: int | None = None,
) -> dict[str, ResourceQuota]:
    """A GPU quota: ``borrow`` is the BorrowLimit, ``lend`` the LendLimit."""
    return {GPU: ResourceQuota(guarantee, limit, borrow, lend)}


def team(name: str, quotas: dict[str, ResourceQuota] | None = None, **fields: Any) -> QueueSpec:
    """A queue under the root (or ``parent=``) with ``quotas`` and any other field."""
    fields.setdefault("parent", "root")
    return QueueSpec(name=name, quotas=quotas or {}, **fields)


def tree(*queues: QueueSpec, root: QueueSpec | None = None) -> QueueConf:
    """The root, then ``queues`` in order (parents before their children)."""
    top = root or QueueSpec(name="root", parent=None, quotas={})
    return QueueConf(queues={q.name: q for q in (top, *queues)})


def running(
    job_id: int, queue: str, gpu: int = 1, *, priority: int = 0, started: int = 0, **kw: Any
) -> RunningJob:
    """A running job of ``queue`` holding ``gpu`` GPUs, started ``started`` seconds
    after NOW - 10,000."""
    return RunningJob(
        job_id=job_id,
        queue=queue,
        priority=priority,
        resources={GPU: gpu, **kw.pop("resources", {})},
        start_time=NOW - 10_000 + started,
        **kw,
    )


def waiting(
    job_id: int, queue: str, gpu: int = 1, *, priority: int = 0, waited: int = 1_000, **kw: Any
) -> WaitingJob:
    """A pending job of ``queue`` asking ``gpu`` GPUs, eligible ``waited`` seconds ago."""
    return WaitingJob(
        job_id=job_id,
        queue=queue,
        priority=priority,
        request={GPU: gpu, **kw.pop("resources", {})},
        submit_time=kw.pop("submit_time", NOW - waited),
        eligible_time=NOW - waited,
        **kw,
    )


def held(jobs: list[RunningJob]) -> dict[str, dict[str, int]]:
    """Leaf queue -> resource -> what ``jobs`` hold."""
    out: dict[str, dict[str, int]] = {}
    for j in jobs:
        mine = out.setdefault(j.queue, {})
        for r, n in j.resources.items():
            mine[r] = mine.get(r, 0) + n
    return out


def asked(jobs: list[RunningJob], pending: list[WaitingJob]) -> dict[str, dict[str, int]]:
    """Leaf queue -> resource -> what running and pending jobs ask for (divide's ``requested``)."""
    out = held(jobs)
    for w in pending:
        mine = out.setdefault(w.queue, {})
        for r, n in w.request.items():
            mine[r] = mine.get(r, 0) + n
    return out


def departments(**quotas: dict[str, ResourceQuota]) -> QueueConf:
    """Department d1 with teams t1 and t2, department d2 with team t3, each with the
    quotas given by name (``departments(d1=gpus(4), t1=gpus(2), d2=gpus(4))``); a
    queue not named is left out."""
    parents = {"d1": "root", "t1": "d1", "t2": "d1", "d2": "root", "t3": "d2"}
    return tree(*(team(q, quotas[q], parent=up) for q, up in parents.items() if q in quotas))
