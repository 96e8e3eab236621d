"""How much of a node a job needs: CPUs and memory per node, and node fit.

Shared by admission (reject what can never run: placement on an empty
cluster) and the scheduler (placement now), so "never" and "not now" use the
same arithmetic.
"""

from __future__ import annotations

from controller.core.snapshot import NodeView, PartitionView
from controller.model import Job


def cpus_per_node(job: Job, nnodes: int) -> int:
    """CPUs the job needs on each of ``nnodes`` nodes (tasks spread evenly)."""
    if job.ntasks_per_node:
        tasks = job.ntasks_per_node
        if job.tasks_given:
            tasks = min(tasks, -(-job.num_tasks // nnodes))
    else:
        tasks = -(-job.num_tasks // nnodes)
    return max(tasks * job.cpus_per_task, job.min_cpus, 1)


def mem_per_node(job: Job, part: PartitionView, cpus: int, node_memory: int) -> int:
    """MiB the job needs on a node where it gets ``cpus`` CPUs (0 = no request)."""
    if job.mem_per_node is not None:
        return node_memory if job.mem_per_node == 0 else job.mem_per_node
    if job.mem_per_cpu is not None:
        return job.mem_per_cpu * cpus
    if part.def_mem_per_cpu:
        return part.def_mem_per_cpu * cpus
    return part.def_mem_per_node


def features_match(constraint: str, features: frozenset[str]) -> bool:
    """Slurm's ``-C``: ``a&b`` all, ``a|b`` any, ``[a|b]`` any (one for all nodes)."""
    text = constraint.replace("[", "").replace("]", "").replace("(", "").replace(")", "")
    if not text:
        return True
    return any(
        all(term.split("*", 1)[0] in features for term in alternative.split("&") if term)
        for alternative in text.split("|")
    )


def node_fits(job: Job, part: PartitionView, node: NodeView, cpus: int) -> int | None:
    """Memory to allocate if ``node`` can take the job with ``cpus`` CPUs now, else None.

    Admission asks "can it *ever* fit?" by passing nodes that are empty and up.
    """
    if not features_match(job.constraint, node.features):
        return None
    exclusive = job.exclusive or part.exclusive
    want_cpus = node.cpus if exclusive else cpus
    memory = mem_per_node(job, part, want_cpus, node.real_memory)
    if want_cpus > node.cpus or memory > node.real_memory:
        return None
    if part.max_mem_per_node and memory > part.max_mem_per_node:
        return None
    if not node.usable or want_cpus > node.free_cpus or memory > node.free_memory:
        return None
    if exclusive and not node.idle:
        return None
    return memory
