"""What the scheduler sees: an immutable picture of the cluster at ``now``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.model import Job


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    cpus: int
    real_memory: int
    weight: int
    features: frozenset[str]
    free_cpus: int
    free_memory: int
    usable: bool  # responding, not DOWN, not DRAIN
    idle: bool  # no job on it (needed by --exclusive)


@dataclass(frozen=True, slots=True)
class PartitionView:
    name: str
    nodes: tuple[str, ...]
    state: str
    max_time: int  # minutes, -1 UNLIMITED
    max_nodes: int | None
    min_nodes: int
    priority_tier: int
    def_mem_per_cpu: int
    def_mem_per_node: int
    max_mem_per_node: int
    exclusive: bool  # OverSubscribe=EXCLUSIVE


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What dependency checks need to know about another job."""

    state: str  # JobState name
    exit_status: int
    name: str
    uid: int
    array_job_id: int
    array_task_id: int | None
    start_time: int
    array_pending: str = ""  # an array's tasks not started yet (its own record only)


@dataclass(frozen=True, slots=True)
class Running:
    """A job holding nodes, and when its time limit frees them (0: no limit)."""

    job_id: int
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]
    end_time: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    nodes: Mapping[str, NodeView]
    partitions: Mapping[str, PartitionView]
    pending: tuple[Job, ...]
    jobs: Mapping[int, JobFacts]
    running_per_array: Mapping[int, int]
    running: tuple[Running, ...] = ()
