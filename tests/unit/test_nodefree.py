"""The one free-resource arithmetic (core/nodefree.py): take, give back, fits.

Nodes are built the way the store's ledger builds them (``snapshots.node_view``:
free CPUs from the CPUs held and the loads shared), by starting jobs that fit
one after another, so the views are the ones a pass really sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core import nodefree
from controller.core.nodefree import fits, give, take
from controller.core.snapshot import Gres, NodeView
from tests.unit.scenario import node

PARTS = ("p", "q")
SHARE = {"p": 2, "q": 4}  # the partitions' OverSubscribe=FORCE:n count (for sharing jobs)
GPUS: Gres = (("gpu", "a", 2), ("gpu", "b", 1))


@dataclass(frozen=True)
class Alloc:
    """What one job takes on the node."""

    cpus: int
    memory: int
    gres: Gres
    share: int
    partition: str


def _take(n: NodeView, a: Alloc) -> NodeView:
    return take(n, a.cpus, a.memory, a.gres, a.share, a.partition)


def _give(n: NodeView, a: Alloc) -> NodeView:
    return give(n, a.cpus, a.memory, a.gres, a.share, a.partition)


def _fits(n: NodeView, a: Alloc) -> bool:
    return fits(n, a.cpus, a.memory, a.gres, a.share, a.partition)


@st.composite
def _alloc(draw: st.DrawFn, cpus: int) -> Alloc:
    part = draw(st.sampled_from(PARTS))
    gres = draw(st.sampled_from([(), (("gpu", "a", 1),), (("gpu", "a", 2), ("gpu", "b", 1))]))
    return Alloc(
        cpus=draw(st.integers(1, cpus)),
        memory=draw(st.sampled_from([0, 500, 1000, 4000])),
        gres=gres,
        share=SHARE[part] if draw(st.booleans()) else 0,
        partition=part,
    )


@dataclass
class Ledger:
    """A reference count of what the jobs on one node hold, as controller/holdings.py keeps it."""

    cpus: int
    memory: int
    held: int = 0
    loads: dict[str, int] = field(default_factory=dict)
    used_memory: int = 0
    gres: dict[tuple[str, str], int] = field(default_factory=dict)

    def change(self, a: Alloc, sign: int) -> None:
        if a.share:
            self.loads[a.partition] = self.loads.get(a.partition, 0) + sign * a.cpus
        else:
            self.held += sign * a.cpus
        self.used_memory += sign * a.memory
        for name, kind, count in a.gres:
            self.gres[name, kind] = self.gres.get((name, kind), 0) + sign * count

    def expected(self, view: NodeView) -> NodeView:
        """The view ``snapshots.node_view`` would build from these counts
        (``widest`` taken from ``view``: the counts do not keep job sizes)."""
        widest = {name: most for name, _, most in view.shared}
        shared = tuple(
            (name, load, widest.get(name, 0)) for name, load in self.loads.items() if load
        )
        return replace(
            view,
            free_cpus=nodefree.free_cpus(self.cpus, self.held, shared),
            free_memory=self.memory - self.used_memory,
            idle=self.held == 0 and not shared,
            gres=tuple((n, k, c - self.gres.get((n, k), 0)) for n, k, c in GPUS),
            unshared=self.held > 0,
            shared=shared,
        )


@st.composite
def _busy(draw: st.DrawFn) -> tuple[NodeView, Ledger, list[Alloc]]:
    """A node with the jobs that fitted of a random sequence started on it."""
    cpus = draw(st.sampled_from([2, 4, 8]))
    view = replace(node("n1", cpus, 4000), gres=GPUS)
    ledger = Ledger(cpus, 4000)
    running: list[Alloc] = []
    for a in draw(st.lists(_alloc(cpus), max_size=6)):
        if _fits(view, a):
            view = _take(view, a)
            ledger.change(a, 1)
            running.append(a)
    return view, ledger, running


@st.composite
def _busy_and_one_more(draw: st.DrawFn) -> tuple[NodeView, Alloc]:
    """A busy node, and a job that may or may not fit on it."""
    view, _, _ = draw(_busy())
    return view, draw(_alloc(view.cpus))


def _by_load(view: NodeView) -> NodeView:
    """``view`` without the most CPUs of one sharing job (an upper bound once one leaves)."""
    return replace(view, shared=tuple((name, load, 0) for name, load, _ in view.shared))


@settings(max_examples=400, deadline=None)
@given(case=_busy_and_one_more())
def test_taking_then_giving_back_leaves_the_node_as_it_was(case: tuple[NodeView, Alloc]) -> None:
    view, a = case
    if not _fits(view, a):
        return
    back = _give(_take(view, a), a)
    if a.share and nodefree.load(view, a.partition):
        assert _by_load(back) == _by_load(view)
    else:
        assert back == view


@settings(max_examples=400, deadline=None)
@given(busy=_busy(), data=st.data())
def test_starts_and_ends_in_any_order_agree_with_the_ledgers_counts(
    busy: tuple[NodeView, Ledger, list[Alloc]], data: st.DataObject
) -> None:
    """What the pass, backfill's pictures and preemption compute is what the
    snapshot of the ledger would show: sharing partitions' loads included."""
    view, ledger, running = busy
    assert view == ledger.expected(view)
    for i in data.draw(st.permutations(range(len(running)))):
        view = _give(view, running[i])
        ledger.change(running[i], -1)
        assert view == ledger.expected(view)
    assert _by_load(view) == _by_load(replace(node("n1", view.cpus, 4000), gres=GPUS))


@settings(max_examples=400, deadline=None)
@given(busy=_busy(), data=st.data())
def test_free_parts_made_into_a_view_are_the_view_give_and_take_make(
    busy: tuple[NodeView, Ledger, list[Alloc]], data: st.DataObject
) -> None:
    """Backfill's pictures keep ``Free`` parts (``given``, ``taken``) and make a view
    of one when placement reads it (``with_free``): the view ``give`` and ``take``
    would have made, after any run of ends and starts, fitting or not."""
    view, _, running = busy
    part: nodefree.Node = view
    jobs = st.one_of(st.sampled_from(running), _alloc(view.cpus)) if running else _alloc(view.cpus)
    for ending, a in data.draw(st.lists(st.tuples(st.booleans(), jobs))):
        change = (nodefree.given, nodefree.taken)[not ending]
        part = change(part, a.cpus, a.memory, a.gres, a.share, a.partition)
        view = (_give if ending else _take)(view, a)
        assert nodefree.with_free(busy[0], part, view.kept_ids, view.shared_ids) == view


@settings(max_examples=400, deadline=None)
@given(case=_busy_and_one_more())
def test_fits_exactly_when_taking_drives_no_count_below_zero(case: tuple[NodeView, Alloc]) -> None:
    view, a = case
    after = _take(view, a)
    others = any(name != a.partition for name, _, _ in view.shared)
    if a.share:
        cpus_ok = not view.unshared and nodefree.load(after, a.partition) <= a.share * view.cpus
    else:
        cpus_ok = not others and view.free_cpus - a.cpus >= 0
    names = {(n, k) for n, k, _ in view.gres}
    gres_ok = all(c >= 0 for _, _, c in after.gres) and all((n, k) in names for n, k, _ in a.gres)
    assert _fits(view, a) == (cpus_ok and after.free_memory >= 0 and gres_ok)


def test_sharing_jobs_take_idle_cpus_first_then_stack_within_their_count() -> None:
    view = node("n1", 4, 4000)
    one = Alloc(4, 0, (), 2, "p")
    view = _take(view, one)
    assert (view.free_cpus, view.shared, view.idle) == (0, (("p", 4, 4),), False)
    assert _fits(view, one)  # FORCE:2: a second job may share each CPU
    view = _take(view, one)
    assert view.shared == (("p", 8, 4),) and not _fits(view, Alloc(1, 0, (), 2, "p"))
    # One leaving frees no CPU: the other still uses them all.
    view = _give(view, one)
    assert (view.free_cpus, view.shared) == (0, (("p", 4, 4),))
    view = _give(view, one)
    assert (view.free_cpus, view.shared, view.idle) == (4, (), True)


def test_partitions_are_counted_apart_and_a_job_that_keeps_its_cpus_avoids_another_ones() -> None:
    view = _take(node("n1", 8, 4000), Alloc(2, 0, (), 4, "q"))
    assert view.free_cpus == 6
    assert not _fits(view, Alloc(1, 0, (), 0, "p"))  # q's jobs share CPUs here
    assert _fits(view, Alloc(6, 0, (), 0, "q"))  # its own partition's: beside them
    assert _fits(view, Alloc(8, 0, (), 2, "p"))  # p's sharing jobs: a load of their own
    both = _take(view, Alloc(8, 0, (), 2, "p"))
    assert (both.free_cpus, both.shared) == (0, (("q", 2, 2), ("p", 8, 8)))
    # q's job leaves: p's load still takes every CPU.
    assert _give(both, Alloc(2, 0, (), 4, "q")).free_cpus == 0


def test_a_job_that_keeps_its_cpus_bars_sharing_ones_until_it_leaves() -> None:
    mine = Alloc(1, 0, (), 0, "p")
    view = _take(node("n1", 4, 4000), mine)
    assert view.unshared and view.free_cpus == 3
    assert not _fits(view, Alloc(1, 0, (), 2, "p"))
    back = _give(view, mine)
    assert not back.unshared and back.idle and _fits(back, Alloc(1, 0, (), 2, "p"))


def test_memory_and_gres_are_never_shared() -> None:
    view = replace(node("n1", 4, 1000), gres=(("gpu", "a", 1),))
    view = _take(view, Alloc(1, 600, (("gpu", "a", 1),), 2, "p"))
    assert not _fits(view, Alloc(1, 600, (), 2, "p"))
    assert not _fits(view, Alloc(1, 0, (("gpu", "a", 1),), 2, "p"))
    assert not _fits(view, Alloc(1, 0, (("gpu", "z", 1),), 2, "p"))  # a kind it lacks
    assert _fits(view, Alloc(1, 400, (), 2, "p"))


def test_changed_is_replace_and_passes_every_field_on() -> None:
    """``changed`` builds the view directly (backfill makes hundreds of thousands of them):
    every field a start or an end does not change comes through, even a new one."""
    from dataclasses import fields

    from controller.core.snapshot import NodeDevices

    source = NodeView(
        name="n7",
        cpus=8,
        real_memory=4096,
        weight=3,
        features=frozenset({"a"}),
        free_cpus=5,
        free_memory=2048,
        usable=False,
        idle=False,
        gres=GPUS,
        unshared=True,
        shared=(("p", 2, 1),),
        unit=2,
        rank=9,
        devices=NodeDevices(numbers=(("gpu", 0),)),
        kept_ids=6,
        shared_ids=(1,),
        sockets=2,
    )
    made = nodefree.changed(source, 1, 7, True, (), False, (), 0, ())
    assert made == replace(
        source,
        free_cpus=1,
        free_memory=7,
        idle=True,
        gres=(),
        unshared=False,
        shared=(),
        kept_ids=0,
        shared_ids=(),
    )
    new: dict[str, object] = dict(
        zip(nodefree.CHANGED, (1, 7, True, (), False, (), 0, ()), strict=True)
    )
    for f in fields(NodeView):
        assert getattr(made, f.name) == new.get(f.name, getattr(source, f.name)), f.name
    # ``changed`` passes the fields in this order: a field added to NodeView must be
    # added there (and to the view above) too.
    assert [f.name for f in fields(NodeView)] == [
        "name", "cpus", "real_memory", "weight", "features", "free_cpus", "free_memory",
        "usable", "idle", "gres", "unshared", "shared", "unit", "rank", "devices",
        "kept_ids", "shared_ids", "sockets",
    ]  # fmt: skip
