"""What a job takes from a node's free resources, what it gives back, and whether it fits.

The one free-resource arithmetic: the main pass and backfill as they start
jobs (``placement.take``), backfill's future pictures as running jobs reach
their limits (``core/timeline.py``), preemption as it frees its victims'
nodes (``core/preempt.py``) and the store's re-check of a plan's starts
against the ledger (``fits`` on the view ``snapshots.node_view`` builds) all
change or test a ``NodeView`` here, so the picture a pass works on, the
pictures it foresees and the ledger cannot disagree on what is free.

OverSubscribe, as cons_tres (``_get_job_node_req``, ``_verify_node_state``),
counted here; which CPU ids a start gets is ``core/devices.py``, on the chosen
nodes only:

* A job keeps its CPUs to itself (``share`` 0) or shares them with up to
  ``share`` jobs of its partition per CPU (OverSubscribe=FORCE, or YES and
  ``--oversubscribe``: ``request.share``). Whole-node jobs never share.
* A node's CPUs are *held* by the jobs that keep them and *loaded* per
  partition by the jobs that share them (``NodeView.shared``). Sharing jobs
  take idle CPUs first (Slurm's test 1), so the free (idle) CPUs are
  ``max(cpus - held - loads, 0)``: a sharing job lowers them by its full size
  until none is idle, and its leaving raises them only as far as the other
  loads allow.
* A job that keeps its CPUs fits on free CPUs of a node where no other
  partition's jobs share CPUs, and marks the node ``unshared``.
* A sharing job fits on a node no job keeps CPUs on (not ``unshared``) while
  its partition's load stays within ``share`` jobs a CPU
  (``load + cpus <= share * cpus``): it needs no idle CPU.
* Memory and GRES are never shared: each job takes its own, and fits only
  where they are free.
* A node is ``idle`` (what ``--exclusive`` needs) when all its CPUs are free.

Functions take the node's ``NodeView`` and return a new one (``changed``), so
fields they do not concern pass through.
"""

from __future__ import annotations

from typing import NamedTuple

from controller.core.snapshot import Gres, NodeView

#: ``NodeView.shared``: per partition, (partition, CPUs asked in all, most CPUs of one job).
Shared = tuple[tuple[str, int, int], ...]


class Free(NamedTuple):
    """A node's size and what jobs coming and going change of it: the part of a
    ``NodeView`` this arithmetic reads and writes, lighter to make than a view
    for a walk over many states (``Timeline.ready``) and for backfill's future
    pictures, most of which are only counted, never placed on (``Timeline``)."""

    cpus: int
    real_memory: int
    free_cpus: int
    free_memory: int
    gres: Gres
    unshared: bool
    shared: Shared
    idle: bool  # what the view's ``idle`` becomes: after an end, whether all CPUs are free


#: What the functions below read: a view, or its ``Free`` part.
Node = NodeView | Free


def free_cpus(cpus: int, held: int, shared: Shared) -> int:
    """Idle CPUs of a node with ``cpus``, ``held`` by jobs that keep them and
    ``shared`` by the others (which take idle CPUs first)."""
    if not shared:  # most nodes: no loads to add up
        return max(cpus - held, 0)
    return max(cpus - held - sum(load for _, load, _ in shared), 0)


def held(node: Node) -> int:
    """CPUs held on ``node`` by jobs that keep them to themselves.

    Read back from the view: the CPUs that are neither free nor loaded by
    sharing jobs. With no CPU idle the split is known from the node-state
    rule: a node with a job that keeps its CPUs takes no sharing job after
    it, and that job took only idle CPUs, so its loads never exceed the rest.
    """
    if not node.shared:
        return max(node.cpus - node.free_cpus, 0)
    loads = sum(load for _, load, _ in node.shared)
    if node.free_cpus or node.unshared or not loads:
        return max(node.cpus - loads - node.free_cpus, 0)
    return 0


def load(node: Node, partition: str) -> int:
    """CPUs asked in all by ``partition``'s jobs that share CPUs on ``node``."""
    return next((cpus for name, cpus, _ in node.shared if name == partition), 0)


def cpus_free(node: Node, partition: str, share: int, stacking: bool) -> int:
    """CPUs of ``node`` a job of ``partition`` may get (``share`` as ``request.share``).

    ``stacking`` (sharing jobs only) allows CPUs other jobs of the partition
    use, up to ``share`` jobs on each; without it only idle CPUs count,
    which is what Slurm tries first.
    """
    if not share:
        if node.shared and any(name != partition for name, _, _ in node.shared):
            return 0  # Slurm: busy with jobs that share CPUs in another partition
        return node.free_cpus
    if node.unshared:
        return 0
    if not stacking:
        return node.free_cpus
    return max(0, min(node.cpus, share * node.cpus - load(node, partition)))


def add_load(loads: tuple[int, ...], ids: int) -> tuple[int, ...]:
    """``NodeView.shared_ids`` once a sharing job is given the CPUs in mask ``ids``:
    each of them moves up one load."""
    out = []
    below = -1  # every CPU has a load of at least 0
    for level in (*loads, 0):
        out.append(level | (ids & below))
        below = level
    while out and not out[-1]:
        out.pop()
    return tuple(out)


def fits(node: Node, cpus: int, memory: int, gres: Gres, share: int, partition: str) -> bool:
    """Whether a job of ``partition`` that shares (``share`` > 0) or keeps its
    CPUs may take ``cpus``, ``memory`` MiB and ``gres`` on ``node`` now."""
    if memory > node.free_memory or (gres and not gres_covered(gres, node.gres)):
        return False
    if not share and not node.shared:  # the common case, without the rules for loads
        return cpus <= node.free_cpus
    return cpus <= cpus_free(node, partition, share, stacking=True)


def take(
    node: NodeView,
    cpus: int,
    memory: int,
    gres: Gres,
    share: int,
    partition: str,
    ids: int = 0,
) -> NodeView:
    """``node`` after a job of ``partition`` starts on it with ``cpus``, ``memory``
    and ``gres`` (sharing its CPUs if ``share`` > 0), given the CPU ids in mask
    ``ids`` (``core/devices.py`` named them; 0 when not named)."""
    kept_ids, shared_ids = node.kept_ids, node.shared_ids
    if ids and share:
        shared_ids = add_load(shared_ids, ids)
    elif ids:
        kept_ids |= ids
    return with_free(node, taken(node, cpus, memory, gres, share, partition), kept_ids, shared_ids)


def taken(node: Node, cpus: int, memory: int, gres: Gres, share: int, partition: str) -> Free:
    """``take``'s arithmetic, on the ``Free`` part alone (no CPU ids: those are the
    view's, and a future picture names none)."""
    shared = node.shared
    if share:
        shared = _shared_plus(shared, partition, cpus)
        free = free_cpus(node.cpus, held(node), shared)
    elif shared:
        free = free_cpus(node.cpus, held(node) + cpus, shared)
    else:  # the common case: no loads, so the free CPUs are what is not held
        free = max(node.free_cpus - cpus, 0)
    return Free(
        node.cpus,
        node.real_memory,
        free,
        node.free_memory - memory,
        gres_minus(node.gres, gres),
        node.unshared or not share,
        shared,
        False,
    )


def give(
    node: NodeView, cpus: int, memory: int, gres: Gres, share: int, partition: str
) -> NodeView:
    """``node`` after a job of ``partition`` that holds ``cpus``, ``memory`` and
    ``gres`` there (sharing its CPUs if ``share`` > 0) leaves it."""
    if not share and not node.shared and not gres:  # the common case, without a ``Free``
        free = min(node.free_cpus + cpus, node.cpus)
        return changed(
            node,
            free,
            min(node.free_memory + memory, node.real_memory),
            free == node.cpus,
            node.gres,
            node.unshared and free < node.cpus,
            node.shared,
            node.kept_ids,
            node.shared_ids,
        )
    left = given(node, cpus, memory, gres, share, partition)
    return with_free(node, left, node.kept_ids, node.shared_ids)


def with_free(node: NodeView, left: Free, kept_ids: int, shared_ids: tuple[int, ...]) -> NodeView:
    """``node`` with the free part ``left`` and the CPU ids held. From ``node``'s
    own ids, with ``left`` what a run of ``given`` and ``taken`` made of ``node``:
    the view ``give`` and ``take`` (no CPU ids named) would have made, so a picture
    kept as ``Free`` parts becomes the same views when one is asked for."""
    return changed(
        node,
        left.free_cpus,
        left.free_memory,
        left.idle,
        left.gres,
        left.unshared,
        left.shared,
        kept_ids,
        shared_ids,
    )


#: The ``NodeView`` fields ``changed`` sets; every other one it copies as it is.
CHANGED = (
    "free_cpus",
    "free_memory",
    "idle",
    "gres",
    "unshared",
    "shared",
    "kept_ids",
    "shared_ids",
)


def changed(
    node: NodeView,
    free_cpus: int,
    free_memory: int,
    idle: bool,
    gres: Gres,
    unshared: bool,
    shared: Shared,
    kept_ids: int,
    shared_ids: tuple[int, ...],
) -> NodeView:
    """``node`` with the fields a start or an end changes: ``dataclasses.replace``'s
    result, made directly, since backfill's pictures make hundreds of thousands of
    views per replay and ``replace`` looks the fields up each time
    (``tests/unit/test_nodefree.py`` checks that every field is passed on)."""
    return NodeView(
        node.name,
        node.cpus,
        node.real_memory,
        node.weight,
        node.features,
        free_cpus,
        free_memory,
        node.usable,
        idle,
        gres,
        unshared,
        shared,
        node.unit,
        node.rank,
        node.devices,
        kept_ids,
        shared_ids,
        node.sockets,
    )


def given(node: Node, cpus: int, memory: int, gres: Gres, share: int, partition: str) -> Free:
    """``give``'s arithmetic, on the ``Free`` part alone.

    Counts stay within the node's size, so giving back what a view never
    counted (a running job a hand-made view left out) cannot overflow it.
    """
    shared = node.shared
    if share:
        kept = held(node)
        shared = _shared_minus(shared, partition, cpus)
        free = free_cpus(node.cpus, kept, shared)
    elif shared:
        kept = max(held(node) - cpus, 0)
        free = free_cpus(node.cpus, kept, shared)
    else:  # the common case: no loads, so the free CPUs are what is not held
        free = min(node.free_cpus + cpus, node.cpus)
        kept = node.cpus - free
    return Free(
        node.cpus,
        node.real_memory,
        free,
        min(node.free_memory + memory, node.real_memory),
        gres_plus(node.gres, gres),
        node.unshared and kept > 0,
        shared,
        free == node.cpus,
    )


def _shared_plus(shared: Shared, partition: str, cpus: int) -> Shared:
    """``shared`` after a job of ``partition`` starts sharing ``cpus`` CPUs."""
    for i, (name, cpus_in_all, widest) in enumerate(shared):
        if name == partition:
            entry = (name, cpus_in_all + cpus, max(widest, cpus))
            return (*shared[:i], entry, *shared[i + 1 :])
    return (*shared, (partition, cpus, cpus))


def _shared_minus(shared: Shared, partition: str, cpus: int) -> Shared:
    """``shared`` after a job of ``partition`` that shared ``cpus`` CPUs leaves.

    A partition whose load reaches 0 is dropped. The most CPUs of one job is
    kept as it was while others share: without the jobs' sizes it can only
    stay an upper bound.
    """
    for i, (name, cpus_in_all, widest) in enumerate(shared):
        if name == partition:
            rest = cpus_in_all - cpus
            entry = ((name, rest, widest),) if rest > 0 else ()
            return (*shared[:i], *entry, *shared[i + 1 :])
    return shared


# ---------------------------------------------------------------- GRES


def _gres_change(items: Gres, sign: int) -> dict[tuple[str, str], int]:
    change: dict[tuple[str, str], int] = {}
    for name, kind, count in items:
        change[name, kind] = change.get((name, kind), 0) + sign * count
    return change


def gres_minus(free: Gres, taken: Gres) -> Gres:
    """``free`` after a job takes ``taken``."""
    if not taken:
        return free
    change = _gres_change(taken, -1)
    return tuple((n, k, c + change.get((n, k), 0)) for n, k, c in free)


def gres_plus(free: Gres, given: Gres) -> Gres:
    """``free`` after a job gives ``given`` back (a kind ``free`` lacks is added)."""
    if not given:
        return free
    change = _gres_change(given, 1)
    grown = tuple((n, k, c + change.pop((n, k), 0)) for n, k, c in free)
    return grown + tuple((n, k, c) for (n, k), c in change.items())


def gres_covered(taken: Gres, free: Gres) -> bool:
    """Whether ``free`` has each (name, type) of an allocation ``taken``, so that
    ``gres_minus`` leaves no count below 0."""
    if not taken:
        return True
    have = {(name, kind): count for name, kind, count in free}
    return all(have.get(key, 0) >= count for key, count in _gres_change(taken, 1).items())
