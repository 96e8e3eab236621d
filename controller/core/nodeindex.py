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
from typing import Any, Protocol

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
    ones keep the mapping's order (a stable sort). Every pass sorts its nodes, so the
    keys are made in one comprehension and the sort looks them up in C."""
    names = list(nodes)
    keys = [(view.weight, view.rank) for view in nodes.values()]
    return tuple(names[i] for i in sorted(range(len(names)), key=keys.__getitem__))


class NodeOrder:
    """Every node of a snapshot as a bit position, in selection order, and each
    partition's nodes as a NodeSet of those positions."""

    def __init__(
        self,
        nodes: Mapping[str, NodeView],
        parts: Iterable[PartitionView],
        bitmaps: Bitmaps = C_BITMAPS,
    ) -> None:
        self.names: tuple[str, ...] = selection_sorted(nodes)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.bitmaps = bitmaps
        size = len(self.names)
        index = self.index
        self.masks: dict[str, Any] = {
            part.name: bitmaps.node_set(
                _range_string(sorted(index[n] for n in part.nodes if n in index)), size=size
            )
            for part in parts
        }

    def free_cpus(self, nodes: Mapping[str, Counted]) -> Any:
        """A NodeCounts of each position's free CPUs in ``nodes``."""
        return self.bitmaps.counts([nodes[name].free_cpus for name in self.names])

    def partition(self, part: PartitionView) -> list[str]:
        """The partition's nodes, in selection order."""
        names = self.names
        return [names[i] for i in self.masks[part.name]]


def _range_string(positions: list[int]) -> str:
    """Ascending ``positions`` as a range string (``0-337``): a NodeSet made from one
    sets each run at once, where one made from the positions checks each in Python,
    and a pass numbers every partition's nodes anew."""
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


class FreeNodes:
    """For one pass, or one backfill probe: the free CPUs of each node position.

    ``taken`` brings a start's nodes up to date; the counts only fall during
    a pass, so a scan never misses a node that could fit.
    """

    def __init__(self, nodes: Mapping[str, Counted], order: NodeOrder) -> None:
        self._nodes = nodes
        self.order = order
        self._counts = order.free_cpus(nodes)

    def names(self, part: PartitionView) -> list[str]:
        """The partition's nodes with a free CPU, in selection order."""
        names = self.order.names
        return [names[i] for i in self.order.masks[part.name].scan(self._counts, 1)]

    def candidates(
        self, part: PartitionView, least: int, blocked: Set[str], after: str | None
    ) -> Iterator[str]:
        """The partition's nodes, in selection order from ``after`` (a node whose
        predecessors cannot fit), with ``least`` free CPUs and not ``blocked``.

        Asked for in growing batches: most jobs need only the first few.
        """
        order = self.order
        mask = order.masks[part.name]
        start = order.index.get(after, 0) if after is not None else 0
        if isinstance(blocked, Claimed):
            claims, begin, end = blocked.claims, blocked.begin, blocked.end
        else:
            claims, begin, end = None, 0, 0
            if blocked:
                raise TypeError("blocked nodes must be a Claimed interval or empty")
        names, want = order.names, 16
        while True:
            found = mask.scan(self._counts, least, claims, begin, end, start, want)
            for i in found:
                yield names[i]
            if len(found) < want:
                return
            start = found[-1] + 1
            want *= 4

    def taken(self, start: Start) -> None:
        nodes, counts, index = self._nodes, self._counts, self.order.index
        for name in start.nodes:
            counts[index[name]] = nodes[name].free_cpus
