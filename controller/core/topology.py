"""Which nodes a whole job gets on the network: topology/tree and topology/block.

``place`` (core/placement.py) hands a job that spans nodes to ``choose`` with
its candidate nodes (free enough now, or at the backfill probe asked about)
and a callback that makes the allocation on an ordered pool, as it would
without topology. This module decides in which switch or block, and in which
order within it, the pool is tried; the callback's per-node checks stay exact.

**topology/tree** (Slurm's topology.shtml: "identify the lowest level switch
in the hierarchy that can satisfy a job's request and then allocate
resources on its underlying leaf switches using a best-fit algorithm").
Switches are tried level by level from the job's preferred level (0, the
leaves, unless ``--topology-level`` says otherwise) up to its required level
(the top unless it says otherwise); at one level, the switch with the fewest
candidate nodes that holds the job first (best fit). Within the switch, its
children are taken best fit in turn: the one that holds what is still needed
with the fewest nodes, else the one with the most, and so on down to the leaf
switches, so the job lands on as few leaves and as few switches above them as
it can. As in Slurm, nodes of a lower Weight come first ("If nodes have a
Weight defined, this will override the resource selection based on network
topology"), and no job spans switches without a common parent.

``--switches=N[@max-time]``: until the job has waited ``max-time`` (at most
SchedulerParameters ``max_switch_wait``, 300 s), an allocation over more than
N leaf switches is not taken, so it waits (Reason ``Resources``, as Slurm's);
then any placement is. The wait starts when the scheduler first considers the
job (Slurm's ``wait4switch_start``). Corral tries every switch that could hold
the job within N leaves, where Slurm looks at its first choice only.

**topology/block** (Slurm 24.11's eval_nodes_block.c): a job of N nodes goes
into one block of the smallest level (BlockSizes) that holds N, the block with
the fewest candidate nodes among those that can; within it, base blocks are
taken best fit, preferring the lower-level blocks already used and using no
more of them than N needs. ``--segment=S`` places each S nodes in one base
block on its own.

**Beyond Slurm** (KAI Scheduler's required and preferred placement, for whole
jobs): ``--topology-level=R[:P]`` bounds the job to one switch (block) of level
R or below, never relaxed, and starts the search at level P. For a block
topology a level is the index of a block size (0: the base block).

A job that gets one node is placed as without topology: one node is under one
leaf switch and in one base block whatever is chosen, and Corral's order of
nodes (Weight, then slurm.conf's order) already fills the first switches and
blocks before the next; Slurm's plugins pick the fullest leaf for it instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from controller.core.snapshot import NodeView
from controller.core.topomodel import BLOCK, TREE, Domain, Topology
from controller.model import Job
from corral.config import SlurmConfig
from corral.topologyconf import TopologyConf

_A = TypeVar("_A")
#: The callback that makes an allocation on an ordered pool ([] when it cannot).
Choose = Callable[[list[NodeView]], list[tuple[str, _A]]]


def leaf_limit(job: Job, at: int | None) -> int:
    """The most leaf switches ``job`` may span at ``at`` (0: any number): its
    ``--switches`` count until its wait is over. ``at`` None: the wait is over
    (admission's "could it ever run?")."""
    if not job.switches or at is None:
        return 0
    start = job.switch_wait_start or at
    return job.switches if at < start + job.switch_wait else 0


def shape(job: Job) -> tuple[int, ...]:
    """What of ``job``'s topology request decides where it fits (backfill's alike jobs)."""
    return (
        job.switches,
        job.switch_wait_start,
        job.switch_wait,
        job.segment,
        job.topology_required,
        job.topology_preferred,
    )


def not_before(topo: Topology | None, job: Job, nodes: Iterable[str], now: int) -> int:
    """The earliest time ``job`` may start on ``nodes`` (0: any): the end of its
    ``--switches`` wait when they span more leaf switches than it asks for."""
    if topo is None or not job.switches or leaves_of(topo, nodes) <= job.switches:
        return 0
    return wait_end(job, now)


def wait_end(job: Job, now: int) -> int:
    """When ``job``'s --switches wait ends (0: it has none, or it is over)."""
    if not job.switches:
        return 0
    end = (job.switch_wait_start or now) + job.switch_wait
    return end if end > now else 0


# ---------------------------------------------------------------- building


def build(
    kind: str,
    leaves: Sequence[tuple[str, Sequence[str]]],
    domains: Sequence[tuple[str, int, Sequence[str], Sequence[str]]],
    members: Sequence[str],
    weights: Mapping[str, int],
    *,
    optional: bool = False,
    block_size: int = 0,
    block_levels: tuple[int, ...] = (),
) -> Topology:
    """A partition's topology from the configuration's.

    ``leaves`` are (name, nodes) of the leaf switches or base blocks;
    ``domains`` (name, level, leaf names, child names) every switch or block,
    leaves included; ``members`` the partition's nodes in selection order.
    """
    inside = set(members)
    index = {name: i for i, (name, _) in enumerate(leaves)}
    leaf_of = {n: index[name] for name, nodes in leaves for n in nodes if n in inside}
    named = {name: i for i, (name, *_) in enumerate(domains)}
    made = tuple(
        Domain(name, level, tuple(index[n] for n in under), tuple(named[c] for c in kids))
        for name, level, under, kids in domains
    )
    levels = 1 + max((d.level for d in made), default=0)
    by_level = tuple(tuple(i for i, d in enumerate(made) if d.level == k) for k in range(levels))
    own = {d.leaves[0]: i for i, d in enumerate(made) if d.level == 0}
    return Topology(
        kind,
        tuple(name for name, _ in leaves),
        leaf_of,
        made,
        by_level,
        tuple(own[leaf] for leaf in range(len(leaves))),
        optional=optional,
        weighted=len({weights[n] for n in members}) > 1,
        block_size=block_size,
        block_levels=block_levels,
    )


def of_partition(
    conf: SlurmConfig, members: tuple[str, ...]
) -> tuple[Topology | None, tuple[str, ...]]:
    """The topology of a partition of ``members`` under ``conf`` (None: flat), and
    the members jobs may get: unless TopoOptional, as in Slurm, not those under no
    switch or block (topology.conf's warning names them)."""
    if conf.topology is None:
        return None, members
    weights = {n.name: n.weight for n in conf.nodes}
    topo = from_conf(conf.topology, members, weights, conf.topo_optional)
    if topo.optional:
        return topo, members
    return topo, tuple(n for n in members if n in topo.leaf_of)


def from_conf(
    conf: TopologyConf, members: Sequence[str], weights: Mapping[str, int], optional: bool
) -> Topology:
    """A partition's topology from topology.conf's switches or blocks."""
    if conf.plugin == TREE:
        leaves = [(s.name, s.nodes) for s in conf.switches if not s.switches]
        leaf_names = {s.name for s in conf.switches if not s.switches}
        under = _leaves_under(conf)
        domains = [
            (s.name, s.level, [n for n in under[s.name] if n in leaf_names], s.switches)
            for s in conf.switches
        ]
        return build(TREE, leaves, domains, members, weights, optional=optional)
    bases = conf.base_blocks
    names = [b.name for b in bases]
    return build(
        BLOCK,
        [(b.name, b.nodes) for b in bases],
        [(b.name, b.level, [names[i] for i in b.bases], ()) for b in conf.blocks],
        members,
        weights,
        optional=optional,
        block_size=conf.block_size,
        block_levels=conf.block_levels,
    )


def _leaves_under(conf: TopologyConf) -> dict[str, list[str]]:
    """Each switch's leaf switches, in file order (a leaf: itself)."""
    kids = {s.name: s.switches for s in conf.switches}
    under: dict[str, list[str]] = {}

    def walk(name: str) -> list[str]:
        if name not in under:
            found = [name] if not kids[name] else [leaf for k in kids[name] for leaf in walk(k)]
            under[name] = list(dict.fromkeys(found))
        return under[name]

    for switch in conf.switches:
        walk(switch.name)
    return under


# ---------------------------------------------------------------- choosing


@dataclass(slots=True)
class _Leaves:
    """The pool by leaf: per leaf (an index of ``Topology.leaf_names``) its candidate
    nodes in pool order, how many, and their free CPUs."""

    nodes: list[list[NodeView]]
    count: list[int]
    cpus: list[int]

    def size(self, domain: Domain) -> tuple[int, int]:
        """(candidate nodes, their free CPUs) under ``domain``."""
        leaves = domain.leaves
        return sum(map(self.count.__getitem__, leaves)), sum(map(self.cpus.__getitem__, leaves))


def _by_leaf(topo: Topology, pool: Iterable[NodeView]) -> _Leaves:
    width = len(topo.leaf_names)
    nodes: list[list[NodeView]] = [[] for _ in range(width)]
    cpus = [0] * width
    get = topo.leaf_of.get
    for node in pool:
        leaf = get(node.name)
        if leaf is not None:
            nodes[leaf].append(node)
            cpus[leaf] += node.free_cpus
    return _Leaves(nodes, [len(n) for n in nodes], cpus)


def choose(
    topo: Topology,
    job: Job,
    pool: Sequence[NodeView],
    make: Choose[_A],
    fits: Callable[[NodeView], bool],
    at: int | None,
) -> list[tuple[str, _A]]:
    """The allocation of ``job`` among ``pool`` by topology, or [] (it waits).

    ``make`` allocates on an ordered pool as placement does without topology;
    ``fits`` says whether one node can take its share (for ``--segment``).
    """
    if topo.kind == TREE:
        return _tree(topo, job, pool, make, leaf_limit(job, at))
    if job.segment:
        return _segments(topo, job, pool, make, fits)
    return _block(topo, job, pool, make)


def _needs(job: Job) -> tuple[int, int]:
    """(nodes, CPUs) a domain must have among its candidates to hold the job."""
    return max(job.min_nodes, 1), job.cpus_needed


def _required_leaves(topo: Topology, job: Job) -> set[int] | None:
    """The leaves of the job's ``-w`` nodes (None: one is in none)."""
    found = {topo.leaf_of.get(n) for n in job.req_nodes}
    return None if None in found else {leaf for leaf in found if leaf is not None}


def _ordered(topo: Topology, job: Job, nodes: list[NodeView]) -> list[NodeView]:
    """The pool as placement takes it: ``-w`` nodes first, then lower Weight first
    (stable sorts: topology order within each)."""
    if topo.weighted:
        nodes = sorted(nodes, key=lambda n: n.weight)
    if job.req_nodes:
        nodes = sorted(nodes, key=lambda n: n.name not in job.req_nodes)
    return nodes


# ---------------------------------------------------------------- tree


def _tree(
    topo: Topology, job: Job, pool: Sequence[NodeView], make: Choose[_A], limit: int
) -> list[tuple[str, _A]]:
    leaves = _by_leaf(topo, pool)
    need, cpus = _needs(job)
    required = _required_leaves(topo, job)
    if required is None:
        return []
    low = max(job.topology_preferred, 0)
    high = topo.top if job.topology_required < 0 else min(job.topology_required, topo.top)
    for level in range(low, high + 1):
        for _, i in sorted(_holding(topo, level, leaves, need, cpus, required, limit)):
            ordered = _arrange(topo, i, need, leaves, set())
            got = make(_ordered(topo, job, ordered))
            if got and (not limit or _leaf_count(topo, got) <= limit):
                return got
    return []


def _holding(
    topo: Topology,
    level: int,
    leaves: _Leaves,
    need: int,
    cpus: int,
    required: set[int],
    limit: int,
) -> list[tuple[int, int]]:
    """(candidates, index) of the switches of ``level`` that could hold the job: enough
    nodes and CPUs, every ``-w`` node, and (``limit``) enough within that many leaves."""
    if level == 0:  # one leaf each: read the counts directly
        counts, free, domain_of = leaves.count, leaves.cpus, topo.leaf_domains
        return [
            (counts[leaf], domain_of[leaf])
            for leaf in range(len(counts))
            if counts[leaf] >= need and free[leaf] >= cpus and required <= {leaf}
        ]
    found: list[tuple[int, int]] = []
    for i in topo.by_level[level]:
        domain = topo.domains[i]
        nodes, spare = leaves.size(domain)
        if nodes < need or spare < cpus or not required.issubset(domain.leaves):
            continue
        if limit and _within(leaves, domain, limit) < need:
            continue
        found.append((nodes, i))
    return found


def _within(leaves: _Leaves, domain: Domain, limit: int) -> int:
    """The most candidate nodes ``limit`` leaves of ``domain`` offer."""
    counts = sorted(map(leaves.count.__getitem__, domain.leaves), reverse=True)
    return sum(counts[:limit])


def _arrange(
    topo: Topology, index: int, want: int, leaves: _Leaves, done: set[int]
) -> list[NodeView]:
    """The candidates under switch ``index``, children best fit first (recursively):
    the child that holds what is still wanted with the fewest nodes, else the one
    with the most; the rest follow, so the allocation may use them if it must."""
    domain = topo.domains[index]
    if not domain.children:
        out: list[NodeView] = []
        for leaf in domain.leaves:
            if leaf not in done:
                done.add(leaf)
                out.extend(leaves.nodes[leaf])
        return out
    left = [(leaves.size(topo.domains[c])[0], c) for c in domain.children]
    left = [(count, c) for count, c in left if count]
    ordered: list[NodeView] = []
    while left:
        count, child = _best_fit(left, want)
        left.remove((count, child))
        ordered.extend(_arrange(topo, child, max(want, 0), leaves, done))
        want -= count
    return ordered


def _best_fit(options: list[tuple[int, int]], want: int) -> tuple[int, int]:
    """Slurm's ``_topo_compare_switches`` among (count, index): the one that holds
    ``want`` with the fewest, else the one with the most; the first on ties."""
    fitting = [o for o in options if o[0] >= want]
    if fitting:
        return min(fitting)
    return min(options, key=lambda o: (-o[0], o[1]))


def _leaf_count(topo: Topology, got: Sequence[tuple[str, object]]) -> int:
    leaf_of = topo.leaf_of
    return len({leaf_of[name] for name, _ in got})


def leaves_of(topo: Topology, nodes: Iterable[str]) -> int:
    """How many leaf switches (base blocks) ``nodes`` are on."""
    return len({topo.leaf_of[n] for n in nodes if n in topo.leaf_of})


# ---------------------------------------------------------------- block


def block_levels_for(topo: Topology, nodes: int) -> tuple[int | None, int]:
    """Slurm's levels for a job of ``nodes`` nodes: the index of the smallest block
    size that holds it (None: none does, and all base blocks count as one block),
    and how many base blocks make one of the lower-level blocks it may use."""
    bases = math.ceil(nodes / topo.block_size)
    need = math.ceil(math.log2(bases)) if bases > 1 else 0
    level = next((j for j, e in enumerate(topo.block_levels) if e >= need), None)
    lower = max((e for e in topo.block_levels if e <= need - 1), default=0)
    return level, 1 << lower


def _block_domains(topo: Topology, level: int | None) -> list[Domain]:
    if level is None:
        every = tuple(range(len(topo.leaf_names)))
        return [Domain("*", len(topo.block_levels), every)]
    return [topo.domains[i] for i in topo.by_level[level]]


def _block(
    topo: Topology, job: Job, pool: Sequence[NodeView], make: Choose[_A]
) -> list[tuple[str, _A]]:
    """Slurm's eval_nodes_block for ``job``'s nodes, then ``make`` on them."""
    need, cpus = _needs(job)
    level, low = block_levels_for(topo, need)
    allowed, level = _bounded(topo, job, level)
    if not allowed:
        return []
    leaves = _by_leaf(topo, pool)
    most = -(-need // (low * topo.block_size))  # lower-level blocks the job may use
    for domain in _holding_blocks(topo, level, leaves, need, cpus, low, most):
        chosen = _base_blocks(domain, need, low, most, leaves)
        nodes = [n for b in chosen for n in leaves.nodes[b]]
        got = make(_ordered(topo, job, nodes))
        if got:
            return got
    return []


def _holding_blocks(
    topo: Topology, level: int | None, leaves: _Leaves, need: int, cpus: int, low: int, most: int
) -> list[Domain]:
    """The blocks of ``level`` that could hold the job, in Slurm's order: the fewest
    candidate nodes first, the last on ties."""
    if level == 0:  # base blocks: read the counts directly
        counts, free = leaves.count, leaves.cpus
        ranked = [
            (counts[b], -b) for b in range(len(counts)) if counts[b] >= need and free[b] >= cpus
        ]
        return [topo.domains[topo.leaf_domains[-b]] for _, b in sorted(ranked)]
    found: list[tuple[int, int, Domain]] = []
    for k, domain in enumerate(_block_domains(topo, level)):
        count, spare = leaves.size(domain)
        if spare < cpus or _best_lower(leaves, domain, low, most) < need:
            continue
        found.append((count, -k, domain))
    return [domain for _, _, domain in sorted(found, key=lambda r: (r[0], r[1]))]


def _bounded(topo: Topology, job: Job, level: int | None) -> tuple[bool, int | None]:
    """The block level after ``--topology-level``: raised to the preferred one, and
    whether it is within the required one."""
    if job.topology_preferred >= 0 and level is not None:
        level = max(level, min(job.topology_preferred, topo.top))
    if job.topology_required >= 0 and (level is None or level > job.topology_required):
        return False, level
    return True, level


def _best_lower(leaves: _Leaves, domain: Domain, low: int, most: int) -> int:
    """The candidates of the ``most`` fullest lower-level blocks in ``domain``."""
    groups: dict[int, int] = {}
    count = leaves.count
    for leaf in domain.leaves:
        groups[leaf // low] = groups.get(leaf // low, 0) + count[leaf]
    return sum(sorted(groups.values(), reverse=True)[:most])


def _base_blocks(domain: Domain, need: int, low: int, most: int, leaves: _Leaves) -> list[int]:
    """Slurm's ``_choose_best_bblock`` loop: base blocks in the lower-level blocks
    already used first, then a lower-level block that holds the rest (the smallest),
    else the fullest; within those, the base block that holds the rest with the
    fewest nodes, else the fullest; at most ``most`` lower-level blocks."""
    left = {b: leaves.count[b] for b in domain.leaves if leaves.count[b]}
    used: set[int] = set()
    chosen: list[int] = []
    while need > 0 and left:
        group: dict[int, int] = {}
        for b, count in left.items():
            group[b // low] = group.get(b // low, 0) + count
        best = -1
        for b in domain.leaves:
            if b in left:
                best = b if best < 0 else _better_base(b, best, need, left, group, used, low)
        same = best // low in used
        if not same and len(used) >= most:
            break
        chosen.append(best)
        used.add(best // low)
        need -= left.pop(best)
    return chosen


def _better_base(
    i: int,
    best: int,
    need: int,
    left: Mapping[int, int],
    group: Mapping[int, int],
    used: set[int],
    low: int,
) -> int:
    """``i`` or ``best``, as Slurm's ``_choose_best_bblock`` compares them."""
    if low > 1 and i // low != best // low:
        same_i, same_best = i // low in used, best // low in used
        if same_i != same_best:
            return i if same_i else best
        fit_i, fit_best = group[i // low] >= need, group[best // low] >= need
        if fit_i != fit_best:
            return i if fit_i else best
        if group[i // low] != group[best // low]:
            smaller = group[i // low] < group[best // low]
            return i if smaller == fit_i else best
    fit_i, fit_best = left[i] >= need, left[best] >= need
    if fit_i and not fit_best:
        return i
    if not fit_i and not fit_best and left[i] >= left[best]:
        return i
    if fit_i and left[i] <= left[best]:
        return i
    return best


def _segments(
    topo: Topology,
    job: Job,
    pool: Sequence[NodeView],
    make: Choose[_A],
    fits: Callable[[NodeView], bool],
) -> list[tuple[str, _A]]:
    """``--segment=S``: each S nodes in one base block, chosen as a job of S nodes
    is (the base block with the fewest nodes that can take the job's share, the
    last on ties), one segment after another. A block's nodes are checked with
    ``fits`` when it is first chosen, so its count is exact from then on."""
    size = job.segment
    leaves = _by_leaf(topo, pool)
    count, nodes = leaves.count, leaves.nodes
    checked: set[int] = set()
    chosen: list[NodeView] = []
    segments = max(job.min_nodes, 1) // size
    while segments:
        ranked = [(count[b], -b) for b in range(len(count)) if count[b] >= size]
        if not ranked:
            return []
        block = -min(ranked)[1]
        if block not in checked:
            checked.add(block)
            nodes[block] = [n for n in nodes[block] if fits(n)]
            count[block] = len(nodes[block])
            continue  # ranked again with the exact count
        chosen.extend(nodes[block][:size])
        del nodes[block][:size]
        count[block] -= size
        segments -= 1
    return make(_ordered(topo, job, chosen))
