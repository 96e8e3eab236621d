"""Scenario builders for the controller unit tests: clusters, jobs and configs as data.

Every builder takes keyword arguments named after the record it fills, with
defaults that describe "an ordinary pending batch job" or "an idle, healthy
node", so a test states only what its scenario is about::

    CLUSTER = cluster(
        nodes=[node("n1", cpus=4), node("n2", cpus=4, used_cpus=2)],
        partitions=[partition("batch", "n[1-2]")],
    )
    plan = schedule(CLUSTER.snapshot([job(1, num_tasks=4)]), NOW)

Nothing here reads the clock: ``NOW`` is a fixed instant every test passes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.snapshot import JobFacts, NodeView, PartitionView, Running, Snapshot
from controller.core.snapshot import oversubscribe as snapshot_oversubscribe
from controller.jobstate import JobState, Reason
from controller.model import Job
from corral import config, hostlist
from corral import gres as gres_syntax

NOW = 1_700_000_000
UID = 4242  # an ordinary (non-operator) user
GID = 4242


def job(job_id: int, **fields: Any) -> Job:
    """A pending job in partition ``batch`` submitted at ``NOW - 100 + job_id``.

    As admitted without ``-N``/``-w``/``--ntasks-per-node``: ``nodes_given`` is
    False, so the scheduler packs ``num_tasks`` onto as few nodes as fit. A
    scenario that means ``-N k`` passes ``min_nodes=k, nodes_given=True``.
    """
    values: dict[str, Any] = {
        "name": f"job{job_id}",
        "uid": UID,
        "gid": GID,
        "user": "alice",
        "group": "alice",
        "state": JobState.PENDING,
        "reason": Reason.NONE,
        "submit_time": NOW - 100 + job_id,
        "partitions": ("batch",),
    }
    values.update(fields)
    return Job(job_id=job_id, **values)


def running(job_id: int, nodes: tuple[str, ...] = ("n1",), **fields: Any) -> Job:
    """A job running since ``NOW - 50`` on ``nodes`` (one CPU and no memory each)."""
    values: dict[str, Any] = {
        "state": JobState.RUNNING,
        "partition": "batch",
        "nodes": nodes,
        "cpus": tuple(1 for _ in nodes),
        "alloc_mem": tuple(0 for _ in nodes),
        "start_time": NOW - 50,
    }
    values.update(fields)
    return job(job_id, **values)


def names(expr: str | Iterable[str]) -> tuple[str, ...]:
    """``"n[1-3]"`` or an iterable of names as a tuple of names."""
    if isinstance(expr, str):
        return tuple(hostlist.expand(expr)) if expr else ()
    return tuple(expr)


def node(
    name: str,
    cpus: int = 4,
    memory: int = 4000,
    *,
    weight: int = 1,
    features: str = "",
    used_cpus: int = 0,
    used_memory: int = 0,
    usable: bool = True,
    gres: str = "",
    shared: tuple[tuple[str, int, int], ...] = (),
) -> NodeView:
    """A node with ``used_cpus``/``used_memory`` already taken by running jobs.

    ``gres`` is what is free, written as slurm.conf's ``Gres=`` (``gpu:a100:2``);
    ``shared`` lists jobs sharing CPUs per partition as (partition, CPUs in
    all, most CPUs of one job); the ``used_cpus`` jobs keep their CPUs.
    """
    load = sum(cpus for _, cpus, _ in shared)
    return NodeView(
        name=name,
        cpus=cpus,
        real_memory=memory,
        weight=weight,
        features=frozenset(f for f in features.split(",") if f),
        free_cpus=max(cpus - used_cpus - load, 0) if load else cpus - used_cpus,
        free_memory=memory - used_memory,
        usable=usable,
        idle=used_cpus == 0 and not shared,
        gres=gres_syntax.parse_node(gres),
        unshared=used_cpus > 0,
        shared=shared,
    )


def partition(
    name: str,
    nodes: str | Iterable[str],
    *,
    state: str = "UP",
    max_time: int = -1,
    max_nodes: int | None = None,
    min_nodes: int = 0,
    tier: int = 1,
    def_mem_per_cpu: int = 0,
    def_mem_per_node: int = 0,
    max_mem_per_node: int = 0,
    exclusive: bool = False,
    oversubscribe: str = "",
) -> PartitionView:
    """A partition; ``oversubscribe`` as slurm.conf writes it (``YES:2``, ``FORCE``, ...)."""
    max_share, force = 1, False
    if oversubscribe:
        exclusive, max_share, force = snapshot_oversubscribe(oversubscribe)
    return PartitionView(
        name=name,
        nodes=names(nodes),
        state=state,
        max_time=max_time,
        max_nodes=max_nodes,
        min_nodes=min_nodes,
        priority_tier=tier,
        def_mem_per_cpu=def_mem_per_cpu,
        def_mem_per_node=def_mem_per_node,
        max_mem_per_node=max_mem_per_node,
        exclusive=exclusive,
        max_share=max_share,
        force=force,
    )


def facts(
    state: str,
    *,
    exit_status: int = 0,
    name: str = "other",
    uid: int = UID,
    array_job_id: int = 0,
    array_task_id: int | None = None,
    start_time: int = 0,
) -> JobFacts:
    """What the dependency checks know about another job (``state`` is a JobState name)."""
    return JobFacts(state, exit_status, name, uid, array_job_id, array_task_id, start_time)


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[NodeView, ...]
    partitions: tuple[PartitionView, ...]

    def snapshot(
        self,
        pending: Iterable[Job],
        *,
        jobs: Mapping[int, JobFacts] | None = None,
        running_per_array: Mapping[int, int] | None = None,
        running: Iterable[Running] = (),
    ) -> Snapshot:
        return Snapshot(
            nodes={n.name: n for n in self.nodes},
            partitions={p.name: p for p in self.partitions},
            pending=tuple(pending),
            jobs=dict(jobs or {}),
            running_per_array=dict(running_per_array or {}),
            running=tuple(running),
        )


def cluster(nodes: Iterable[NodeView], partitions: Iterable[PartitionView]) -> Cluster:
    return Cluster(tuple(nodes), tuple(partitions))


def slurm_conf(*lines: str, max_array_size: int = 1001) -> config.SlurmConfig:
    """A parsed slurm.conf made of the mandatory keys plus ``lines``."""
    text = "\n".join(
        ["ClusterName=test", "SlurmctldHost=ctl", f"MaxArraySize={max_array_size}", *lines]
    )
    return config.parse(text + "\n", "/nonexistent/slurm.conf")
