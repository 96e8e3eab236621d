"""Properties of the quota core (controller/core/quota.py) on random queue trees.

The trees are what queues.conf accepts: every child's guarantee within its
parent's (their sum no more than the parent's), limits at least the guarantee,
lend limits at most the guarantee; the capacity may be below the guarantees
(nodes down). Jobs live in leaf queues.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.quota import (
    MAINTAIN_FAIR_SHARE,
    Eviction,
    RunningJob,
    Shares,
    WaitingJob,
    admit,
    divide,
    kept,
    reclaim,
)
from corral.queueconf import QueueConf, QueueSpec, ResourceQuota
from tests.unit.quotascenario import CPU, GPU, NOW, asked, held

RESOURCES = (GPU, CPU)
FAST = settings(max_examples=200, deadline=None)


#: Strategies built once: building them per draw is most of the time these tests take.
SMALL = st.integers(0, 16)
MAYBE = st.integers(-4, 8)  # below 0: None
WEIGHTS = st.sampled_from([0.0, 1.0, 2.0, 5.0])
PRIORITIES = st.integers(0, 3)
KIDS = st.integers(0, 3)
CAPACITY = st.integers(0, 24)
ASK = st.integers(0, 12)
USAGE = st.floats(0.0, 1.0)
SLACK = st.integers(-2, 4)
JOBS = st.integers(0, 30)
WAITS = st.integers(1, 12)
PICK = st.integers(0, 1 << 16)  # an index into a list, modulo its length
AMOUNT = {GPU: st.integers(1, 3), CPU: st.sampled_from([0, 0, 1, 2])}  # at least one GPU


def _pick(draw: st.DrawFn, items: list[str]) -> str:
    return items[draw(PICK) % len(items)]


def _job(draw: st.DrawFn, resources: tuple[str, ...]) -> dict[str, int]:
    return {r: draw(AMOUNT[r]) for r in resources}


def _quota(draw: st.DrawFn, most: int) -> ResourceQuota:
    guarantee = min(draw(SMALL), most)
    limit, borrow, lend = draw(MAYBE), draw(MAYBE), draw(MAYBE)
    return ResourceQuota(
        guarantee=guarantee,
        limit=None if limit < 0 else guarantee + limit,
        borrow_limit=None if borrow < 0 else borrow,
        lend_limit=None if lend < 0 else min(lend, guarantee),
    )


@st.composite
def _trees(draw: st.DrawFn, depth: int = 2, resources: tuple[str, ...] = RESOURCES) -> QueueConf:
    """A root and up to ``depth`` levels of queues under it, each with quotas, weight
    and priority; children's guarantees fit in their parent's."""
    queues = [QueueSpec(name="root", parent=None, quotas={})]
    room = {r: draw(SMALL) for r in resources}

    def grow(parent: str, room: Mapping[str, int], level: int) -> None:
        left = dict(room)
        for i in range(max(draw(KIDS), 2 if level == 1 else 0)):
            name = f"{parent}.{i}" if parent != "root" else f"q{i}"
            quotas = {r: _quota(draw, left[r]) for r in resources}
            for r in resources:
                left[r] -= quotas[r].guarantee
            queues.append(
                QueueSpec(
                    name=name,
                    parent=parent,
                    quotas=quotas,
                    over_quota_weight=draw(WEIGHTS),
                    priority=draw(PRIORITIES),
                )
            )
            if level < depth:
                grow(name, {r: quotas[r].guarantee for r in resources}, level + 1)

    grow("root", room, 1)
    return QueueConf(queues={q.name: q for q in queues})


def _up_to(conf: QueueConf, queue: str, other: str) -> list[str]:
    """``queue`` and its ancestors below the lowest one ``other`` is under too."""

    def up(q: str | None) -> list[str]:
        return [] if q is None else [q, *up(conf.queues[q].parent)]

    theirs = set(up(other))
    return [q for q in up(queue) if q not in theirs]


def _leaves(conf: QueueConf) -> list[str]:
    parents = {q.parent for q in conf.queues.values()}
    return [name for name in conf.queues if name not in parents]


def _add(into: dict[str, dict[str, int]], queue: str, amounts: Mapping[str, int]) -> None:
    """Add ``amounts`` to what ``queue`` holds in ``into``."""
    mine = into.setdefault(queue, {})
    for r, n in amounts.items():
        mine[r] = mine.get(r, 0) + n


def _totals(conf: QueueConf, own: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    total = {q: dict(own.get(q, {})) for q in conf.queues}
    for spec in reversed(list(conf.queues.values())):
        if spec.parent is not None:
            for r, n in total[spec.name].items():
                total[spec.parent][r] = total[spec.parent].get(r, 0) + n
    return total


@dataclass(frozen=True)
class World:
    """A tree, a capacity, and per leaf what is asked and the time-decayed usage."""

    conf: QueueConf
    capacity: dict[str, int]
    requested: dict[str, dict[str, int]]
    usage: dict[str, float]


@st.composite
def _worlds(draw: st.DrawFn) -> World:
    conf = draw(_trees())
    leaves = _leaves(conf)
    return World(
        conf=conf,
        capacity={r: draw(CAPACITY) for r in RESOURCES},
        requested={q: {r: draw(ASK) for r in RESOURCES} for q in leaves},
        usage={q: draw(USAGE) for q in leaves},
    )


@FAST
@given(_worlds(), st.sampled_from([0.0, 1.0, 2.0]))
def test_children_share_exactly_what_their_parent_has_and_they_can_take(
    world: World, k: float
) -> None:
    shares = divide(world.conf, world.capacity, world.requested, world.usage, k)
    for r in RESOURCES:
        assert shares.fair_of("root", r) == world.capacity[r]
        for spec in world.conf.queues.values():
            fair = shares.fair_of(spec.name, r)
            assert fair >= 0
            if spec.parent is not None:
                assert fair <= shares.demand[spec.name][r]
                limit = spec.quotas[r].limit
                assert limit is None or fair <= limit
            kids = [q.name for q in world.conf.queues.values() if q.parent == spec.name]
            if kids:
                given_out = sum(shares.fair_of(kid, r) for kid in kids)
                asked_for = sum(shares.demand[kid][r] for kid in kids)
                assert given_out == min(fair, asked_for)


@FAST
@given(_worlds(), st.data())
def test_admissions_never_exceed_capacity_limits_or_borrow_limits(
    world: World, data: st.DataObject
) -> None:
    conf = world.conf
    shares = divide(conf, world.capacity, world.requested, world.usage)
    leaves = _leaves(conf)
    job = st.tuples(
        st.sampled_from(leaves),
        st.fixed_dictionaries({r: st.integers(0, 5) for r in RESOURCES}),
        st.booleans(),
    )
    allocated: dict[str, dict[str, int]] = {}
    pinned: dict[str, dict[str, int]] = {}  # what jobs that cannot be preempted hold
    for queue, request, preemptible in data.draw(st.lists(job, max_size=25)):
        if not admit(conf, shares, allocated, queue, request, preemptible).admitted:
            continue
        for into in (allocated, pinned) if not preemptible else (allocated,):
            _add(into, queue, request)
        total = _totals(conf, allocated)
        for r in RESOURCES:
            assert total["root"].get(r, 0) <= world.capacity[r]
            for spec in list(conf.queues.values())[1:]:
                quota = spec.quotas[r]
                have = total[spec.name].get(r, 0)
                assert quota.limit is None or have <= quota.limit
                assert quota.borrow_limit is None or have <= quota.guarantee + quota.borrow_limit
            for q, amounts in pinned.items():
                assert amounts.get(r, 0) <= conf.queues[q].quotas[r].guarantee


@st.composite
def _busy(
    draw: st.DrawFn, depth: int, resources: tuple[str, ...]
) -> tuple[World, list[RunningJob]]:
    """A world whose running jobs got there by admission (as a live cluster's did)."""
    conf = draw(_trees(depth=depth, resources=resources))
    leaves = _leaves(conf)
    # About the guarantees, as sites size them (a little more, or less with nodes down),
    # and the jobs more than fit: reclaim has work.
    top = [q for q in conf.queues.values() if q.parent == "root"]
    capacity = {r: max(1, sum(q.quotas[r].guarantee for q in top) + draw(SLACK)) for r in resources}
    start = divide(conf, capacity, {}, {})
    allocated: dict[str, dict[str, int]] = {}
    jobs: list[RunningJob] = []
    hog = _pick(draw, leaves)  # a queue that runs more than its share, to be reclaimed from
    for i in range(draw(JOBS)):
        queue = hog if draw(PICK) % 2 else _pick(draw, leaves)
        request = _job(draw, resources)
        if admit(conf, start, allocated, queue, request, True).admitted:
            _add(allocated, queue, request)
            suspends = draw(PICK) % 4 == 0  # PreemptMode=SUSPEND: it would lend its CPUs alone
            jobs.append(
                RunningJob(i, queue, draw(PRIORITIES), request, NOW - 1_000 + i, suspends=suspends)
            )
    return World(conf, capacity, {}, {}), jobs


def _waiting(draw: st.DrawFn, conf: QueueConf, resources: tuple[str, ...]) -> list[WaitingJob]:
    return [
        WaitingJob(
            1_000 + i,
            _pick(draw, _leaves(conf)),
            draw(PRIORITIES),
            _job(draw, resources),
            NOW - 100,
            NOW - 100,
        )
        for i in range(draw(WAITS))
    ]


def _below(conf: QueueConf, shares: Shares, own: Mapping[str, Mapping[str, int]]) -> set[str]:
    """Leaf queues below their guarantee in some resource.

    Leaves, where jobs run: a queue above both the victim's and the waiting job's
    changes only by what the victim frees beyond the request, which goes back to
    the cluster (anyone's guarantee may take it), not to another queue."""
    return {
        q
        for q in _leaves(conf)
        for r in shares.resources
        if own.get(q, {}).get(r, 0) < shares.guarantee_of(q, r)
    }


def _apply(
    evictions: list[Eviction],
    jobs: list[RunningJob],
    wait: list[WaitingJob],
) -> tuple[list[RunningJob], list[WaitingJob]]:
    """The cluster after the evictions, with the jobs they were for started; a victim
    that is suspended stays, holding what it keeps, and is no victim again."""
    gone = {e.victim for e in evictions}
    served = {e.for_job for e in evictions}
    started = [
        RunningJob(w.job_id, w.queue, w.priority, w.request, NOW)
        for w in wait
        if w.job_id in served
    ]
    stay = [
        j if j.job_id not in gone else replace(j, resources=kept(j.resources), preemptible=False)
        for j in jobs
        if j.job_id not in gone or j.suspends
    ]
    return stay + started, [w for w in wait if w.job_id not in served]


@FAST
@given(_busy(depth=2, resources=RESOURCES), st.data())
def test_reclaim_takes_no_in_quota_job_and_leaves_no_more_queues_below_guarantee(
    busy: tuple[World, list[RunningJob]], data: st.DataObject
) -> None:
    world, jobs = busy
    conf = world.conf
    pending = _waiting(data.draw, conf, RESOURCES)
    shares = divide(conf, world.capacity, asked(jobs, pending), {})
    evictions = reclaim(conf, shares, held(jobs), pending, jobs, NOW)
    # In-quota jobs are never evicted, and MaintainFairShare leaves its victims' queues
    # their fair share: replay the evictions in order, each waiting job starting once
    # its victims are out, as reclaim assumes.
    holding = {q: dict(a) for q, a in held(jobs).items()}
    by_id = {j.job_id: j for j in jobs}
    asks = {w.job_id: w for w in pending}
    current: int | None = None
    for e in evictions:
        if current is not None and e.for_job != current:
            _add(holding, asks[current].queue, asks[current].request)
        current = e.for_job
        victim = by_id[e.victim]
        total = _totals(conf, holding)
        # What the victim gives up: all it holds, or, suspended, its CPUs alone.
        gives = {r: n for r, n in victim.resources.items() if r == CPU or not victim.suspends}
        assert e.freed == {r: n for r, n in gives.items() if n > 0}
        for q in _up_to(conf, victim.queue, asks[e.for_job].queue):
            for r, n in e.freed.items():
                floor = shares.guarantee_of(q, r)
                if e.strategy == MAINTAIN_FAIR_SHARE:
                    floor = max(floor, shares.fair_of(q, r))
                assert total[q].get(r, 0) - n >= floor, e.why
        _add(holding, victim.queue, {r: -n for r, n in e.freed.items()})
    assert len({e.victim for e in evictions}) == len(evictions)
    after, _ = _apply(evictions, jobs, pending)
    assert len(_below(conf, shares, held(after))) <= len(_below(conf, shares, held(jobs)))
    total = _totals(conf, held(after))
    for r in RESOURCES:
        assert total["root"].get(r, 0) <= world.capacity[r]


@FAST
@given(_busy(depth=2, resources=(GPU,)), st.data())
def test_no_queue_stays_below_its_guarantee_while_a_lender_is_over_its_own(
    busy: tuple[World, list[RunningJob]], data: st.DataObject
) -> None:
    """Waiting jobs of one GPU, every job preemptible, no delays: once reclaim and
    admission settle, no queue waits below its guarantee while another queue has a
    job it could give up and stay at or above its guarantee (each queue up to below
    the two's common ancestor: the waiting side within, the giving side at or above)."""
    world, jobs = busy
    conf = world.conf
    pending = [
        WaitingJob(1_000 + i, q, 0, {GPU: 1}, NOW - 100, NOW - 100)
        for i, q in enumerate(data.draw(st.lists(st.sampled_from(_leaves(conf)), max_size=12)))
    ]
    for _ in range(40):
        shares = divide(conf, world.capacity, asked(jobs, pending), {})
        evictions = reclaim(conf, shares, held(jobs), pending, jobs, NOW)
        jobs, pending = _apply(evictions, jobs, pending)
        started = []
        for w in pending:
            if admit(conf, shares, held(jobs), w.queue, w.request, True).admitted:
                jobs.append(RunningJob(w.job_id, w.queue, 0, w.request, NOW))
                started.append(w.job_id)
        pending = [w for w in pending if w.job_id not in started]
        if not evictions and not started:
            break
    total = _totals(conf, held(jobs))

    def gpus(q: str) -> int:
        return total[q].get(GPU, 0)

    for w in pending:
        could_give = [
            j.job_id
            for j in jobs
            if j.queue != w.queue
            and j.preemptible
            and not j.suspends  # a suspension keeps its GPUs
            and all(
                gpus(q) + 1 <= shares.guarantee_of(q, GPU) for q in _up_to(conf, w.queue, j.queue)
            )
            and all(
                gpus(q) - j.resources[GPU] >= shares.guarantee_of(q, GPU)
                for q in _up_to(conf, j.queue, w.queue)
            )
        ]
        assert could_give == [], (w.queue, total)
