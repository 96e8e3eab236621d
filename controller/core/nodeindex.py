"""The pass's node index: nodes as bit positions, candidate scans in C.

A pass numbers the snapshot's nodes once, in selection order (Weight,
lowest first, then configuration order: the order in which Slurm's select
plugin walks its node bitmap), and keeps each partition's nodes as a
``NodeSet``. Where ``place`` looks for candidates, one ``NodeSet.scan`` call
(C, csrc/nodeset.c) walks the partition's bits from where the search
starts and returns the next nodes that have enough free CPUs (``NodeCounts``,
one number per position, kept in step with the pass's starts) and no
reservation overlapping the interval the job would run (``NodeClaims``,
backfill's whole-node promises). Python then looks closely only at the few
nodes the scan returns.

``Bitmaps`` names the implementation: the C classes of corral.nodeset by
default, their pure-Python twins from corral.pynodeset for comparison
(bench/schedule.py runs whole passes with both).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from controller.core.plan import Start
from controller.core.snapshot import NodeView, PartitionView
from corral import nodeset, pynodeset


@dataclass(frozen=True, slots=True)
class Bitmaps:
    """One implementation of the node bitmap and its companions."""

    name: str
    node_set: Any  # NodeSet class
    counts: Any  # NodeCounts class
    claims: Any  # NodeClaims class


class Counted(Protocol):
    """What the free CPU counts read of a node: its view, or the lighter part of one
    that backfill's future pictures keep (``nodefree.Free``, ``core/timeline.py``)."""

    @property
    def free_cpus(self) -> int: ...


C_BITMAPS = Bitmaps("c", nodeset.NodeSet, nodeset.NodeCounts, nodeset.NodeClaims)
PYTHON_BITMAPS = Bitmaps("python", pynodeset.NodeSet, pynodeset.NodeCounts, pynodeset.NodeClaims)


def selection_sorted(nodes: Mapping[str, NodeView]) -> tuple[str, ...]:
    """The nodes by Weight, lowest first, then rank (configuration order); equal
    ones keep the mapping's order (a stable sort)."""
    return _by_keys(tuple(nodes), _selection_keys(nodes))


def _selection_keys(nodes: Mapping[str, NodeView]) -> tuple[tuple[int, int], ...]:
    """Each node's (Weight, rank), in the mapping's order. One comprehension: every
    pass reads them for every node, and a comprehension's attribute reads are faster
    than ``operator.attrgetter``'s (measured)."""
    return tuple([(view.weight, view.rank) for view in nodes.values()])


def _by_keys(names: tuple[str, ...], keys: tuple[tuple[int, int], ...]) -> tuple[str, ...]:
    """``names`` sorted by their ``keys`` (stable); the sort looks the keys up in C,
    without a Python key call per node."""
    return tuple([names[i] for i in sorted(range(len(names)), key=keys.__getitem__)])


#: What a NodeOrder is made from (``NodeOrder.of`` reads it from a snapshot): the
#: bitmaps, the node names in the mapping's order (which breaks ties), each node's
#: (weight, rank), and each partition's name and node list.
OrderKey = tuple[
    "Bitmaps",
    tuple[str, ...],
    tuple[tuple[int, int], ...],
    tuple[tuple[str, tuple[str, ...]], ...],
]


class NodeOrder:
    """Every node of a snapshot as a bit position, in selection order, and each
    partition's nodes as a NodeSet of those positions.

    Made from its ``OrderKey`` alone and read-only once made, so passes whose
    snapshots have equal keys share one (``of``).
    """

    #: The orders used last, most recent first (``of``): a tuple, replaced whole, so
    #: that a pass in another thread reads a consistent one (at worst it makes its own).
    _recent: ClassVar[tuple[NodeOrder, ...]] = ()
    #: Enough for the few snapshots that alternate (the sim's passes see every node,
    #: or only the nodes with a free CPU), few enough that a miss costs little.
    _KEEP: ClassVar[int] = 4

    def __init__(self, key: OrderKey) -> None:
        self.key = key
        bitmaps, names, keys, parts = key
        self.names: tuple[str, ...] = _by_keys(names, keys)
        self.index: dict[str, int] = dict(zip(self.names, range(len(names)), strict=True))
        self.bitmaps = bitmaps
        size = len(self.names)
        index = self.index
        self.masks: dict[str, Any] = {
            name: bitmaps.node_set(
                _range_string(sorted({index[n] for n in members if n in index})), size=size
            )
            for name, members in parts
        }

    @classmethod
    def of(
        cls,
        nodes: Mapping[str, NodeView],
        parts: Iterable[PartitionView],
        bitmaps: Bitmaps = C_BITMAPS,
    ) -> NodeOrder:
        """The order of ``nodes`` and ``parts``: one a recent pass made from an equal
        key, else a new one.

        Every pass sorts and numbers the nodes, though the nodes, their weights and
        the partitions seldom change between passes: their free resources do, which an
        order does not hold. Keys are compared by value and an order is made from its
        key alone, so the order found is the one that would be made: a node added or
        gone, a weight changed (``scontrol update``) or a partition reconfigured makes
        another key. Reading the key walks the nodes once; making an order also sorts
        them and builds a dict and a bitmap per partition.
        """
        key = (
            bitmaps,
            tuple(nodes),
            _selection_keys(nodes),
            tuple((part.name, part.nodes) for part in parts),
        )
        recent = cls._recent
        for i, order in enumerate(recent):
            if order.key == key:
                if i:  # now the most recently used: it goes first
                    cls._recent = (order, *recent[:i], *recent[i + 1 :])
                return order
        order = cls(key)
        cls._recent = (order, *recent[: cls._KEEP - 1])
        return order

    def partition(self, part: PartitionView) -> list[str]:
        """The partition's nodes, in selection order."""
        names = self.names
        return [names[i] for i in self.masks[part.name]]


def _range_string(positions: list[int]) -> str:
    """Ascending distinct ``positions`` as a range string (``0-337``): a NodeSet made
    from one sets each run at once, where one made from the positions checks each in
    Python. Distinct ascending positions that span as many numbers as there are of
    them are one run (a partition of every node is), told without a walk."""
    if positions and positions[-1] - positions[0] == len(positions) - 1:
        return pynodeset.format_runs([(positions[0], positions[-1])])
    runs: list[tuple[int, int]] = []
    for i in positions:
        if runs and runs[-1][1] >= i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return pynodeset.format_runs(runs)


class Reservations:
    """Whole nodes promised to jobs ahead, each for ``[begin, end)``: backfill's
    reservations, kept as NodeClaims so that candidate scans skip them in C."""

    def __init__(self, order: NodeOrder) -> None:
        self.order = order
        self.claims = order.bitmaps.claims(len(order.names))

    def add(self, begin: int, end: int, nodes: Iterable[str]) -> None:
        index = self.order.index
        self.claims.add(begin, end, [index[name] for name in nodes])

    def during(self, begin: int, end: int) -> Claimed:
        """Nodes reserved at any moment of ``[begin, end)``."""
        return Claimed(self, begin, end)

    def free_from(self, begin: int, length: int, nodes: Iterable[str], limit: int) -> int | None:
        """The first time from ``begin`` on (before ``limit``) that no reservation
        claims any of ``nodes`` for ``length`` seconds; None if there is none."""
        index, claims = self.order.index, self.claims
        spans = [span for name in nodes for span in claims.spans(index[name])]
        while begin < limit:
            ends = [e for b, e in spans if b < begin + length and begin < e]
            if not ends:
                return begin
            begin = max(ends)
        return None


class Claimed(Set[str]):
    """The nodes reserved at some moment of ``[begin, end)``: what ``place`` takes
    as ``blocked``. Candidate scans hand the interval to C; the rest of
    placement asks node by node."""

    def __init__(self, reserved: Reservations, begin: int, end: int) -> None:
        self.claims = reserved.claims
        self.begin = begin
        self.end = end
        self._order = reserved.order

    def __contains__(self, name: object) -> bool:
        i = self._order.index.get(name)  # type: ignore[call-overload]
        return i is not None and bool(self.claims.overlaps(i, self.begin, self.end))

    def __iter__(self) -> Iterator[str]:
        names, claims = self._order.names, self.claims
        return (names[i] for i in range(len(names)) if claims.overlaps(i, self.begin, self.end))

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: How many candidates a scan asks for first (``FreeNodes.candidates``).
_BATCH = 16


class FreeNodes:
    """For one pass, or one backfill probe: the free CPUs of each node position.

    ``taken`` brings a start's nodes up to date; the counts only fall during
    a pass, so a scan never misses a node that could fit.
    """

    def __init__(self, nodes: Mapping[str, Counted], order: NodeOrder) -> None:
        self._nodes = nodes
        self.order = order
        # Each position's free CPUs twice: as a list, which ``candidates`` sums
        # without a Python call per node, and as the NodeCounts the C scans read.
        self._free = [nodes[name].free_cpus for name in order.names]
        self._counts = order.bitmaps.counts(self._free)

    def names(self, part: PartitionView) -> list[str]:
        """The partition's nodes with a free CPU, in selection order."""
        names = self.order.names
        return [names[i] for i in self.order.masks[part.name].scan(self._counts, 1)]

    def candidates(
        self,
        part: PartitionView,
        least: int,
        blocked: Set[str],
        after: str | None,
        need: int = 0,
    ) -> tuple[Iterator[str], bool]:
        """The partition's nodes, in selection order from ``after`` (a node whose
        predecessors cannot fit), with ``least`` free CPUs and not ``blocked``; and
        whether their free CPUs reach ``need`` in all.

        Asked for in growing batches: most jobs need only the first few. Where the
        first batch's free CPUs fall short of ``need``, one more scan takes all the
        rest at once and sums theirs without a Python call per node, so that a job the
        candidates cannot hold is told before any of them is looked at.
        """
        mask, claims, begin, end, start = self._scan_of(part, blocked, after)
        first = mask.scan(self._counts, least, claims, begin, end, start, _BATCH)
        free = self._free.__getitem__
        held = sum(map(free, first))
        if held >= need or len(first) < _BATCH:
            return self._batches(mask, least, claims, begin, end, first), held >= need
        rest = mask.scan(self._counts, least, claims, begin, end, first[-1] + 1, len(self._free))
        return map(self.order.names.__getitem__, first + rest), held + sum(map(free, rest)) >= need

    def _batches(
        self, mask: Any, least: int, claims: Any, begin: int, end: int, found: list[int]
    ) -> Iterator[str]:
        """The names of ``found`` (a scan's first batch), then of the scan's further
        nodes, four times as many per batch."""
        names, want = self.order.names, _BATCH
        while True:
            for i in found:
                yield names[i]
            if len(found) < want:
                return
            start = found[-1] + 1
            want *= 4
            found = mask.scan(self._counts, least, claims, begin, end, start, want)

    def _scan_of(
        self, part: PartitionView, blocked: Set[str], after: str | None
    ) -> tuple[Any, Any, int, int, int]:
        """The partition's mask, the claims ``blocked`` stands for with their interval
        (None when nothing is blocked), and the position the scan starts at."""
        order = self.order
        start = order.index.get(after, 0) if after is not None else 0
        if isinstance(blocked, Claimed):
            return order.masks[part.name], blocked.claims, blocked.begin, blocked.end, start
        if blocked:
            raise TypeError("blocked nodes must be a Claimed interval or empty")
        return order.masks[part.name], None, 0, 0, start

    def taken(self, start: Start) -> None:
        nodes, counts, free, index = self._nodes, self._counts, self._free, self.order.index
        for name in start.nodes:
            i = index[name]
            counts[i] = free[i] = nodes[name].free_cpus
