"""What a job counts against TRES limits.

Accounting limits (GrpTRES, MaxTRES, MaxTRESPerNode, MaxTRESMins, a QOS's
MaxTRESPU/MaxTRESPA) name trackable resources: ``cpu``, ``mem`` (MiB),
``node``, ``billing`` (the CPUs, as Slurm without TRESBillingWeights),
``gres/<name>`` or ``gres/<name>:<type>``, and ``license/<name>`` (lower case,
as dbd keeps limits). A license belongs to no node, so MaxTRESPerNode measures
a job's licenses as Slurm 22.05 does, spread evenly over its nodes and rounded
down (measured: with ``MaxTRESPerNode=license/fluent=1``, ``-N2 -L fluent:3``
runs and ``-N2 -L fluent:4`` pends). A running job counts what it was given;
a pending one what it asks for at its smallest (``-N`` minimum), as
slurmctld's ``acct_policy`` does before a start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.core.gpus import also_items, same_type
from controller.model import Job
from corral import gres as gres_syntax
from corral.licenses import LicenseSyntaxError
from corral.licenses import parse as parse_licenses


@dataclass(frozen=True, slots=True)
class JobTres:
    """A job's TRES in all (``total``) and on its fullest node (``per_node``)."""

    total: Mapping[str, int]
    per_node: Mapping[str, int]


def _gres_counts(items: Iterable[gres_syntax.Item]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, pool, count in items:
        kind = gres_syntax.shown_type(pool)
        counts[f"gres/{name}"] = counts.get(f"gres/{name}", 0) + count
        if kind:
            counts[f"gres/{name}:{kind}"] = counts.get(f"gres/{name}:{kind}", 0) + count
    return counts


def _largest(per_node: Iterable[Mapping[str, int]]) -> dict[str, int]:
    largest: dict[str, int] = {}
    for node in per_node:
        for name, count in node.items():
            largest[name] = max(largest.get(name, 0), count)
    return largest


def license_counts(text: str) -> dict[str, int]:
    """A job's licenses as TRES counts: ``fluent:2`` is ``{"license/fluent": 2}``."""
    try:
        pairs = parse_licenses(text) if text else ()
    except LicenseSyntaxError:
        pairs = ()  # admission refused malformed lists; an old record counts none
    counts: dict[str, int] = {}
    for name, count in pairs:
        key = f"license/{name.lower()}"
        counts[key] = counts.get(key, 0) + count
    return counts


def of_job(job: Job) -> JobTres:
    """``job``'s TRES: its allocation once it has nodes, else its request; its
    licenses in both, on each node their share (total over nodes, rounded down)."""
    tres = _of_job(job)
    if not job.licenses:
        return tres
    licenses = license_counts(job.licenses)
    nodes = max(tres.total.get("node", 1), 1)
    shares = {name: count // nodes for name, count in licenses.items()}
    return JobTres({**tres.total, **licenses}, {**tres.per_node, **shares})


def _of_job(job: Job) -> JobTres:
    if job.nodes:
        given = job.gres_alloc or tuple(() for _ in job.nodes)
        nodes = [
            {"cpu": cpus, "billing": cpus, "mem": mem, **_gres_counts(items)}
            for cpus, mem, items in zip(
                job.cpus, job.alloc_mem or (0,) * len(job.cpus), given, strict=True
            )
        ]
        total: dict[str, int] = {"node": len(job.nodes)}
        for node in nodes:
            for name, count in node.items():
                total[name] = total.get(name, 0) + count
        return JobTres(total, _largest(nodes))
    count = max(job.min_nodes, 1)
    cpus = max(job.cpus_needed, count)  # at least one CPU on each node
    if job.mem_per_node:
        node_mem = job.mem_per_node
    elif job.mem_per_cpu:
        node_mem = job.mem_per_cpu * -(-cpus // count)
    else:
        node_mem = 0  # the partition's default, known only at the start
    try:
        items = gres_syntax.parse_request(job.gres) if job.gres else ()
    except ValueError:
        items = ()  # admission refused malformed requests; an old record counts none
    gres = _gres_counts(items)
    per_node = {"cpu": -(-cpus // count), "billing": -(-cpus // count), "mem": node_mem, **gres}
    total = {
        "cpu": cpus,
        "billing": cpus,
        "node": count,
        "mem": node_mem * count,
        **{name: n * count for name, n in gres.items()},
    }
    for name, n in _gpu_counts(job, count, bool(same_type(items, job.gpu_type))).items():
        total[name] = total.get(name, 0) + n
    return JobTres(total, per_node)


def _gpu_counts(job: Job, nodes: int, per_node: bool) -> dict[str, int]:
    """GPUs ``job`` asks beyond ``--gres`` (controller/core/gpus.py), in all over
    ``nodes`` nodes: --gpus (unless ``per_node`` GPUs of its type in --gres make it
    up), per task times its tasks, per socket times its sockets on each node, and
    --gpus's totals of further types."""
    if job.gpus_per_task and not per_node:  # with GPUs per node, --gres counts them
        gpus = job.gpus_per_task * job.num_tasks
    elif job.gpus_per_job and not (job.gpus_per_socket or per_node):
        gpus = job.gpus_per_job
    else:
        gpus = job.gpus_per_socket * max(job.sockets_per_node, 1) * nodes
    items = [("gpu", job.gpu_type, gpus)] if gpus else []
    if job.gpus_also:
        with contextlib.suppress(ValueError):  # admission refused malformed ones
            items += [("gpu", kind, count) for kind, count in also_items(job.gpus_also)]
    return _gres_counts(items) if items else {}


def billing(job: Job, weights: Iterable[tuple[str, float]]) -> int:
    """What ``job``'s allocation bills: CPUs without TRESBillingWeights, else the sum
    of each TRES times its weight (``cpu``, ``mem`` in MiB, ``node``, ``gres/<name>``
    and ``gres/<name>:<type>``), truncated as slurmctld stores it."""
    weights = tuple(weights)
    if not weights:
        return sum(job.cpus)
    counts: dict[str, int] = {
        "cpu": sum(job.cpus),
        "mem": sum(job.alloc_mem),
        "node": len(job.nodes),
    }
    for items in job.gres_alloc:
        for name, count in _gres_counts(items).items():
            counts[name] = counts.get(name, 0) + count
    return int(sum(weight * counts.get(name, 0) for name, weight in weights))
