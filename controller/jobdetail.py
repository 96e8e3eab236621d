"""What a job with nodes holds, as ``scontrol show job -d`` shows it.

Slurm's detail lines are a job's GRES in all (``JOB_GRES=gpu:v100:2,gpu:a100:1``)
and, on each node, its CPU ids, memory and GRES with the GPUs' indices
(``Nodes=n1 CPU_IDs=0 Mem=16000 GRES=gpu:v100:2(IDX:2-3),gpu:a100:1(IDX:0)``).
A job may hold GPUs of several types (``--gres=gpu:a100:1 --gpus=v100:2``): they
are listed in the order Slurm keeps the job's requests, those of ``--gpus`` first,
then ``--gres``'s (``--gpus-per-node`` among them) in their order, then per socket
and per task; the node's own order stands where the request names no type.
The client groups nodes whose lines are the same (``Nodes=n[1,3]``). A node dealt
none of a job's GPU total (``--gpus=1 -n10`` on two 8-core nodes) shows, as Slurm
22.05 does, ``GRES=gpu:0(IDX:)`` (``gpu:a100:0(IDX:)``) where its GPUs have a type
or known cores, ``GRES=(null)`` where they have neither.

``Mem=`` is the memory the job holds on the node: what it asked (``--mem``, or
``--mem-per-cpu`` times the CPUs it holds there, ``--exclusive`` ones included) or
its partition's DefMemPerCPU/DefMemPerNode gave it; a job with no memory limit at
all holds the node's whole RealMemory, as Slurm 22.05 prints it (where Corral
counts none held, so that other jobs are not kept off the node). Where memory is no
consumable resource (SelectTypeParameters without ``_Memory``) Slurm prints
``Mem=0`` whatever was asked, and so does this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.core.gpus import also_items
from controller.model import Job
from corral import arrayspec, hostlist
from corral import gres as gres_syntax

__all__ = ["JobDetail", "of_job"]

Item = gres_syntax.Item


@dataclass(frozen=True, slots=True)
class JobDetail:
    """The JobInfo fields of a job's detail lines (``job_gres``, ``node_*``)."""

    job_gres: str
    node_cpu_ids: list[str]
    node_mem: list[int]
    node_gres: list[str]


def _asked_order(job: Job) -> list[tuple[str, str]]:
    """(name, type) of the job's requests in Slurm's order (per job, per node, per
    socket, per task)."""
    order: list[tuple[str, str]] = []
    if job.gpus_per_job:
        order.append(("gpu", job.gpu_type))
    with contextlib.suppress(ValueError):  # --gpus's further types, as listed
        order += [("gpu", kind) for kind, _ in also_items(job.gpus_also)]
    # Admission refused malformed requests: an old record's puts no type first.
    with contextlib.suppress(ValueError):
        order += [(name, kind) for name, kind, _ in gres_syntax.parse_request(job.gres)]
    if job.gpus_per_socket or job.gpus_per_task:
        order.append(("gpu", job.gpu_type))
    return order


def _ordered(items: Sequence[Item], order: list[tuple[str, str]]) -> list[Item]:
    """``items`` (a node's, in its configuration order) in the order of ``order``."""

    def rank(item: Item) -> int:
        name, pool, _ = item
        for key in ((name, gres_syntax.shown_type(pool)), (name, "")):
            if key in order:
                return order.index(key)
        return len(order)

    return sorted(items, key=rank)


def _label(name: str, pool: str, count: int) -> str:
    kind = gres_syntax.shown_type(pool)
    return f"{name}:{kind}:{count}" if kind else f"{name}:{count}"


def _node_gres(
    items: Sequence[Item], gpus: Sequence[int], numbering: Sequence[tuple[str, int]]
) -> str:
    """One node's GRES, whole GPUs with their indices (``gpu:a100:1(IDX:0)``)."""
    type_of = {index: kind for kind, index in numbering}
    out = []
    for name, pool, count in items:
        text = _label(name, pool, count)
        if name == "gpu" and "#" not in pool:
            mine = sorted(i for i in gpus if type_of.get(i, "") == pool)
            text += f"(IDX:{arrayspec.compress(mine) if mine else 'N/A'})"
        out.append(text)
    return ",".join(out)


def _none_dealt(job: Job, numbering: Sequence[tuple[str, int]], cores_known: bool) -> str:
    """A node's GRES where the job's total left it no GPU, as Slurm 22.05 shows it."""
    kinds = [kind for kind, _ in numbering if kind]
    if not (kinds or cores_known):
        return "(null)"
    kind = job.gpu_type or (kinds[0] if kinds else "")
    return f"{_label('gpu', kind, 0)}(IDX:)"


def of_job(
    job: Job,
    numbering: dict[str, list[tuple[str, int]]],
    real_memory: Mapping[str, int] | None,
    cores_known: frozenset[str] = frozenset(),
) -> JobDetail:
    """``job``'s detail fields; empty while it holds no nodes. ``numbering`` is each of
    its nodes' GPUs as (type, index); ``real_memory`` their RealMemory (MiB), shown
    where the job holds no memory count, or None where memory is not counted;
    ``cores_known`` the nodes whose GPUs' near cores are known."""
    if not job.nodes or len(job.cpu_ids) != len(job.nodes):
        return JobDetail("", [], [], [])
    order = _asked_order(job)
    given = job.gres_alloc or tuple(() for _ in job.nodes)
    mem = job.alloc_mem or (0,) * len(job.nodes)
    totals: dict[tuple[str, str], int] = {}
    detail = JobDetail("", [], [], [])
    # In NodeList's order (the job's node list compressed), which the client expands.
    place = {name: i for i, name in enumerate(job.nodes)}
    for name in hostlist.expand(hostlist.compress(job.nodes)):
        i = place[name]
        items = _ordered(given[i], order)
        for item_name, pool, count in items:
            key = (item_name, gres_syntax.shown_type(pool))
            totals[key] = totals.get(key, 0) + count
        gpus = job.gpus[i] if job.gpus else ()
        detail.node_cpu_ids.append(arrayspec.compress(sorted(job.cpu_ids[i])))
        if real_memory is None:
            detail.node_mem.append(0)
        else:
            detail.node_mem.append(mem[i] or real_memory.get(name, 0))
        shown = _node_gres(items, gpus, numbering.get(name, []))
        if job.gpus_per_job and not any(item[0] == "gpu" for item in items):
            shown = _none_dealt(job, numbering.get(name, []), name in cores_known)
        detail.node_gres.append(shown)
    job_gres = ",".join(_label(name, kind, count) for (name, kind), count in totals.items())
    return JobDetail(job_gres, detail.node_cpu_ids, detail.node_mem, detail.node_gres)
