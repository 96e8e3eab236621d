"""Flavor fungibility through ``schedule()``: --gres alternatives, --prefer, partitions
ranked by expected start, and the queues' WhenCanBorrow / WhenCanPreempt
(controller/core/flavors.py). Issue 18, point 2."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller import queueviews
from controller.core import BackfillParams, Plan, placement, schedule
from controller.core.alternatives import flavors_of
from controller.core.fairshare import Usage
from controller.core.plan import Start
from controller.core.preempt import PreemptPolicy
from controller.core.priority import NO_RANKING
from controller.core.snapshot import NodeView, PartitionView, Running, Snapshot
from controller.core.timeline import ceil_to
from controller.jobstate import Reason
from controller.model import Job
from corral import gres as gres_syntax
from corral.confsyntax import ConfigError
from corral.queueconf import parse
from tests.unit.scenario import NOW, cluster, job, node, partition, running

H100, A100 = "gpu:h100:8", "gpu:a100:8"
EITHER = (H100, A100)
HOUR = 3600


def at(seconds: int) -> int:
    """``NOW + seconds`` as backfill plans it: rounded up to bf_resolution (60 s)."""
    return ceil_to(NOW + seconds, 60)


def gpu_node(name: str, kind: str, busy_until: int = 0, **kw: object) -> NodeView:
    """A node of 8 ``kind`` GPUs and 8 CPUs; ``busy_until``: all of them held until then."""
    return node(name, cpus=8, gres="" if busy_until else f"gpu:{kind}:8", **kw)  # type: ignore[arg-type]


def holder(job_id: int, name: str, kind: str, until: int, part: str = "gpu") -> Running:
    """The running job holding all of ``name``'s CPUs and GPUs until ``until``."""
    gres = ((("gpu", kind, 8),),)
    return Running(
        job_id, (name,), (8,), (0,), until, gres, preemptable=True, partition=part, requeue=True
    )


def fungible(job_id: int = 1, options: tuple[str, ...] = EITHER, **kw: object) -> Job:
    """A one-node job asking for any of ``options`` (``--gres=a|b``), in partition gpu."""
    return job(
        job_id,
        gres=options[0],
        gres_alternatives=options,
        partitions=kw.pop("partitions", ("gpu",)),
        time_limit=60,
        **kw,
    )


@dataclass(frozen=True)
class Case:
    """A cluster (nodes, partitions, running jobs), one job, and what the pass decides."""

    id: str
    nodes: tuple[NodeView, ...]
    pending: Job
    starts_on: tuple[str, ...] = ()  # () : it waits
    gres: str = ""  # the alternative it starts on, or (waiting) the one it awaits
    why: str = ""
    expected: int = 0  # its expected start (waiting)
    outcomes: tuple[str, ...] = ()  # what each alternative met
    holders: tuple[Running, ...] = ()
    parts: tuple[PartitionView, ...] = field(default=(partition("gpu", "h1,a1"),))

    def plan(self) -> Plan:
        snap = cluster(self.nodes, self.parts).snapshot([self.pending], running=self.holders)
        return schedule(snap, NOW, BackfillParams())


CASES = [
    Case(
        "first-choice-free",
        (gpu_node("h1", "h100"), gpu_node("a1", "a100")),
        fungible(),
        starts_on=("h1",),
        gres=H100,
        why="first",
        outcomes=("starts", "untried"),
    ),
    Case(
        "first-choice-busy-second-chosen",
        (gpu_node("h1", "h100", busy_until=NOW + HOUR), gpu_node("a1", "a100")),
        fungible(),
        starts_on=("a1",),
        gres=A100,
        why="next",
        outcomes=("Resources", "starts"),
        holders=(holder(9, "h1", "h100", NOW + HOUR),),
    ),
    Case(
        "both-busy-the-earliest-second",
        (
            gpu_node("h1", "h100", busy_until=NOW + 2 * HOUR),
            gpu_node("a1", "a100", busy_until=NOW + HOUR // 2),
        ),
        fungible(),
        gres=A100,
        why="soonest",
        expected=at(HOUR // 2),
        outcomes=("Resources", "awaited"),
        holders=(
            holder(9, "h1", "h100", NOW + 2 * HOUR),
            holder(8, "a1", "a100", NOW + HOUR // 2),
        ),
    ),
    Case(
        "both-busy-the-earliest-first",
        (
            gpu_node("h1", "h100", busy_until=NOW + HOUR // 2),
            gpu_node("a1", "a100", busy_until=NOW + 2 * HOUR),
        ),
        fungible(),
        gres=H100,
        why="soonest",
        expected=at(HOUR // 2),
        outcomes=("awaited", "Resources"),
        holders=(
            holder(9, "h1", "h100", NOW + HOUR // 2),
            holder(8, "a1", "a100", NOW + 2 * HOUR),
        ),
    ),
    Case(
        "both-busy-a-tie-goes-to-the-first",
        (
            gpu_node("h1", "h100", busy_until=NOW + HOUR),
            gpu_node("a1", "a100", busy_until=NOW + HOUR),
        ),
        fungible(),
        gres=H100,
        why="soonest",
        expected=at(HOUR),
        outcomes=("awaited", "Resources"),
        holders=(holder(9, "h1", "h100", NOW + HOUR), holder(8, "a1", "a100", NOW + HOUR)),
    ),
    Case(
        "an-alternative-no-node-has-is-passed-over",
        (gpu_node("h1", "h100", busy_until=NOW + HOUR), gpu_node("a1", "a100")),
        fungible(options=("gpu:h100:16", A100)),
        starts_on=("a1",),
        gres=A100,
        why="next",
        outcomes=("Resources", "starts"),
        holders=(holder(9, "h1", "h100", NOW + HOUR),),
    ),
    # ---- --prefer: Slurm's soft constraint
    Case(
        "prefer-honoured",
        (node("n1", weight=1), node("n2", weight=5, features="nvlink")),
        job(1, prefer="nvlink", partitions=("gpu",)),
        starts_on=("n2",),
        why="first",
        outcomes=("starts", "untried"),
        parts=(partition("gpu", "n1,n2"),),
    ),
    Case(
        "prefer-relaxed-when-none-can-be-had",
        (node("n1"), node("n2", features="nvlink", used_cpus=4)),
        job(1, prefer="nvlink", partitions=("gpu",)),
        starts_on=("n1",),
        why="next",
        outcomes=("Resources", "starts"),
        parts=(partition("gpu", "n1,n2"),),
    ),
    Case(
        "prefer-with-a-count-forces-that-many-in",
        (node("n1"), node("n2"), node("n3", weight=5, features="nvlink")),
        job(1, prefer="nvlink*1", min_nodes=2, num_tasks=2, nodes_given=True, partitions=("gpu",)),
        starts_on=("n3", "n1"),  # as -C's counts: one node with it, then as usual
        why="first",
        outcomes=("starts", "untried"),
        parts=(partition("gpu", "n1,n2,n3"),),
    ),
    Case(
        "prefer-stands-in-for-the-constraint-first",
        (node("n1", features="intel"), node("n2", features="amd,nvlink")),
        job(1, constraint="intel", prefer="nvlink", partitions=("gpu",)),
        starts_on=("n2",),  # as Slurm: --prefer "will override whatever is set there"
        why="first",
        outcomes=("starts", "untried"),
        parts=(partition("gpu", "n1,n2"),),
    ),
    Case(
        "prefer-with-alternatives-gres-first",
        (
            gpu_node("h1", "h100", features="nvlink", busy_until=NOW + HOUR),
            gpu_node("h2", "h100"),
            gpu_node("a1", "a100", features="nvlink"),
        ),
        fungible(prefer="nvlink"),
        starts_on=("h2",),  # h100 without nvlink before a100 with it
        gres=H100,
        why="next",
        outcomes=("Resources", "starts", "untried", "untried"),
        holders=(holder(9, "h1", "h100", NOW + HOUR),),
        parts=(partition("gpu", "h1,h2,a1"),),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_flavors_through_schedule(case: Case) -> None:
    plan = case.plan()
    start = next((s for s in plan.starts if s.job_id == case.pending.job_id), None)
    if case.starts_on:
        assert start is not None and start.nodes == case.starts_on
        assert start.flavor is not None
        choice = start.flavor
    else:
        assert start is None
        assert plan.expected[case.pending.job_id].start_time == case.expected
        choice = plan.choices[case.pending.job_id]
    assert choice.why == case.why
    assert tuple(a.outcome for a in choice.alternatives) == case.outcomes
    if case.gres:
        assert choice.gres == case.gres


def test_a_start_takes_the_gres_of_its_alternative() -> None:
    """What the start holds on the node is the chosen alternative's GPUs."""
    case = CASES[1]
    start = next(s for s in case.plan().starts if s.job_id == 1)
    assert start.gres == ((("gpu", "a100", 8),),)


def test_both_busy_the_reservation_holds_the_earliest_alternatives_node() -> None:
    """The job waits for a1 (expected sooner) and its plan claims a1, not h1: a job
    behind it that fits on h1 only after the first's end is not held back by it."""
    plan = CASES[2].plan()
    assert plan.expected[1].nodes == ("a1",)
    assert [a.start for a in plan.choices[1].alternatives] == [at(2 * HOUR), at(HOUR // 2)]


def test_alternatives_in_order_gres_first_preference_within() -> None:
    flavors = flavors_of(job(1, gres=H100, gres_alternatives=EITHER, prefer="nvlink"))
    assert [f.label for f in flavors] == [
        "gpu:h100:8 --prefer=nvlink",
        "gpu:h100:8",
        "gpu:a100:8 --prefer=nvlink",
        "gpu:a100:8",
    ]
    assert [f.job.constraint for f in flavors] == ["nvlink", "", "nvlink", ""]
    assert all(not f.job.gres_alternatives and not f.job.prefer for f in flavors)


def test_prefer_is_not_reserved_for() -> None:
    """Slurm's backfill tries --prefer "now only": a job whose preferred nodes are busy
    longer than the others waits for the soonest nodes as -C allows."""
    nodes = (node("n1", features="nvlink", used_cpus=4), node("n2", used_cpus=4))
    holders = (
        Running(9, ("n1",), (4,), (0,), NOW + 2 * HOUR, partition="gpu"),
        Running(8, ("n2",), (4,), (0,), NOW + HOUR // 2, partition="gpu"),
    )
    pending = job(1, prefer="nvlink", partitions=("gpu",), time_limit=60)
    snap = cluster(nodes, [partition("gpu", "n1,n2")]).snapshot([pending], running=holders)
    plan = schedule(snap, NOW, BackfillParams())
    assert plan.expected[1].nodes == ("n2",)
    assert plan.choices[1].alternatives[1].outcome == "awaited"


# ------------------------------------------------------------------ partitions


def test_partitions_are_ranked_by_expected_start() -> None:
    """-p a,b: both free only later; b (the lower PriorityTier) frees sooner, so the job
    waits for b, as Slurm starts a job "in the reservation offering the earliest start
    time". Both free within one probe of the timeline, where the first partition by
    tier used to win."""
    nodes = (node("n1", used_cpus=4), node("n2", used_cpus=4))
    holders = (
        Running(9, ("n1",), (4,), (0,), NOW + 1200, partition="a"),
        Running(8, ("n2",), (4,), (0,), NOW + 1100, partition="b"),
    )
    parts = [partition("a", "n1", tier=2), partition("b", "n2", tier=1)]
    pending = job(1, num_tasks=4, partitions=("a", "b"), time_limit=60)
    snap = cluster(nodes, parts).snapshot([pending], running=holders)
    plan = schedule(snap, NOW, BackfillParams())
    assert (plan.expected[1].partition, plan.expected[1].start_time) == ("b", at(1100))


def test_partitions_start_in_the_first_that_fits_now() -> None:
    """Now: the first partition (by PriorityTier) that holds it, as Slurm's main pass."""
    nodes = (node("n1"), node("n2"))
    parts = [partition("a", "n1", tier=1), partition("b", "n2", tier=2)]
    plan = schedule(cluster(nodes, parts).snapshot([job(1, partitions=("a", "b"))]), NOW)
    assert plan.starts[0].partition == "b"


# ------------------------------------------------------------------ the queues' policy

QUEUES = """\
QueueName=teama Accounts=a Guarantee=gres/gpu:h100=8
QueueName=teamb Accounts=b Guarantee=gres/gpu:a100=8 {extra}
"""


def queued_plan(
    queues: str,
    pending: list[Job],
    nodes: tuple[NodeView, ...],
    held: list[Job] = (),  # type: ignore[assignment]
    preempt: PreemptPolicy | None = None,
    parts: tuple[PartitionView, ...] = (partition("gpu", "h1,a1"),),
) -> Plan:
    """The plan of one pass with ``queues`` for queues.conf."""
    conf = parse(queues, "queues.conf", gres_types=("gpu",))
    configured = {n.name: _whole(n) for n in nodes}
    live = {n.name: n for n in nodes}
    view = queueviews.view(
        conf, held, pending, queueviews.capacity_of(configured, live), None, Usage(), NO_RANKING
    )
    views = [
        Running(
            j.job_id,
            j.nodes,
            j.cpus,
            j.alloc_mem,
            NOW + HOUR,
            j.gres_alloc,
            preemptable=True,
            requeue=True,
            partition=j.partition,
        )
        for j in held
    ]
    snap: Snapshot = replace(cluster(nodes, parts).snapshot(pending, running=views), queues=view)
    if preempt is not None:
        snap = replace(snap, preempt=preempt)
    return schedule(snap, NOW, BackfillParams())


def _whole(n: NodeView) -> NodeView:
    """``n`` as configured: its GPUs all there (the capacity the queues divide)."""
    kind = "h100" if n.name.startswith("h") else "a100"
    return replace(n, free_cpus=n.cpus, gres=gres_syntax.parse_node(f"gpu:{kind}:8"))


@pytest.mark.parametrize(
    ("words", "node_name", "why"),
    [
        pytest.param("", "h1", "first", id="MayStopSearch-borrows-the-first"),
        pytest.param("WhenCanBorrow=TryNextFlavor", "a1", "next", id="TryNextFlavor"),
    ],
)
def test_when_can_borrow(words: str, node_name: str, why: str) -> None:
    """Team b's job asks h100|a100; team a leaves its h100 idle. Borrowing them is
    Kueue's default; TryNextFlavor takes team b's own a100 first."""
    pending = fungible(account="b")
    nodes = (gpu_node("h1", "h100"), gpu_node("a1", "a100"))
    plan = queued_plan(QUEUES.format(extra=words), [pending], nodes)
    assert plan.starts[0].nodes == (node_name,)
    assert plan.starts[0].flavor is not None and plan.starts[0].flavor.why == why


def test_try_next_flavor_borrows_when_nothing_fits_within_the_guarantee() -> None:
    """TryNextFlavor passes the borrowing alternative over only for one that fits
    without borrowing: with team b's a100 busy, it borrows team a's h100 after all."""
    pending = fungible(account="b")
    nodes = (gpu_node("h1", "h100"), gpu_node("a1", "a100", busy_until=NOW + HOUR))
    plan = queued_plan(QUEUES.format(extra="WhenCanBorrow=TryNextFlavor"), [pending], nodes)
    assert plan.starts[0].nodes == ("h1",)
    flavor = plan.starts[0].flavor
    assert flavor is not None and flavor.why == "borrowing"
    assert [a.outcome for a in flavor.alternatives] == ["starts", "Resources"]


def _low(job_id: int, name: str, kind: str, account: str = "c", part: str = "lo") -> Job:
    """A running job holding all of ``name``'s CPUs and GPUs."""
    return running(
        job_id,
        (name,),
        account=account,
        cpus=(8,),
        partition=part,
        gres_alloc=((("gpu", kind, 8),),),
    )


@pytest.mark.parametrize(
    ("words", "starts", "preempted"),
    [
        pytest.param("", ("a1",), {}, id="TryNextFlavor-takes-the-free-one"),
        pytest.param("WhenCanPreempt=MayStopSearch", (), {7: 1}, id="MayStopSearch-preempts"),
    ],
)
def test_when_can_preempt_with_preempt_type(
    words: str, starts: tuple[str, ...], preempted: dict[int, int]
) -> None:
    """PreemptType=preempt/partition_prio: the job (tier 2) may preempt the tier-1 job
    on h1. TryNextFlavor starts it on the free a1; MayStopSearch stops at h1, which
    preemption can free, and preempts for it. No queue governs anything: the root's
    line sets the policy of the jobs in no queue."""
    parts = (partition("hi", "h1,a1", tier=2), partition("lo", "h1,a1", tier=1))
    policy = PreemptPolicy("partition_prio", tiers={"hi": 2, "lo": 1})
    pending = fungible(partitions=("hi",))
    nodes = (gpu_node("h1", "h100", busy_until=NOW + HOUR), gpu_node("a1", "a100"))
    queues = f"QueueName=root {words}\n"
    plan = queued_plan(
        queues, [pending], nodes, [_low(7, "h1", "h100")], preempt=policy, parts=parts
    )
    assert tuple(n for s in plan.starts for n in s.nodes) == starts
    assert dict(plan.preempted) == preempted
    if preempted:
        assert plan.reasons[1] is Reason.RESOURCES
        assert plan.choices[1].why == "preempting" and plan.choices[1].chosen == 0


@pytest.mark.parametrize(
    ("words", "starts", "preempted"),
    [
        pytest.param("", ("h1",), {}, id="TryNextFlavor-takes-the-free-one"),
        pytest.param("WhenCanPreempt=MayStopSearch", (), {7: 1}, id="MayStopSearch-reclaims"),
    ],
)
def test_when_can_preempt_with_reclaim(
    words: str, starts: tuple[str, ...], preempted: dict[int, int]
) -> None:
    """Team b's job asks a100|h100; team a borrows b's a100 (a running job on a1),
    h1 is free. TryNextFlavor starts it on h1 (borrowing: MayStopSearch for borrowing);
    MayStopSearch for preempting stops at a100, within its guarantee, and reclaims it."""
    pending = fungible(account="b", options=(A100, H100))
    nodes = (gpu_node("h1", "h100"), gpu_node("a1", "a100", busy_until=NOW + HOUR))
    held = [_low(7, "a1", "a100", account="a", part="gpu")]
    plan = queued_plan(QUEUES.format(extra=words), [pending], nodes, held)
    assert tuple(n for s in plan.starts for n in s.nodes) == starts
    assert dict(plan.preempted) == preempted


def test_a_plain_job_is_placed_as_ever() -> None:
    """No alternatives: no choice is noted, and the start carries none."""
    plan = schedule(cluster((node("n1"),), [partition("batch", "n1")]).snapshot([job(1)]), NOW)
    assert isinstance(plan.starts[0], Start) and plan.starts[0].flavor is None
    assert not plan.choices


def test_the_policy_is_inherited_down_the_tree() -> None:
    conf = parse(
        "QueueName=root WhenCanPreempt=MayStopSearch\n"
        "QueueName=ai WhenCanBorrow=TryNextFlavor\n"
        "QueueName=teama Parent=ai Accounts=a\n"
        "QueueName=teamb Parent=ai Accounts=b WhenCanBorrow=MayStopSearch\n",
        "queues.conf",
    )
    assert conf.fungibility("teama") == ("TryNextFlavor", "MayStopSearch")
    assert conf.fungibility("teamb") == ("MayStopSearch", "MayStopSearch")
    assert parse("QueueName=t Accounts=a\n", "q").fungibility("t") == (
        "MayStopSearch",
        "TryNextFlavor",
    )


def test_a_bad_policy_word_is_refused_with_its_line() -> None:
    with pytest.raises(ConfigError) as bad:
        parse("QueueName=t Accounts=a\nQueueName=u Accounts=b WhenCanBorrow=Sometimes\n", "q")
    assert str(bad.value) == (
        "q:2: bad WhenCanBorrow value 'Sometimes': use MayStopSearch, TryNextFlavor"
    )


# ------------------------------------------------------------------ properties

KINDS = ("h100", "a100", "l40")


@settings(max_examples=150, deadline=None)
@given(
    free=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 4)), min_size=1, max_size=5),
    options=st.lists(
        st.tuples(st.sampled_from(KINDS), st.integers(1, 4)), min_size=2, max_size=3, unique=True
    ),
    prefer=st.booleans(),
)
def test_a_job_gets_the_first_alternative_that_fits_now(
    free: list[tuple[str, int]], options: list[tuple[str, int]], prefer: bool
) -> None:
    """Whatever the cluster: the job starts on an alternative only if no earlier one
    fits now, it holds exactly that alternative's GPUs, and it waits only if none fits."""
    nodes = [
        node(f"n{i}", cpus=8, gres=f"gpu:{kind}:{n}" if n else "", features="nvlink" * (i % 2))
        for i, (kind, n) in enumerate(free)
    ]
    parts = [partition("gpu", [n.name for n in nodes])]
    texts = tuple(f"gpu:{kind}:{n}" for kind, n in options)
    pending = fungible(options=texts, prefer="nvlink" if prefer else "")
    snap = cluster(nodes, parts).snapshot([pending])
    plan = schedule(snap, NOW)
    fits = [
        isinstance(placement.first_fit(f.job, snap, snap.nodes, set()), Start)
        for f in flavors_of(pending)
    ]
    if not any(fits):
        assert not plan.starts
        return
    (start,) = plan.starts
    assert start.flavor is not None
    assert start.flavor.chosen == fits.index(True)
    kind, count = options[flavors_of(pending)[start.flavor.chosen].option]
    assert start.gres == ((("gpu", kind, count),),)


def test_a_job_its_queue_refuses_every_alternative_of_says_so() -> None:
    """Team b may hold no more than its limit of either type: the job waits with its
    queue's reason, and its choice names each alternative's."""
    queues = (
        "QueueName=teama Accounts=a Guarantee=gres/gpu:h100=8\n"
        "QueueName=teamb Accounts=b Limit=gres/gpu:h100=0,gres/gpu:a100=0\n"
    )
    nodes = (gpu_node("h1", "h100"), gpu_node("a1", "a100"))
    plan = queued_plan(queues, [fungible(account="b")], nodes)
    assert not plan.starts and plan.reasons[1] is Reason.QUEUE_LIMIT
    assert [a.outcome for a in plan.choices[1].alternatives] == ["QueueLimit", "QueueLimit"]


def test_may_stop_search_does_not_stop_where_a_suspended_victim_keeps_the_gpus() -> None:
    """A victim whose PreemptMode is SUSPEND keeps its GPUs: preempting it cannot give
    the job the h100, so MayStopSearch does not stop there and the job takes the a100."""
    parts = (partition("hi", "h1,a1", tier=2), partition("lo", "h1,a1", tier=1))
    policy = PreemptPolicy("partition_prio", tiers={"hi": 2, "lo": 1})
    nodes = (gpu_node("h1", "h100", busy_until=NOW + HOUR), gpu_node("a1", "a100"))
    held = [_low(7, "h1", "h100")]
    conf = parse("QueueName=root WhenCanPreempt=MayStopSearch\n", "queues.conf")
    view = queueviews.view(
        conf, held, [], queueviews.capacity_of({}, {}), None, Usage(), NO_RANKING
    )
    victim = Running(
        7, ("h1",), (8,), (0,), NOW + HOUR, ((("gpu", "h100", 8),),), preemptable=True,
        partition="lo", mode="SUSPEND",
    )  # fmt: skip
    pending = fungible(partitions=("hi",))
    snap = cluster(nodes, parts).snapshot([pending], running=[victim])
    snap = replace(snap, queues=replace(view, entries={}), preempt=policy)
    plan = schedule(snap, NOW, BackfillParams())
    assert [s.nodes for s in plan.starts] == [("a1",)] and not plan.preempted
