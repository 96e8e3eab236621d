"""A partition's network as the scheduler sees it: its switches or blocks.

The data of ``core/topology.py`` (which builds it and places jobs on it) kept
apart from it, so that the snapshot (``core/snapshot.py``), which carries a
``Topology`` for each partition, and the placement, which reads the snapshot's
nodes, do not import each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.model import Job

__all__ = ["BLOCK", "TREE", "Domain", "Topology", "asks"]

TREE = "topology/tree"
BLOCK = "topology/block"


@dataclass(frozen=True, slots=True)
class Domain:
    """A switch (tree) or a block (block) as one partition sees it."""

    name: str
    level: int
    leaves: tuple[
        int, ...
    ]  # its leaf switches (base blocks), as indices of ``Topology.leaf_names``
    children: tuple[int, ...] = ()  # tree: its child switches, as indices of ``domains``


@dataclass(frozen=True, slots=True)
class Topology:
    """A partition's network: its nodes' leaves and the domains above them.

    Built once per configuration (``build``); a partition's nodes under no
    switch or block are missing from ``leaf_of``, and a job placed by topology
    never gets them.
    """

    kind: str  # TREE or BLOCK
    leaf_names: tuple[str, ...]
    leaf_of: Mapping[str, int]  # node -> its leaf switch (base block)
    domains: tuple[Domain, ...]
    by_level: tuple[tuple[int, ...], ...]  # domain indices per level, in file order
    leaf_domains: tuple[int, ...]  # per leaf, the index of its own domain (tree; block: base)
    optional: bool = False  # TopologyParam=TopoOptional
    weighted: bool = False  # the partition's nodes differ in Weight
    block_size: int = 0  # block: the planning base block size, in nodes
    block_levels: tuple[int, ...] = ()  # block: base blocks per block, as powers of two

    @property
    def top(self) -> int:
        """The highest level a job may name."""
        return len(self.by_level) - 1

    def spans(self, job: Job) -> bool:
        """Whether ``job`` is placed by topology: it may get more than one node, and,
        under TopoOptional, it asks for a topology."""
        if self.optional and not asks(job):
            return False
        if job.max_nodes == 1:
            return False
        if job.nodes_given and job.max_nodes in (0, job.min_nodes):
            return job.min_nodes > 1
        return job.min_nodes > 1 or job.num_tasks > 1 or job.max_nodes > 1


def asks(job: Job) -> bool:
    """Whether the job names a topology (--switches, --segment, --topology-level)."""
    return (
        bool(job.switches or job.segment)
        or job.topology_required >= 0
        or (job.topology_preferred >= 0)
    )
