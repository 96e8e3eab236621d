"""Free resources at the moments backfill probes, shared by every job of a pass.

Backfill asks "where could this job run at time t?" for a dozen probe times
per job (offsets from now that double: one resolution, two, four, ..., as
Slurm's will-run test widens its window). The free resources at a probe
depend only on what is running and when it reaches its time limit, not on
the job asking, so a ``Timeline`` computes each probe's picture once and
every job of the pass reuses it. A job that backfill starts now changes the
pictures before its end: ``take`` subtracts it from those, and its release
is recorded for the probes not computed yet. Per node, the releases stay
sorted by time, so "since when does this node have enough?" is a short walk.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from controller.core.nodeindex import FreeNodes, NodeOrder
from controller.core.plan import Start
from controller.core.request import gres_fit, gres_minus, gres_plus
from controller.core.snapshot import Gres, NodeView


@dataclass(frozen=True, slots=True)
class Release:
    """Resources a job gives back when it reaches its time limit."""

    at: int
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]
    gres: tuple[Gres, ...] = ()  # per node; empty: none

    @classmethod
    def of(cls, start: Start, at: int) -> Release:
        """What ``start`` holds, given back at ``at``."""
        return cls(at, start.nodes, start.cpus, start.memory, start.gres)

    def items(self) -> Iterator[tuple[str, int, int, Gres]]:
        """(node, CPUs, MiB, GRES) per node."""
        gres = self.gres or ((),) * len(self.nodes)
        return zip(self.nodes, self.cpus, self.memory, gres, strict=True)


def ceil_to(t: int, resolution: int) -> int:
    return -(-t // resolution) * resolution


def _changed(node: NodeView, sign: int, cpus: int, memory: int, gres: Gres) -> NodeView:
    """``node`` after a job gives back (``sign`` 1) or takes (-1) what it holds there."""
    free_cpus = max(0, min(node.cpus, node.free_cpus + sign * cpus))
    return replace(
        node,
        free_cpus=free_cpus,
        free_memory=max(0, min(node.real_memory, node.free_memory + sign * memory)),
        idle=free_cpus == node.cpus,
        gres=gres_plus(node.gres, gres) if sign > 0 else gres_minus(node.gres, gres),
    )


class Timeline:
    """Probe times and the free resources at each, computed once per pass."""

    def __init__(
        self,
        now: int,
        horizon: int,
        resolution: int,
        nodes: Mapping[str, NodeView],
        releases: list[Release],
        groups: Mapping[str, frozenset[str]],
        order: NodeOrder,
    ) -> None:
        self.times: list[int] = []
        step = resolution
        while (when := ceil_to(now + step, resolution)) < horizon:
            self.times.append(when)
            step *= 2
        self._nodes = nodes  # free now; the pass's starts are already taken from it
        self._releases = sorted(releases, key=lambda r: r.at)
        self._groups = groups
        self._order = order
        self._states: list[tuple[dict[str, NodeView], dict[str, int]]] = []
        self._indexes: dict[int, FreeNodes] = {}
        self.by_node: dict[str, list[tuple[int, int, int, Gres]]] = {}
        for rel in self._releases:
            self._index(rel)

    def _index(self, rel: Release) -> None:
        for name, cpus, memory, gres in rel.items():
            bisect.insort(self.by_node.setdefault(name, []), (rel.at, cpus, memory, gres))

    def _totals(self, free: Mapping[str, NodeView]) -> dict[str, int]:
        return {
            group: sum(n.free_cpus for name in members if (n := free[name]).usable)
            for group, members in self._groups.items()
        }

    def state(self, i: int) -> tuple[dict[str, NodeView], dict[str, int]]:
        """The free resources at ``times[i]`` and the usable free CPUs per group."""
        while len(self._states) <= i:
            k = len(self._states)
            if k == 0:
                free, totals = dict(self._nodes), self._totals(self._nodes)
                begin = -1
            else:
                previous, before = self._states[-1]
                free, totals = dict(previous), dict(before)
                begin = self.times[k - 1]
            end = self.times[k]
            lo = bisect.bisect_right(self._releases, begin, key=lambda r: r.at)
            hi = bisect.bisect_right(self._releases, end, key=lambda r: r.at)
            for rel in self._releases[lo:hi]:
                for name, cpus, memory, gres in rel.items():
                    self._change(free, totals, name, 1, cpus, memory, gres)
            self._states.append((free, totals))
        return self._states[i]

    def free_nodes(self, i: int) -> FreeNodes:
        """The free CPUs per node position at ``times[i]``, for candidate scans."""
        if i not in self._indexes:
            self._indexes[i] = FreeNodes(self.state(i)[0], self._order)
        return self._indexes[i]

    def take(self, start: Start, end: int | None) -> None:
        """A job started now and holds its allocation until ``end`` (None: past the window)."""
        held = Release.of(start, 0)
        for i, (when, (free, totals)) in enumerate(zip(self.times, self._states, strict=False)):
            if end is not None and when >= end:
                break
            for name, cpus, memory, gres in held.items():
                self._change(free, totals, name, -1, cpus, memory, gres)
            if i in self._indexes:
                self._indexes[i].taken(start)
        if end is not None:
            rel = replace(held, at=end)
            bisect.insort(self._releases, rel, key=lambda r: r.at)
            self._index(rel)

    def _change(
        self,
        free: dict[str, NodeView],
        totals: dict[str, int],
        name: str,
        sign: int,
        cpus: int,
        memory: int,
        gres: Gres,
    ) -> None:
        node = free[name]
        changed = free[name] = _changed(node, sign, cpus, memory, gres)
        if node.usable:
            for group, members in self._groups.items():
                if name in members:
                    totals[group] += changed.free_cpus - node.free_cpus

    def ready(self, name: str, node: NodeView, cpus: int, memory: int, gres: Gres, now: int) -> int:
        """When ``node`` (free as ``node`` now) first has ``cpus``, ``memory`` and ``gres`` free."""
        free_cpus, free_memory, free_gres, at = node.free_cpus, node.free_memory, node.gres, now
        for when, more_cpus, more_memory, more_gres in self.by_node.get(name, ()):
            if (
                free_cpus >= cpus
                and free_memory >= memory
                and gres_fit(gres, free_gres) is not None
            ):
                break
            free_cpus, free_memory, at = free_cpus + more_cpus, free_memory + more_memory, when
            free_gres = gres_plus(free_gres, more_gres)
        return at
