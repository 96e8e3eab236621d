"""cons_tres selection in the pure core: constraints, OverSubscribe, GRES, node counts.

Scenario tables (a cluster and its pending jobs as data, the starts and
reasons one pass must give), the constraint grammar as Slurm accepts it, and
properties over random clusters: a job never gets a node its constraint
excludes, GRES are never over-allocated, and no CPU holds more jobs than its
partition's OverSubscribe count.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import NOW, Cluster, cluster, job, node, partition

from controller.core import BackfillParams, Plan, schedule
from controller.core.features import parse
from controller.core.placement import place
from controller.core.plan import Start
from controller.core.request import gres_fit, gres_left, gres_request, share
from controller.core.snapshot import NodeView, Snapshot
from controller.jobstate import Reason
from controller.model import Job

R = Reason


@dataclass(frozen=True)
class Case:
    """A cluster, its pending jobs, and what one pass must decide.

    ``cpus`` and ``gres`` check the allocation of the jobs they name.
    """

    id: str
    stage: Cluster
    pending: tuple[Job, ...]
    starts: dict[int, tuple[str, ...]]  # job id -> nodes, in allocation order
    reasons: dict[int, Reason] = field(default_factory=dict)
    cpus: dict[int, tuple[int, ...]] = field(default_factory=dict)
    gres: dict[int, tuple[tuple[tuple[str, str, int], ...], ...]] = field(default_factory=dict)

    def plan(self) -> Plan:
        return schedule(self.stage.snapshot(self.pending), NOW)


def _stage(*nodes: NodeView, parts: tuple[tuple[str, str], ...] = (), **kw: Any) -> Cluster:
    """Nodes plus partitions given as (name, nodes); one ``batch`` of all nodes by default."""
    specs = parts or (("batch", ",".join(n.name for n in nodes)),)
    return cluster(nodes=nodes, partitions=[partition(p, ns, **kw) for p, ns in specs])


def _run(case: Case) -> None:
    plan = case.plan()
    assert {s.job_id: s.nodes for s in plan.starts} == case.starts
    assert plan.reasons == case.reasons
    by_id = {s.job_id: s for s in plan.starts}
    for job_id, cpus in case.cpus.items():
        assert by_id[job_id].cpus == cpus, job_id
    for job_id, gres in case.gres.items():
        assert by_id[job_id].gres == gres, job_id


def N(k: int) -> dict[str, Any]:
    """``-N k`` as admission records it."""
    return {"min_nodes": k, "nodes_given": True}


# ---------------------------------------------------------------- constraints

RACKS = _stage(
    node("n1", features="a"),
    node("n2", features="a"),
    node("n3", features="b"),
    node("n4", features="b"),
)

CONSTRAINTS = [
    Case(
        "or-may-mix-features-across-nodes",
        _stage(node("n1", features="a"), node("n2", features="c"), node("n3", features="b")),
        (job(1, constraint="a|b", **N(2)),),
        starts={1: ("n1", "n3")},
    ),
    Case(
        "matching-or-takes-one-alternative-for-all-nodes",
        _stage(node("n1", features="a"), node("n2", features="b"), node("n3", features="b")),
        (job(1, constraint="[a|b]", **N(2)),),
        starts={1: ("n2", "n3")},
    ),
    Case(
        "matching-or-tries-alternatives-in-order",
        RACKS,
        (job(1, constraint="[b|a]", **N(2)),),
        starts={1: ("n3", "n4")},
    ),
    Case(
        "matching-or-first-alternative-that-fits-now",
        _stage(
            node("n1", features="a", used_cpus=4),
            node("n2", features="a"),
            node("n3", features="b"),
            node("n4", features="b"),
        ),
        (job(1, constraint="[a|b]", **N(2)),),
        starts={1: ("n3", "n4")},
    ),
    Case(
        "matching-or-no-alternative-has-enough-nodes",
        RACKS,
        (job(1, constraint="[a|b]", **N(3)),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "plain-or-does-the-same-job-on-mixed-nodes",
        RACKS,
        (job(1, constraint="a|b", **N(3)),),
        starts={1: ("n1", "n2", "n3")},
    ),
    Case(
        "matching-or-packed-tasks-stay-on-one-alternative",
        RACKS,
        (job(1, constraint="[a|b]", num_tasks=12),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "filter-and-matching-or",
        _stage(
            node("n1", features="xeon"),
            node("n2", features="fast,amd"),
            node("n3", features="fast,amd"),
            node("n4", features="fast,xeon"),
        ),
        (job(1, constraint="fast&[xeon|amd]", **N(2)),),
        starts={1: ("n2", "n3")},
    ),
    Case(
        "left-to-right-like-slurm",
        _stage(node("n1", features="a"), node("n2", features="a,c")),
        (job(1, constraint="a|b&c"),),  # (a|b)&c
        starts={1: ("n2",)},
    ),
    Case(
        "parentheses-group",
        _stage(node("n1", features="a"), node("n2", features="b,c"), node("n3", features="a,c")),
        (job(1, constraint="c&(a|b)", **N(2)),),
        starts={1: ("n2", "n3")},
    ),
    Case(
        "count-forces-nodes-with-the-feature",
        _stage(node("n1"), node("n2", features="gpu"), node("n3", features="gpu")),
        (job(1, constraint="gpu*2"),),
        starts={1: ("n2", "n3")},
        cpus={1: (1, 1)},
    ),
    Case(
        "count-rest-of-nodes-from-anywhere",
        _stage(node("n1"), node("n2", features="gpu"), node("n3")),
        (job(1, constraint="gpu*1", **N(3)),),
        starts={1: ("n2", "n1", "n3")},
    ),
    Case(
        "count-more-than-fixed-node-count",
        _stage(node("n1", features="gpu"), node("n2", features="gpu")),
        (job(1, constraint="gpu*2", **N(1)),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "count-needs-free-feature-nodes",
        _stage(node("n1", features="gpu", used_cpus=4), node("n2", features="gpu"), node("n3")),
        (job(1, constraint="gpu*2"),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "bracket-counts-each-from-its-feature",
        _stage(
            node("n1", features="rack1"),
            node("n2", features="rack1"),
            node("n3", features="rack1"),
            node("n4", features="rack2"),
            node("n5", features="rack2"),
        ),
        (job(1, constraint="[rack1*2&rack2*1]"),),
        starts={1: ("n1", "n2", "n4")},
    ),
    Case(
        "bracket-counts-take-distinct-nodes",
        _stage(node("n1", features="r1,r2"), node("n2", features="r2"), node("n3")),
        (job(1, constraint="[r1*1&r2*1]"),),
        starts={1: ("n1", "n2")},
    ),
    Case(
        "bracket-counts-short-of-distinct-nodes",
        _stage(node("n1", features="r1,r2"), node("n2")),
        (job(1, constraint="[r1*1&r2*1]"),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "bracket-counts-with-group",
        _stage(
            node("n1", features="c"),
            node("n2", features="b"),
            node("n3", features="c"),
            node("n4", features="a"),
        ),
        (job(1, constraint="[(a|b)*1&c*2]"),),
        starts={1: ("n1", "n2", "n3")},
    ),
    Case(
        "bad-constraint-waits-without-blocking",
        _stage(node("n1", features="a")),
        (job(1, constraint="[a&b]"), job(2)),
        starts={2: ("n1",)},
        reasons={1: R.BAD_CONSTRAINTS},
    ),
]


@pytest.mark.parametrize("case", CONSTRAINTS, ids=[c.id for c in CONSTRAINTS])
def test_constraint(case: Case) -> None:
    _run(case)


@pytest.mark.parametrize(
    "text",
    [
        "a",
        "a&b",
        "a,b",
        "a|b",
        "(a|b)&c",
        "[a|b]",
        "fast&[a|b]",
        "[(a&b)|c]",
        "a*2",
        "[a*2]",
        "[rack1*2&rack2*4]",
        "[(rack1|rack2)*1&(rack3)*2]",
        "[(knl&snc4&flat)*4&haswell*1]",
    ],
)
def test_constraint_slurm_accepts(text: str) -> None:
    assert parse(text).terms


@pytest.mark.parametrize(
    "text",
    [
        "&a",
        "a||b",
        "[a|b",
        "a]",
        "[a&b]",  # & in brackets needs counts
        "[a*2|b]",  # | in brackets takes none
        "[a|b*2]",
        "a*2&b",  # counts with more than one feature need brackets
        "(a|b)*2",
        "[a][b]",
        "[a]|[b]",
        "[[a]]",
        "((a))",
        "(a)b",
        "a*0",
        "a*-1",
        "a*",
        "(a*2)",
        "[a*2&b]",
    ],
)
def test_constraint_slurm_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse(text)


# ---------------------------------------------------------------- OverSubscribe


def _shared(load: int, widest: int = 4, part: str = "batch") -> tuple[tuple[str, int, int], ...]:
    """Jobs of ``part`` sharing CPUs on a node: ``load`` CPUs asked in all."""
    return ((part, load, widest),)


OVERSUBSCRIBE = [
    Case(
        "no-never-shares",
        _stage(node("n1", shared=_shared(4)), oversubscribe="NO"),
        (job(1, num_tasks=4, oversubscribe=True),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "force-shares-a-busy-node",
        _stage(node("n1", shared=_shared(4)), oversubscribe="FORCE:2"),
        (job(1, num_tasks=4),),
        starts={1: ("n1",)},
        cpus={1: (4,)},
    ),
    Case(
        "force-count-reached",
        _stage(node("n1", shared=_shared(8)), oversubscribe="FORCE:2"),
        (job(1),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "force-default-count-is-four",
        _stage(
            node("n1", shared=_shared(12)), node("n2", shared=_shared(16)), oversubscribe="FORCE"
        ),
        (job(1, num_tasks=4), job(2, num_tasks=1)),
        starts={1: ("n1",)},
        reasons={2: R.RESOURCES},
    ),
    Case(
        "force-idle-cpus-first",
        _stage(node("n1", shared=_shared(4)), node("n2"), oversubscribe="FORCE:2"),
        (job(1, num_tasks=4),),
        starts={1: ("n2",)},
    ),
    Case(
        "force-fills-idle-then-stacks-within-one-pass",
        _stage(node("n1"), node("n2"), oversubscribe="FORCE:2"),
        tuple(job(i, num_tasks=4) for i in range(1, 6)),
        starts={1: ("n1",), 2: ("n2",), 3: ("n1",), 4: ("n2",)},
        reasons={5: R.RESOURCES},
    ),
    Case(
        "yes-shares-only-jobs-that-ask",
        _stage(node("n1", shared=_shared(4)), oversubscribe="YES:2"),
        (job(1, num_tasks=4, oversubscribe=True), job(2, num_tasks=4)),
        starts={1: ("n1",)},
        reasons={2: R.RESOURCES},
    ),
    Case(
        "yes-job-that-does-not-ask-takes-idle-cpus-beside-sharing-ones",
        _stage(node("n1", shared=_shared(1, 1)), oversubscribe="YES"),
        (job(1, num_tasks=3),),
        starts={1: ("n1",)},
    ),
    Case(
        "sharing-job-does-not-join-a-job-that-keeps-its-cpus",
        _stage(node("n1", used_cpus=1), node("n2", shared=_shared(4)), oversubscribe="FORCE:2"),
        (job(1, num_tasks=2),),
        starts={1: ("n2",)},
    ),
    Case(
        "job-keeping-cpus-avoids-other-partitions-sharing-ones",
        _stage(
            node("n1", shared=_shared(1, 1, part="shared")),
            node("n2"),
            parts=(("shared", "n1"), ("batch", "n1,n2")),
        ),
        (job(1, num_tasks=2),),
        starts={1: ("n2",)},
    ),
    Case(
        "whole-node-job-never-shares",
        _stage(node("n1", shared=_shared(1, 1)), node("n2"), oversubscribe="FORCE:4"),
        (job(1, exclusive=True), job(2, exclusive=True)),
        starts={1: ("n2",)},
        reasons={2: R.RESOURCES},
    ),
    Case(
        "memory-is-never-oversubscribed",
        _stage(node("n1", used_memory=3500, shared=_shared(4)), oversubscribe="FORCE:4"),
        (job(1, mem_per_node=1000),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "sharing-job-wider-than-the-node",
        _stage(node("n1", cpus=2), oversubscribe="FORCE:4"),
        (job(1, num_tasks=3, **N(1)),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
]


@pytest.mark.parametrize("case", OVERSUBSCRIBE, ids=[c.id for c in OVERSUBSCRIBE])
def test_oversubscribe(case: Case) -> None:
    _run(case)


# ---------------------------------------------------------------- GRES

GRES = [
    Case(
        "untyped-request-takes-any-type",
        _stage(node("n1", gres="gpu:a100:1")),
        (job(1, gres="gpu:1"),),
        starts={1: ("n1",)},
        gres={1: ((("gpu", "a100", 1),),)},
    ),
    Case(
        "typed-request-takes-its-type",
        _stage(node("n1", gres="gpu:v100:2"), node("n2", gres="gpu:a100:2")),
        (job(1, gres="gpu:a100:1"),),
        starts={1: ("n2",)},
        gres={1: ((("gpu", "a100", 1),),)},
    ),
    Case(
        "typed-request-not-met-by-untyped-config",
        _stage(node("n1", gres="gpu:2")),
        (job(1, gres="gpu:a100:1"),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "untyped-request-spreads-over-types",
        _stage(node("n1", gres="gpu:a100:1,gpu:v100:1")),
        (job(1, gres="gpu:2"),),
        starts={1: ("n1",)},
        gres={1: ((("gpu", "a100", 1), ("gpu", "v100", 1)),)},
    ),
    Case(
        "count-is-per-node",
        _stage(node("n1", gres="gpu:4"), node("n2", gres="gpu:1"), node("n3", gres="gpu:2")),
        (job(1, gres="gpu:2", **N(2)),),
        starts={1: ("n1", "n3")},
        gres={1: ((("gpu", "", 2),), (("gpu", "", 2),))},
    ),
    Case(
        "several-resources",
        _stage(node("n1", gres="gpu:2"), node("n2", gres="gpu:2,craynetwork:4")),
        (job(1, gres="gpu:1,craynetwork:1"),),
        starts={1: ("n2",)},
        gres={1: ((("gpu", "", 1), ("craynetwork", "", 1)),)},
    ),
    Case(
        "gres-used-by-earlier-start-in-the-pass",
        _stage(node("n1", gres="gpu:2")),
        (job(1, gres="gpu:2"), job(2, gres="gpu:1")),
        starts={1: ("n1",)},
        reasons={2: R.RESOURCES},
    ),
    Case(
        "no-request-no-gres",
        _stage(node("n1", gres="gpu:2")),
        (job(1), job(2, gres="gpu:2")),
        starts={1: ("n1",), 2: ("n1",)},
        gres={1: (), 2: ((("gpu", "", 2),),)},
    ),
    Case(
        "whole-node-gets-all-gres",
        _stage(node("n1", gres="gpu:a100:2,craynetwork:4")),
        (job(1, exclusive=True, gres="gpu:1"),),
        starts={1: ("n1",)},
        gres={1: ((("gpu", "a100", 2), ("craynetwork", "", 4)),)},
    ),
    Case(
        "packed-tasks-skip-nodes-without-free-gres",
        _stage(node("n1", gres="gpu:1"), node("n2", gres="gpu:0"), node("n3", gres="gpu:1")),
        (job(1, num_tasks=8, gres="gpu:1"),),
        starts={1: ("n1", "n3")},
    ),
    Case(
        "gres-are-never-shared",
        _stage(node("n1", gres="gpu:0", shared=_shared(1, 1)), oversubscribe="FORCE:4"),
        (job(1, gres="gpu:1"),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "malformed-request-waits",
        _stage(node("n1", gres="gpu:1")),
        (job(1, gres="gpu:"),),
        starts={},
        reasons={1: R.BAD_CONSTRAINTS},
    ),
]


@pytest.mark.parametrize("case", GRES, ids=[c.id for c in GRES])
def test_gres(case: Case) -> None:
    _run(case)


@pytest.mark.parametrize(
    ("request_", "free", "expected"),
    [
        ("gpu:1", "gpu:a:1,gpu:b:1", (("gpu", "a", 1),)),
        ("gpu:b:1,gpu:1", "gpu:a:1,gpu:b:1", (("gpu", "a", 1), ("gpu", "b", 1))),
        ("gpu:a:1,gpu:1", "gpu:a:1", None),
        ("gpu:2", "gpu:a:1", None),
        ("mps:100", "gpu:1,mps:400", (("mps", "", 100),)),
        ("", "gpu:1", ()),
    ],
    ids=["first-type", "typed-before-untyped", "typed-uses-it-up", "short", "other-name", "none"],
)
def test_gres_fit(request_: str, free: str, expected: object) -> None:
    assert gres_fit(gres_request(request_), node("n", gres=free).gres) == expected


def test_gres_left_takes_any_type_use_where_there_is_room() -> None:
    total = node("n", gres="gpu:a:1,gpu:b:1,nic:2").gres
    used: dict[tuple[str, str | None], int] = {("gpu", "a"): 1, ("gpu", None): 1, ("nic", ""): 1}
    assert gres_left(total, used) == (("gpu", "a", 0), ("gpu", "b", 0), ("nic", "", 1))


# ---------------------------------------------------------------- counts, memory, -w/-x, weight

FOUR = _stage(*(node(f"n{i}") for i in range(1, 5)))

OPTIONS = [
    Case(
        "node-range-packs-within-it",
        FOUR,
        (job(1, num_tasks=8, min_nodes=1, max_nodes=3, nodes_given=True),),
        starts={1: ("n1", "n2")},
        cpus={1: (4, 4)},
    ),
    Case(
        "node-range-minimum-gets-a-task-each",
        FOUR,
        (job(1, num_tasks=1, min_nodes=2, max_nodes=3, nodes_given=True),),
        starts={1: ("n1", "n2")},
    ),
    Case(
        "node-range-maximum-too-small",
        FOUR,
        (job(1, num_tasks=12, min_nodes=1, max_nodes=2, nodes_given=True),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "ntasks-per-node-spreads",
        FOUR,
        (job(1, num_tasks=4, ntasks_per_node=2, tasks_given=True, **N(2)),),
        starts={1: ("n1", "n2")},
        cpus={1: (2, 2)},
    ),
    Case(
        "mincpus-skips-node-with-fewer-free",
        _stage(node("n1", used_cpus=2), node("n2")),
        (job(1, min_cpus=3),),
        starts={1: ("n2",)},
        cpus={1: (3,)},
    ),
    Case(
        "def-mem-per-cpu-over-max-mem-per-node",
        _stage(node("n1"), def_mem_per_cpu=1000, max_mem_per_node=2000),
        (job(1, num_tasks=3, **N(1)), job(2, num_tasks=2, admin_priority=10)),
        starts={2: ("n1",)},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "mem-zero-takes-whole-memory-of-each-node",
        _stage(node("n1", memory=1000), node("n2", memory=3000)),
        (job(1, mem_per_node=0, **N(2)), job(2, mem_per_node=1)),
        starts={1: ("n1", "n2")},
        reasons={2: R.RESOURCES},
    ),
    Case(
        "excluded-light-node-then-next-weight",
        _stage(node("n1", weight=5), node("n2", weight=1), node("n3", weight=3)),
        (job(1, exc_nodes=("n2",)),),
        starts={1: ("n3",)},
    ),
    Case(
        "required-heavy-node-and-light-ones",
        _stage(node("n1", weight=5), node("n2", weight=1), node("n3", weight=3)),
        (job(1, req_nodes=("n1",), **N(2)),),
        starts={1: ("n1", "n2")},
    ),
    Case(
        "required-node-plus-constraint-count",
        _stage(node("n1"), node("n2", features="gpu"), node("n3")),
        (job(1, req_nodes=("n3",), constraint="gpu*1"),),
        starts={1: ("n3", "n2")},
    ),
]


@pytest.mark.parametrize("case", OPTIONS, ids=[c.id for c in OPTIONS])
def test_options(case: Case) -> None:
    _run(case)


def test_place_on_an_empty_cluster_is_the_never_check() -> None:
    """Admission's "could this ever run?" is ``place`` on empty nodes: counts included."""
    stage = _stage(node("n1", features="gpu"), node("n2"))
    snap = stage.snapshot([])
    part = snap.partitions["batch"]
    assert isinstance(place(job(1, constraint="gpu*1", **N(2)), part, snap.nodes), Start)
    assert place(job(1, constraint="gpu*2"), part, snap.nodes) is R.RESOURCES


# ---------------------------------------------------------------- properties

_NAMES = [f"n{i}" for i in range(1, 7)]
_CONSTRAINTS = [
    "",
    "a",
    "a&b",
    "a|b",
    "[a|b]",
    "a*2",
    "[a*1&b*1]",
    "(a|b)&c",
    "c&[a|b]",
    "[(a|c)*1&b*2]",
]


@st.composite
def _node(draw: st.DrawFn, name: str, parts: list[str]) -> NodeView:
    cpus = draw(st.sampled_from([2, 4, 8]))
    sharing = draw(st.integers(0, 2)) == 0
    used = 0 if sharing else draw(st.sampled_from([0, 0, 1, cpus]))
    shared: tuple[tuple[str, int, int], ...] = ()
    if sharing:
        widest = draw(st.integers(1, cpus))
        shared = ((draw(st.sampled_from(parts)), widest + draw(st.integers(0, cpus)), widest),)
    return node(
        name,
        cpus,
        4000,
        weight=draw(st.integers(0, 2)),
        features=",".join(draw(st.lists(st.sampled_from("abc"), unique=True))),
        used_cpus=used,
        used_memory=draw(st.sampled_from([0, 1000, 4000])) if used or shared else 0,
        gres=draw(st.sampled_from(["", "gpu:1", "gpu:2", "gpu:a:1,gpu:b:2", "gpu:b:1,nic:1"])),
        shared=shared,
    )


@st.composite
def _snapshot(draw: st.DrawFn) -> Snapshot:
    names = _NAMES[: draw(st.integers(1, len(_NAMES)))]
    modes = ["NO", "YES:2", "FORCE:2", "FORCE:4", "EXCLUSIVE"]
    parts = [
        partition(p, draw(st.lists(st.sampled_from(names), min_size=len(names) // 2 + 1,
                                   unique=True)),
                  oversubscribe=draw(st.sampled_from(modes)))
        for p in ("p", "q")
    ]  # fmt: skip
    nodes = [draw(_node(n, ["p", "q"])) for n in names]
    pending = []
    for job_id in draw(st.lists(st.integers(1, 40), max_size=8, unique=True)):
        nodes_given = draw(st.booleans())
        pending.append(
            job(
                job_id,
                partitions=(draw(st.sampled_from(["p", "q"])),),
                num_tasks=draw(st.integers(1, 4)),
                min_nodes=draw(st.integers(1, 3)) if nodes_given else 1,
                nodes_given=nodes_given,
                mem_per_node=draw(st.sampled_from([None, 500, 0])),
                exclusive=draw(st.booleans()) and draw(st.booleans()),
                oversubscribe=draw(st.booleans()),
                constraint=draw(st.sampled_from(_CONSTRAINTS)),
                gres=draw(st.sampled_from(["", "", "gpu:1", "gpu:2", "gpu:a:1", "gpu:b:1,nic:1"])),
            )
        )
    return cluster(nodes, parts).snapshot(pending)


def _assert_sound(snap: Snapshot, plan: Plan) -> None:
    jobs = {j.job_id: j for j in snap.pending}
    memory: dict[str, int] = defaultdict(int)
    gres: dict[tuple[str, str, str], int] = defaultdict(int)
    idle = {name: n.free_cpus for name, n in snap.nodes.items()}
    unshared = {name for name, n in snap.nodes.items() if n.unshared}
    load = {(name, p): c for name, n in snap.nodes.items() for p, c, _ in n.shared}
    for start in plan.starts:
        j = jobs[start.job_id]
        part = snap.partitions[start.partition]
        constraint = parse(j.constraint)
        nodes = [snap.nodes[n] for n in start.nodes]
        # Constraints: the filter on every node, one alternative for all, counts met.
        assert all(constraint.allows(n.features) for n in nodes)
        if constraint.choices():
            assert any(all(c.matches(n.features) for n in nodes) for c in constraint.choices())
        for count in constraint.counts:
            assert sum(count.clause.matches(n.features) for n in nodes) >= count.nodes
        # GRES: each node gives at least what the job asked.
        request = gres_request(j.gres)
        for i, n in enumerate(nodes):
            alloc = start.gres[i] if start.gres else ()
            for name, kind, count in alloc:
                gres[n.name, name, kind] += count
            for name, kind, count in request:
                got = sum(c for g, t, c in alloc if g == name and (not kind or t == kind))
                assert got >= count, (start, n.name)
        # CPUs: idle ones for jobs that keep them; sharing within the partition's count.
        assert start.share == share(j, part)
        for n, cpus in zip(nodes, start.cpus, strict=True):
            assert cpus <= n.cpus
            if start.share:
                assert n.name not in unshared, (start, n.name)
                load[n.name, part.name] = load.get((n.name, part.name), 0) + cpus
                assert load[n.name, part.name] <= part.max_share * n.cpus, (start, n.name)
                idle[n.name] = max(idle[n.name] - cpus, 0)
            else:
                idle[n.name] -= cpus
                assert idle[n.name] >= 0, (start, n.name)
                assert all(p == part.name for (m, p), c in load.items() if m == n.name and c)
                unshared.add(n.name)
        for n, mib in zip(nodes, start.memory, strict=True):
            memory[n.name] += mib
    for name, mib in memory.items():
        assert mib <= snap.nodes[name].free_memory, name
    for (name, g, t), count in gres.items():
        free = {(gn, gt): c for gn, gt, c in snap.nodes[name].gres}
        assert count <= free[g, t], (name, g, t)


@settings(max_examples=300, deadline=None)
@given(snap=_snapshot())
def test_selection_is_sound(snap: Snapshot) -> None:
    """Constraints honoured, GRES never over-allocated, OverSubscribe never past its count."""
    _assert_sound(snap, schedule(snap, NOW))
    _assert_sound(snap, schedule(snap, NOW, BackfillParams()))
    # Each job alone, without the partition blocking of a pass.
    for j in snap.pending:
        for part in snap.partitions.values():
            if part.name in j.partitions:
                outcome = place(j, part, snap.nodes)
                if isinstance(outcome, Start):
                    _assert_sound(snap, Plan(now=NOW, starts=[outcome]))


@pytest.mark.parametrize(
    ("free", "nodes", "tasks", "placed"),
    [
        ((1, 2), 1, 2, (("n2",), (2,))),  # -N1 -n2: the first node's one CPU is too few
        ((1, 1, 4), 2, 5, (("n1", "n3"), (1, 4))),  # -N2 -n5: n1 then the node holding 4
        ((1, 2, 2, 2), 2, 4, (("n2", "n3"), (2, 2))),
        ((4, 4), 2, 6, (("n1", "n2"), (4, 2))),  # filled in order where that fits
    ],
)
def test_a_fixed_node_count_passes_over_nodes_too_small_for_what_is_left(
    free: tuple[int, ...], nodes: int, tasks: int, placed: tuple[tuple[str, ...], tuple[int, ...]]
) -> None:
    """``-N k -n m`` fills nodes in order (Slurm's cons_tres), but not a node that
    leaves more tasks than the k nodes can hold: the job starts where it fits."""
    busy = cluster(
        [node(f"n{i + 1}", cpus=4, used_cpus=4 - f) for i, f in enumerate(free)],
        [partition("batch", f"n[1-{len(free)}]")],
    )
    pending = [job(1, num_tasks=tasks, tasks_given=True, min_nodes=nodes, max_nodes=nodes,
                   nodes_given=True)]  # fmt: skip
    plan = schedule(busy.snapshot(pending), NOW)
    assert [(s.nodes, s.cpus) for s in plan.starts] == [placed]
