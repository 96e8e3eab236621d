"""Free resources at the moments backfill tries a job at, shared by every job of a pass.

Backfill asks "where could this job run at time t?" at each moment the free
resources or the plans can change, in time order, as Slurm's backfill walks
its time slots: each end of a running job (its time limit, on the
``bf_resolution`` grid), each end of a plan made this pass (``add``), and the
edges of advance reservations; besides those, offsets from now that double
(one resolution, two, four, ...) keep a probe in every stretch without an
event, for what changes between events (licenses, a ``--switches`` wait).
The free resources at a moment depend only on what is running and when it
reaches its time limit, not on the job asking, so a ``Timeline`` computes
each moment's picture once and every job of the pass reuses it. A job that
backfill starts now changes the pictures before its end: ``take`` subtracts
it from those, and its release is recorded (and its end made a moment) for
those not computed yet. Per node, the releases stay sorted by time, so
"since when does this node have enough?" is a short walk.

A job is placed at few of the moments it is tried at (elsewhere only the usable
free CPUs per partition are counted), and then looks closely at few nodes: the
candidate scan reads the free CPUs alone. So a picture keeps each node that an
end or a start changed as its ``nodefree.Free`` part, changed by ``given`` and
``taken`` in the order ``give`` and ``take`` would change a view, and a view is
made of it (``nodefree.with_free``: the view those would have made) only when
a placement reads the node.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from controller.core import nodefree
from controller.core.nodeindex import FreeNodes, NodeOrder
from controller.core.plan import Start
from controller.core.snapshot import Gres, NodeView


@dataclass(frozen=True, slots=True)
class Release:
    """Resources a job gives back when it reaches its time limit."""

    at: int
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]
    gres: tuple[Gres, ...] = ()  # per node; empty: none
    share: int = 0  # the job shares its CPUs (OverSubscribe; 0: it keeps them)
    partition: str = ""  # whose load on the nodes it shares CPUs of

    @classmethod
    def of(cls, start: Start, at: int) -> Release:
        """What ``start`` holds, given back at ``at``."""
        return cls(
            at, start.nodes, start.cpus, start.memory, start.gres, start.share, start.partition
        )

    def items(self) -> Iterator[tuple[str, int, int, Gres]]:
        """(node, CPUs, MiB, GRES) per node."""
        gres = self.gres or ((),) * len(self.nodes)
        return zip(self.nodes, self.cpus, self.memory, gres, strict=True)


def ceil_to(t: int, resolution: int) -> int:
    return -(-t // resolution) * resolution


class _State:
    """The free resources at one trial time."""

    __slots__ = ("base", "gained", "nodes", "totals")

    def __init__(
        self,
        base: Mapping[str, NodeView],
        nodes: dict[str, NodeView | nodefree.Free],
        totals: dict[str, int],
        gained: set[str],
    ) -> None:
        self.base = base  # the nodes free now, when the first picture of this one's chain was made
        self.nodes = nodes  # per node: its view in ``base``, or its part once changed since
        self.totals = totals  # the usable free CPUs per group
        self.gained = gained  # the nodes some release has given to since now


class _Picture(Mapping[str, NodeView]):
    """A trial time's free resources as views, each made when first read.

    Per node, the last view made is kept (``_made``, across pictures and passes)
    with the two it was made of: the view now, matched by identity (frozen, so the
    same fields), and the part, matched by value. ``with_free`` of equal inputs is an
    equal view, so a kept view is the one that would be made. Pictures of a pass
    share most of their parts, and consecutive passes (the sim's events, the
    controller's passes) mostly see the same views of busy nodes and the same jobs
    ending, so most views placement reads are made once, not once per pass. An entry
    is replaced whole and checked before use (a pass in another thread at worst makes
    a view again), one per node name: the cache stays the size of the cluster.
    """

    __slots__ = ("_state",)

    _made: ClassVar[dict[str, tuple[NodeView, nodefree.Free, NodeView]]] = {}

    def __init__(self, state: _State) -> None:
        self._state = state

    def __getitem__(self, name: str) -> NodeView:
        node = self._state.nodes[name]
        if isinstance(node, NodeView):
            return node
        base = self._state.base[name]
        made = self._made.get(name)
        if made is None or made[0] is not base or made[1] != node:
            view = nodefree.with_free(base, node, base.kept_ids, base.shared_ids)
            made = self._made[name] = (base, node, view)
        return made[2]

    def __iter__(self) -> Iterator[str]:
        return iter(self._state.nodes)

    def __len__(self) -> int:
        return len(self._state.nodes)


class Timeline:
    """Trial times and the free resources at each, computed once per pass."""

    def __init__(
        self,
        now: int,
        horizon: int,
        resolution: int,
        nodes: Mapping[str, NodeView],
        releases: list[Release],
        groups: Mapping[str, frozenset[str]],
        order: NodeOrder,
        edges: Iterable[int] = (),
    ) -> None:
        self.horizon = horizon
        self.resolution = resolution
        self.first = ceil_to(now + resolution, resolution)  # the earliest trial time
        moments = {ceil_to(t, resolution) for t in (*(r.at for r in releases), *edges)}
        step = resolution
        while (when := ceil_to(now + step, resolution)) < horizon:
            moments.add(when)
            step *= 2
        self.times: list[int] = sorted({t for m in moments if (t := max(m, self.first)) < horizon})
        self._nodes = nodes  # free now; the pass's starts are already taken from it
        self._releases = sorted(releases, key=lambda r: r.at)
        self._groups = groups
        self._order = order
        self._states: list[_State] = []  # per computed trial time
        self._indexes: dict[int, FreeNodes] = {}  # by trial time
        # Per node, (when, release, its index on the node) in time order.
        self.by_node: dict[str, list[tuple[int, int, Release]]] = {}
        # Per node, what it has free after each of those releases (``ready``):
        # made when first asked and kept while the node now and its releases stay
        # the same, since the jobs a pass reserves for come back to the same nodes.
        self._walks: dict[str, tuple[NodeView, list[tuple[int, nodefree.Free]]]] = {}
        for rel in self._releases:  # in time order: each node's list comes out sorted
            for i, name in enumerate(rel.nodes):
                self.by_node.setdefault(name, []).append((rel.at, i, rel))

    def _index(self, rel: Release) -> None:
        for i, name in enumerate(rel.nodes):
            bisect.insort(self.by_node.setdefault(name, []), (rel.at, i, rel), key=_when)
            self._walks.pop(name, None)

    def _totals(self, free: Mapping[str, NodeView]) -> dict[str, int]:
        return {
            group: sum(n.free_cpus for name in members if (n := free[name]).usable)
            for group, members in self._groups.items()
        }

    def totals(self, i: int) -> dict[str, int]:
        """The usable free CPUs per group at ``times[i]``."""
        return self._state(i).totals

    def free(self, i: int) -> Mapping[str, NodeView]:
        """The free resources at ``times[i]``, per node."""
        return _Picture(self._state(i))

    def gained(self, i: int) -> set[str]:
        """The nodes that some job's end gives resources back to by ``times[i]``: busy
        now, so a plan that takes them first leaves the nodes free now to backfill."""
        return self._state(i).gained

    def _state(self, i: int) -> _State:
        while len(self._states) <= i:
            self._states.append(self._next(len(self._states)))
        return self._states[i]

    def _next(self, k: int) -> _State:
        """The state at ``times[k]`` from the one before it (or from now)."""
        if k == 0:
            base = dict(self._nodes)
            state = _State(base, dict(base), self._totals(base), set())
            begin = -1
        else:
            previous = self._states[k - 1]
            state = _State(
                previous.base, dict(previous.nodes), dict(previous.totals), set(previous.gained)
            )
            begin = self.times[k - 1]
        lo = bisect.bisect_right(self._releases, begin, key=_at)
        hi = bisect.bisect_right(self._releases, self.times[k], key=_at)
        for rel in self._releases[lo:hi]:
            self._change(state, rel, nodefree.given)
            state.gained.update(rel.nodes)
        return state

    def add(self, when: int) -> None:
        """Make ``when`` (on the resolution: the end of a plan) a trial time too."""
        if when < self.first or when >= self.horizon:
            return
        k = bisect.bisect_left(self.times, when)
        if k < len(self.times) and self.times[k] == when:
            return
        self.times.insert(k, when)
        if k < len(self._states):
            self._states.insert(k, self._next(k))

    def free_nodes(self, i: int) -> FreeNodes:
        """The free CPUs per node position at ``times[i]``, for candidate scans."""
        when = self.times[i]
        if when not in self._indexes:
            self._indexes[when] = FreeNodes(self._state(i).nodes, self._order)
        return self._indexes[when]

    def take(self, start: Start, end: int | None) -> None:
        """A job started now and holds its allocation until ``end`` (None: past the window)."""
        held = Release.of(start, 0)
        for when, state in zip(self.times, self._states, strict=False):
            if end is not None and when >= end:
                break
            self._change(state, held, nodefree.taken)
            if when in self._indexes:
                self._indexes[when].taken(start)
        if end is not None:
            rel = replace(held, at=end)
            bisect.insort(self._releases, rel, key=_at)
            self._index(rel)
            self.add(ceil_to(end, self.resolution))

    def _change(
        self,
        state: _State,
        held: Release,
        change: Callable[[nodefree.Node, int, int, Gres, int, str], nodefree.Free],
    ) -> None:
        """Apply ``change`` (``nodefree.taken`` or ``given``) of what ``held`` holds
        to ``state``, keeping the usable free CPUs per group."""
        free, totals = state.nodes, state.totals
        for name, cpus, memory, gres in held.items():
            node = free[name]
            left = free[name] = change(node, cpus, memory, gres, held.share, held.partition)
            if state.base[name].usable:
                for group, members in self._groups.items():
                    if name in members:
                        totals[group] += left.free_cpus - node.free_cpus

    def ready(self, start: Start, nodes: Mapping[str, NodeView], now: int) -> int:
        """When every node of ``start`` (free as in ``nodes`` now) first holds what
        ``start`` takes there, as the jobs on it reach their limits."""
        at = now
        per_node = start.gres or ((),) * len(start.nodes)
        for name, cpus, memory, gres in zip(
            start.nodes, start.cpus, start.memory, per_node, strict=True
        ):
            node = nodes[name]
            if nodefree.fits(node, cpus, memory, gres, start.share, start.partition):
                continue
            if not (start.share or node.shared or gres):
                plain = self._plain_ready(name, node, cpus, memory)
                if plain is not None:
                    at = max(at, plain)
                    continue
            for when, free in self._walk(name, node):
                at = max(at, when)
                if nodefree.fits(free, cpus, memory, gres, start.share, start.partition):
                    break
        return at

    def _plain_ready(self, name: str, node: NodeView, cpus: int, memory: int) -> int | None:
        """``ready``'s walk for one node where no job shares CPUs or holds GRES: the
        free CPUs and memory only add up (to the node's size), so no ``Free`` is made.
        The time the node first holds ``cpus`` and ``memory``, or of its last release
        when it never does; None where some release shares CPUs or gives GRES back
        (then ``_walk`` decides)."""
        free_cpus, free_memory = node.free_cpus, node.free_memory
        at: int | None = None
        for when, i, rel in self.by_node.get(name, ()):
            if rel.share or rel.gres:
                return None
            free_cpus = min(free_cpus + rel.cpus[i], node.cpus)
            free_memory = min(free_memory + rel.memory[i], node.real_memory)
            at = when
            if memory <= free_memory and cpus <= free_cpus:
                break
        return at

    def _walk(self, name: str, node: NodeView) -> list[tuple[int, nodefree.Free]]:
        """(when, what ``node`` has free then) after each release on it in turn."""
        kept = self._walks.get(name)
        if kept is not None and kept[0] is node:
            return kept[1]
        states = []
        free: nodefree.Node = node
        for when, i, rel in self.by_node.get(name, ()):
            gres = rel.gres[i] if rel.gres else ()
            free = nodefree.given(free, rel.cpus[i], rel.memory[i], gres, rel.share, rel.partition)
            states.append((when, free))
        self._walks[name] = (node, states)
        return states


def _when(entry: tuple[int, int, Release]) -> int:
    return entry[0]


def _at(release: Release) -> int:
    return release.at
