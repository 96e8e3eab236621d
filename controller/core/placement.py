"""Where a job fits: node choice for one job in one partition, and partition limits.

``place`` is cons_tres-style selection over the free resources it is given:
the scheduler's main pass gives it the resources free now, backfill the ones
free at a future moment (with reserved nodes masked off), and admission an
empty cluster ("could this ever run?").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core.plan import Start
from controller.core.request import cpus_per_node, node_fits
from controller.core.snapshot import NodeView, PartitionView, Snapshot
from controller.jobstate import Reason
from controller.model import Job

Alloc = tuple[str, int, int]  # node name, CPUs, MiB


def partition_reason(job: Job, part: PartitionView) -> Reason | None:
    if part.state == "DOWN":
        return Reason.PARTITION_DOWN
    if part.state == "INACTIVE":
        return Reason.PARTITION_INACTIVE
    if part.max_time >= 0 and (job.time_limit < 0 or job.time_limit > part.max_time):
        return Reason.PARTITION_TIME_LIMIT
    if part.max_nodes is not None and job.min_nodes > part.max_nodes:
        return Reason.PARTITION_NODE_LIMIT
    if job.min_nodes < part.min_nodes:
        return Reason.PARTITION_NODE_LIMIT
    return None


def _fixed(job: Job, part: PartitionView, candidates: list[NodeView]) -> list[Alloc]:
    """Exactly ``min_nodes`` nodes, tasks spread evenly (``-N k``, ``--ntasks-per-node``)."""
    cpus = cpus_per_node(job, job.min_nodes)
    exclusive = job.exclusive or part.exclusive
    chosen: list[Alloc] = []
    for node in candidates:
        memory = node_fits(job, part, node, cpus)
        if memory is not None:
            chosen.append((node.name, node.cpus if exclusive else cpus, memory))
            if len(chosen) == job.min_nodes:
                return chosen
    return []


def _packed(job: Job, part: PartitionView, candidates: list[NodeView]) -> list[Alloc]:
    """As few nodes as the tasks fit on, in node order (``-n`` without a fixed ``-N``).

    Required (``-w``) nodes come first among the candidates and each gets at
    least one task; the node count stays within ``-N min-max`` and MaxNodes.
    """
    exclusive = job.exclusive or part.exclusive
    least = max(job.min_nodes, len(job.req_nodes))
    most = min(job.max_nodes or len(candidates), part.max_nodes or len(candidates))
    remaining = job.num_tasks
    chosen: list[Alloc] = []
    for node in candidates:
        if len(chosen) == most or (remaining == 0 and len(chosen) >= least):
            break
        room = (node.cpus if exclusive else node.free_cpus) // job.cpus_per_task
        later = max(least - len(chosen) - 1, 0)  # nodes that must still get a task
        tasks = min(remaining - later, room)
        if tasks < 1 and not (remaining <= later and room >= 1):
            continue
        cpus = max(max(tasks, 1) * job.cpus_per_task, job.min_cpus)
        memory = node_fits(job, part, node, cpus)
        if memory is None:
            continue
        chosen.append((node.name, node.cpus if exclusive else cpus, memory))
        remaining -= max(tasks, 0)
    if remaining > 0 or len(chosen) < least:
        return []
    return chosen


def place(job: Job, part: PartitionView, nodes: Mapping[str, NodeView]) -> Start | Reason:
    """Choose nodes for ``job`` in ``part`` from the free resources in ``nodes``."""
    for required in job.req_nodes:
        node = nodes.get(required)
        if node is None or required not in part.nodes or not node.usable:
            return Reason.REQ_NODE_NOT_AVAIL
    order = {name: i for i, name in enumerate(part.nodes)}
    candidates = sorted(
        (nodes[n] for n in part.nodes if n in nodes and n not in job.exc_nodes),
        key=lambda n: (n.name not in job.req_nodes, n.weight, order[n.name]),
    )
    fixed = job.nodes_given and job.max_nodes in (0, job.min_nodes)
    chosen = _fixed(job, part, candidates) if fixed else _packed(job, part, candidates)
    names = {name for name, _, _ in chosen}
    if not chosen or any(r not in names for r in job.req_nodes):
        return Reason.RESOURCES
    return Start(
        job_id=job.job_id,
        partition=part.name,
        nodes=tuple(c[0] for c in chosen),
        cpus=tuple(c[1] for c in chosen),
        memory=tuple(c[2] for c in chosen),
    )


def take(nodes: dict[str, NodeView], start: Start) -> None:
    for name, cpus, memory in zip(start.nodes, start.cpus, start.memory, strict=True):
        node = nodes[name]
        nodes[name] = replace(
            node, free_cpus=node.free_cpus - cpus, free_memory=node.free_memory - memory, idle=False
        )


def partitions_of(job: Job, snap: Snapshot) -> list[PartitionView]:
    """The job's partitions that exist, highest PriorityTier first."""
    return sorted(
        (snap.partitions[p] for p in job.partitions if p in snap.partitions),
        key=lambda p: -p.priority_tier,
    )


def first_fit(
    job: Job, snap: Snapshot, nodes: Mapping[str, NodeView], blocked: set[str]
) -> Start | Reason:
    """Where ``job`` starts now (the first partition by PriorityTier), or why not."""
    first_reason: Reason | None = None
    for part in partitions_of(job, snap):
        limit = partition_reason(job, part)
        if limit is not None:
            first_reason = first_reason or limit
            continue
        if part.name in blocked:
            first_reason = first_reason or Reason.PRIORITY
            continue
        outcome = place(job, part, nodes)
        if isinstance(outcome, Start):
            return outcome
        first_reason = first_reason if first_reason not in (None, Reason.PRIORITY) else outcome
    return first_reason or Reason.RESOURCES
