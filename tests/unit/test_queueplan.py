"""Queues in the scheduling pass (controller/core/queueplan.py): scenarios run
through ``schedule()`` on snapshots whose queue view ``controller/queueviews.py``
builds from job records, as the controller's snapshot does.

Every scenario is a small GPU cluster (nodes of 8 CPUs and 2 GPUs unless said)
with team queues from ``quotascenario``; jobs land in a queue by account.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller import queueviews
from controller.core import BackfillParams, Plan, Running, Snapshot, schedule
from controller.core.fairshare import Usage
from controller.core.preempt import PreemptPolicy
from controller.core.priority import NO_RANKING
from controller.jobstate import Reason
from controller.model import Job
from corral.queueconf import QueueConf, ResourceQuota
from tests.unit.quotascenario import CPU, GPU, gpus, team, tree
from tests.unit.scenario import NOW, cluster, job, node, partition
from tests.unit.scenario import running as running_job

CPUS = 8


def holding(job_id: int, account: str, nodes: Sequence[str], gpus_each: int, **fields: Any) -> Job:
    """A running job of ``account`` with ``gpus_each`` GPUs and one CPU per GPU on each node."""
    values: dict[str, Any] = {
        "account": account,
        "cpus": tuple(gpus_each for _ in nodes),
        "gres_alloc": tuple((("gpu", "", gpus_each),) for _ in nodes),
        "time_limit": 1440,
    }
    values.update(fields)
    return running_job(job_id, tuple(nodes), **values)


def asking(job_id: int, account: str, gpus_each: int, nodes: int = 1, **fields: Any) -> Job:
    """A pending job of ``account``: ``nodes`` nodes with ``gpus_each`` GPUs and as many
    CPUs on each (``-N nodes --ntasks-per-node=G --gres=gpu:G``)."""
    values: dict[str, Any] = {
        "account": account,
        "gres": f"gpu:{gpus_each}",
        "min_nodes": nodes,
        "nodes_given": True,
        "num_tasks": nodes * gpus_each,
        "ntasks_per_node": gpus_each,
        "time_limit": 60,
    }
    values.update(fields)
    return job(job_id, **values)


@dataclass(frozen=True)
class Scene:
    """A cluster, its queue tree, the jobs running on it and those waiting."""

    conf: QueueConf | None
    running: tuple[Job, ...]
    pending: tuple[Job, ...]
    nodes: int = 4
    gpus: int = 2  # per node
    cpus: int = CPUS
    # Running jobs whose PreemptMode is SUSPEND (under a PreemptType that lets no
    # partition preempt another, so only the queues' reclaim takes victims).
    suspend: frozenset[int] = frozenset()

    def snapshot(self) -> Snapshot:
        names = [f"n{i}" for i in range(1, self.nodes + 1)]
        used_gpus = dict.fromkeys(names, 0)
        used_cpus = dict.fromkeys(names, 0)
        for r in self.running:
            for i, name in enumerate(r.nodes):
                used_cpus[name] += r.cpus[i]
                used_gpus[name] += sum(c for _, _, c in r.gres_alloc[i])
        views = [
            node(
                n,
                cpus=self.cpus,
                used_cpus=used_cpus[n],
                gres=f"gpu:{self.gpus - used_gpus[n]}",
            )
            for n in names
        ]
        records = [
            Running(
                r.job_id,
                r.nodes,
                r.cpus,
                r.alloc_mem,
                r.start_time + r.time_limit * 60,
                r.gres_alloc,
                requeue=r.requeue,
                priority=r.calc_priority,
                partition=r.partition,
                start_time=r.start_time,
                mode="SUSPEND" if r.job_id in self.suspend else "",
            )
            for r in self.running
        ]
        snap = cluster(views, [partition("batch", names)]).snapshot(self.pending, running=records)
        if self.suspend:
            snap = replace(snap, preempt=PreemptPolicy("partition_prio"))
        if self.conf is None:
            return snap
        empty = {n: node(n, cpus=self.cpus, gres=f"gpu:{self.gpus}") for n in names}
        capacity = queueviews.capacity_of(empty, snap.nodes)
        view = queueviews.view(
            self.conf, self.running, self.pending, capacity, None, Usage(), NO_RANKING
        )
        return replace(snap, queues=view)

    def plan(self, now: int = NOW, backfill: bool = False) -> Plan:
        params = BackfillParams(max_job_test=100) if backfill else None
        return schedule(self.snapshot(), now, params)


def teams(**quotas: Any) -> QueueConf:
    """Leaf queues under the root, each taking the account of its name."""
    specs = []
    for name, fields in quotas.items():
        fields = dict(fields)
        specs.append(team(name, fields.pop("quotas", None), accounts=(name,), **fields))
    return tree(*specs)


# ---------------------------------------------------------------- borrowing and reclaim


def test_a_team_below_its_guarantee_reclaims_one_borrowed_node_and_no_more() -> None:
    conf = teams(a={"quotas": gpus(4)}, b={"quotas": gpus(4)})
    scene = Scene(
        conf,
        running=(
            holding(10, "a", ["n1"], 2, start_time=NOW - 300),
            holding(11, "a", ["n2"], 2, start_time=NOW - 200),
            holding(12, "a", ["n3"], 2, start_time=NOW - 100),  # a's newest: borrowed
            holding(13, "b", ["n4"], 2),
        ),
        pending=(asking(1, "b", 2), asking(2, "b", 2)),
    )
    plan = scene.plan()
    # b had 2 of its 4: job 1 takes the newest of a's borrowed node back; job 2
    # would put b past its guarantee and a below its own, so it only waits.
    assert plan.preempted == {12: 1}
    assert plan.requeued == {12}
    assert plan.starts == ()
    # Within b's guarantee, but every GPU is held: the cohort has none unused until
    # the victim has gone (Kueue's "insufficient unused quota in cohort").
    assert plan.reasons[1] is Reason.QUEUE_COHORT_FULL
    assert "b" in plan.why[12] and "a" in plan.why[12]


def test_reclaim_takes_a_borrowers_job_never_one_within_its_guarantee() -> None:
    conf = teams(a={"quotas": gpus(4)}, b={"quotas": gpus(4)}, c={"quotas": gpus(0)})
    scene = Scene(
        conf,
        running=(
            # a's jobs are the newest and the lowest priority, but within a's guarantee.
            holding(10, "a", ["n1"], 2, start_time=NOW - 10, calc_priority=1),
            holding(11, "a", ["n2"], 2, start_time=NOW - 10, calc_priority=1),
            holding(20, "c", ["n3"], 2, start_time=NOW - 500, calc_priority=100),
            holding(21, "c", ["n4"], 2, start_time=NOW - 400, calc_priority=100),
        ),
        pending=(asking(1, "b", 2), asking(2, "b", 2), asking(3, "b", 2)),
    )
    plan = scene.plan()
    assert plan.preempted == {21: 1, 20: 2}  # c's newest first; b's third job: nobody left
    assert not set(plan.preempted) & {10, 11}


def test_no_victim_is_taken_when_its_release_would_not_let_the_waiting_job_fit() -> None:
    conf = teams(a={"quotas": gpus(0)}, b={"quotas": gpus(4)})
    running = (
        holding(10, "a", ["n1"], 2),
        holding(11, "a", ["n2"], 2),
        # A job in no queue holds the rest of both nodes' CPUs: a's jobs free GPUs
        # but only their own 2 CPUs.
        holding(20, "other", ["n1"], 0, cpus=(CPUS - 2,), gres_alloc=((),)),
        holding(21, "other", ["n2"], 0, cpus=(CPUS - 2,), gres_alloc=((),)),
    )
    needs_cpus = asking(1, "b", 2, ntasks_per_node=0, num_tasks=3, cpus_per_task=1)
    plan = Scene(conf, running, (needs_cpus,), nodes=2).plan()
    assert plan.preempted == {}  # quota would give b a's GPUs; no node would take job 1
    fits = asking(1, "b", 2)
    plan = Scene(conf, running, (fits,), nodes=2).plan()
    assert plan.preempted == {11: 1}  # 2 GPUs and 2 CPUs: a's newest job is enough


def test_a_gang_victim_is_taken_whole() -> None:
    conf = teams(a={"quotas": gpus(0)}, b={"quotas": gpus(4)})
    gang = holding(10, "a", ["n1", "n2"], 2)
    scene = Scene(conf, (gang, holding(11, "b", ["n3"], 2)), (asking(1, "b", 2),), nodes=3)
    snap = scene.snapshot()
    plan = schedule(snap, NOW)
    assert plan.preempted == {10: 1}  # both nodes' GPUs go, though job 1 needs one node's
    assert f"{GPU} 4 held" in plan.why[10]


def test_a_gang_half_of_which_is_within_its_guarantee_is_not_split_but_left() -> None:
    conf = teams(a={"quotas": gpus(2)}, b={"quotas": gpus(4)})
    gang = holding(10, "a", ["n1", "n2"], 2)  # 2 of its 4 GPUs are a's guarantee
    scene = Scene(conf, (gang, holding(11, "b", ["n3"], 2)), (asking(1, "b", 2),), nodes=3)
    plan = scene.plan()
    assert plan.preempted == {}
    assert plan.reasons[1] is Reason.QUEUE_COHORT_FULL


def test_reclaim_counts_what_the_pass_started_in_the_waiting_jobs_queue() -> None:
    conf = teams(a={"quotas": gpus(8)}, b={"quotas": gpus(0)})
    gang = holding(20, "b", ["n2", "n3"], 4, start_time=NOW - 100)
    # Job 1 starts on n1 in this pass: a holds 4, and job 2's 8 more would borrow 4,
    # which a's BorrowWithinCohort=Never does not take by preempting. Counting a as
    # holding nothing, reclaim once took b's gang for it as if within a's guarantee.
    same_pass = Scene(
        conf, (gang,), (asking(1, "a", 4), asking(2, "a", 4, nodes=2)), nodes=3, gpus=4
    ).plan()
    assert [s.job_id for s in same_pass.starts] == [1]
    assert same_pass.preempted == {}
    already = Scene(
        conf, (gang, holding(1, "a", ["n1"], 4)), (asking(2, "a", 4, nodes=2),), nodes=3, gpus=4
    ).plan()
    assert already.preempted == same_pass.preempted
    # Within its guarantee, the same job 2 does take the gang back.
    within = Scene(conf, (gang,), (asking(2, "a", 4, nodes=2),), nodes=3, gpus=4).plan()
    assert within.preempted == {20: 2}


# ---------------------------------------------------------------- victims that are suspended


def cpus_only(job_id: int, account: str, cpus: int) -> Job:
    """A pending job of ``account`` asking ``cpus`` CPUs and no GPU."""
    return job(job_id, account=account, num_tasks=cpus, time_limit=60)


def test_a_cpu_reclaim_suspends_a_victim_whose_preempt_mode_is_suspend() -> None:
    """Queues govern CPUs; a borrows b's 8 with a job that also holds 2 GPUs. b's job
    needs CPUs alone: the borrower is suspended (its GPUs kept), not requeued."""
    conf = teams(a={"quotas": {CPU: ResourceQuota(8)}}, b={"quotas": {CPU: ResourceQuota(8)}})
    running = (
        holding(10, "a", ["n1"], 0, cpus=(CPUS,), gres_alloc=((),), start_time=NOW - 300),
        holding(11, "a", ["n2"], 2, cpus=(CPUS,), start_time=NOW - 100),
    )
    waiting = (cpus_only(1, "b", 4),)
    plan = Scene(conf, running, waiting, nodes=2, suspend=frozenset({10, 11})).plan()
    assert dict(plan.preempted) == {11: 1}
    assert plan.suspended == {11} and plan.requeued == set()
    assert "reclaimed for job 1 of queue b" in plan.why[11]
    # The same jobs under PreemptMode=REQUEUE are requeued, as before.
    ended = Scene(conf, running, waiting, nodes=2).plan()
    assert dict(ended.preempted) == {11: 1} and ended.requeued == {11} and not ended.suspended
    # A job that needs its GPUs too (the queues do not govern them: placement sees it)
    # finds nothing in a suspension, which would keep them: it takes no victim.
    with_gpus = (asking(1, "b", 2, ntasks_per_node=4, num_tasks=4),)
    assert (
        dict(Scene(conf, running, with_gpus, nodes=2, suspend=frozenset({10, 11})).plan().preempted)
        == {}
    )
    assert dict(Scene(conf, running, with_gpus, nodes=2).plan().preempted) == {11: 1}


def test_a_gpu_reclaim_passes_over_a_victim_whose_preempt_mode_is_suspend() -> None:
    """A suspension keeps the victim's GPUs: b's GPU job takes a's borrowed job that ends
    rather than the newer one that would be suspended, and none when all would be."""
    conf = teams(a={"quotas": gpus(4)}, b={"quotas": gpus(4)})
    running = (
        holding(10, "a", ["n1"], 2, start_time=NOW - 300),
        holding(11, "a", ["n2"], 2, start_time=NOW - 200),
        holding(12, "a", ["n3"], 2, start_time=NOW - 100),  # the newest: first, if it ended
        holding(13, "b", ["n4"], 2),
    )
    waiting = (asking(1, "b", 2),)
    plan = Scene(conf, running, waiting, suspend=frozenset({12})).plan()
    assert dict(plan.preempted) == {11: 1} and plan.requeued == {11}
    assert not plan.suspended
    plan = Scene(conf, running, waiting, suspend=frozenset({10, 11, 12})).plan()
    assert dict(plan.preempted) == {} and not plan.suspended


# ---------------------------------------------------------------- admission in the pass


def test_a_job_of_a_queue_that_cannot_be_preempted_waits_within_its_guarantee() -> None:
    conf = teams(a={"quotas": gpus(2), "preemptible": False}, b={"quotas": gpus(6)})
    scene = Scene(
        conf,
        running=(holding(10, "a", ["n1"], 2),),
        pending=(asking(1, "a", 2), asking(2, "b", 2)),
    )
    plan = scene.plan()
    assert plan.reasons[1] is Reason.QUEUE_GUARANTEE  # GPUs are free, but a would borrow
    assert [s.job_id for s in plan.starts] == [2]  # and it blocks nobody behind it
    assert plan.preempted == {}


def test_a_queue_at_its_limit_waits_with_queue_limit_and_blocks_nobody() -> None:
    conf = teams(a={"quotas": gpus(0, limit=4)}, b={"quotas": gpus(0)})
    scene = Scene(
        conf,
        running=(holding(10, "a", ["n1"], 2),),
        pending=(asking(1, "a", 2), asking(2, "a", 2), asking(3, "b", 2)),
    )
    plan = scene.plan(backfill=True)
    assert [s.job_id for s in plan.starts] == [1, 3]
    assert plan.reasons[2] is Reason.QUEUE_LIMIT


def test_a_parents_limit_holds_its_children_together() -> None:
    conf = tree(
        team("org", gpus(0, limit=4)),
        team("a", parent="org", accounts=("a",)),
        team("b", parent="org", accounts=("b",)),
    )
    scene = Scene(conf, (), (asking(1, "a", 2), asking(2, "b", 2), asking(3, "a", 2)))
    plan = scene.plan()
    assert [s.job_id for s in plan.starts] == [1, 2]
    assert plan.reasons[3] is Reason.QUEUE_LIMIT


def test_jobs_within_their_guarantee_start_before_older_borrowers() -> None:
    conf = teams(a={"quotas": gpus(2)}, b={"quotas": gpus(2)})
    scene = Scene(
        conf,
        running=(holding(10, "a", ["n1"], 2),),
        pending=(asking(1, "a", 2), asking(2, "b", 2)),  # a's is older, but would borrow
        nodes=2,
    )
    plan = scene.plan()
    assert [s.job_id for s in plan.starts] == [2]
    assert plan.reasons[1] is Reason.QUEUE_COHORT_FULL  # b's job took what was unused
    assert plan.preempted == {}  # a is at its guarantee: nothing to take back for it


# ---------------------------------------------------------------- times


def test_a_waiting_job_evicts_nobody_before_its_queues_preemption_delay() -> None:
    conf = teams(a={"quotas": gpus(0)}, b={"quotas": gpus(4), "preemption_delay": 600})
    scene = Scene(
        conf,
        running=tuple(holding(10 + i, "a", [f"n{i}"], 2) for i in range(1, 5)),
        pending=(asking(1, "b", 2, eligible_time=NOW - 100),),
    )
    assert scene.plan(NOW).preempted == {}
    assert scene.plan(NOW + 499).preempted == {}
    assert scene.plan(NOW + 500).preempted == {14: 1}


def test_a_job_that_has_not_run_its_queues_reclaim_min_runtime_is_no_victim() -> None:
    conf = teams(a={"quotas": gpus(0), "reclaim_min_runtime": 3600}, b={"quotas": gpus(4)})
    scene = Scene(
        conf,
        running=(
            holding(11, "a", ["n1"], 2, start_time=NOW - 4_000),
            holding(12, "a", ["n2"], 2, start_time=NOW - 60),  # newest: first, once old enough
        ),
        pending=(asking(1, "b", 2),),
        nodes=2,
    )
    assert scene.plan(NOW).preempted == {11: 1}  # the only one old enough
    assert scene.plan(NOW + 3_540).preempted == {12: 1}


# ---------------------------------------------------------------- jobs in no queue


def test_a_job_in_no_queue_is_scheduled_as_without_queues() -> None:
    conf = teams(a={"quotas": gpus(0, limit=2)})
    running = (holding(10, "a", ["n1"], 2),)
    pending = (
        asking(1, "a", 2),  # a is at its limit
        asking(2, "nobody", 2),
        asking(3, "nobody", 2, nodes=2),
        asking(4, "nobody", 2, nodes=2),
    )
    with_queues = Scene(conf, running, pending).plan(backfill=True)
    plain = Scene(None, running, pending[1:]).plan(backfill=True)
    assert with_queues.reasons[1] is Reason.QUEUE_LIMIT
    assert with_queues.starts == plain.starts
    assert {k: v for k, v in with_queues.reasons.items() if k != 1} == dict(plain.reasons)
    assert with_queues.preempted == {}


# ---------------------------------------------------------------- property


@st.composite
def scenes(draw: st.DrawFn) -> Scene:
    """A random small cluster, two or three teams (one perhaps under a parent with a
    Limit) with guarantees and limits, the teams' jobs running within what nodes
    hold (often all of it, the first and last team more than the others, so that
    some teams borrow and others reclaim), some of them suspended if preempted, and
    pending jobs of any team or none."""
    nodes = draw(st.integers(1, 4))
    per_node = draw(st.integers(1, 4))
    capacity = nodes * per_node
    names = ["a", "b", "c"][: draw(st.integers(2, 3))]
    specs = []
    nested = draw(st.booleans())
    if nested:
        specs.append(team("org", gpus(0, limit=draw(st.integers(1, capacity)))))
    guaranteed = 0
    for name in names:
        guarantee = draw(st.integers(0, max(capacity - guaranteed, 0)))
        guaranteed += guarantee
        limit = draw(st.one_of(st.none(), st.integers(guarantee, capacity)))
        specs.append(
            team(
                name,
                gpus(guarantee, limit),
                accounts=(name,),
                parent="org" if nested and name == "a" else "root",
                preemptible=draw(st.sampled_from([True, True, False])),
            )
        )
    if nested:  # org guarantees what a does, within its limit
        org = specs[0]
        a_guarantee = specs[1].quotas[GPU].guarantee
        specs[0] = replace(
            org, quotas=gpus(a_guarantee, max(org.quotas[GPU].limit or 0, a_guarantee))
        )
    running: list[Job] = []
    for i in range(1, nodes + 1):  # each node's GPUs in up to two jobs
        free = per_node
        for _ in range(2):
            take = draw(st.integers(0, free))
            if take:
                free -= take
                account = draw(st.sampled_from([*names, names[0], names[-1]]))
                started = NOW - draw(st.integers(0, 9))
                running.append(
                    holding(100 + len(running), account, [f"n{i}"], take, start_time=started)
                )
    pending = [
        asking(
            job_id,
            draw(st.sampled_from([*names, "nobody"])),
            draw(st.integers(1, per_node)),
            nodes=draw(st.one_of(st.just(1), st.integers(1, nodes))),
        )
        for job_id in range(1, draw(st.integers(1, 8)) + 1)
    ]
    # Some running jobs are suspended by preemption (PreemptMode=SUSPEND): they would
    # keep their GPUs, so no GPU-waiting job may take them.
    suspend = frozenset(r.job_id for r in running if draw(st.integers(0, 3)) == 0)
    return Scene(
        tree(*specs), tuple(running), tuple(pending), nodes=nodes, gpus=per_node, suspend=suspend
    )


def limits_of(conf: QueueConf) -> dict[str, int]:
    return {
        name: quota.limit
        for name, spec in conf.queues.items()
        if (quota := spec.quotas.get(GPU)) is not None and quota.limit is not None
    }


@settings(max_examples=150, deadline=None)
@given(scene=scenes(), backfill=st.booleans())
def test_starts_never_pass_a_queues_limit_nor_the_free_gpus(scene: Scene, backfill: bool) -> None:
    snap = scene.snapshot()
    plan = schedule(snap, NOW, BackfillParams(max_job_test=100) if backfill else None)
    assert scene.conf is not None and snap.queues is not None
    # Capacity: on each node, the GPUs started fit in what was free.
    free = {name: sum(c for _, _, c in view.gres) for name, view in snap.nodes.items()}
    for start in plan.starts:
        for name, items in zip(start.nodes, start.gres, strict=True):
            free[name] -= sum(c for _, _, c in items)
    assert all(left >= 0 for left in free.values()), free
    # Limits: what each queue's subtree held plus what started in it.
    parents = {name: spec.parent for name, spec in scene.conf.queues.items()}
    held: dict[str, int] = {}
    for leaf, amounts in snap.queues.allocated.items():
        q: str | None = leaf
        while q is not None:
            held[q] = held.get(q, 0) + amounts.get(GPU, 0)
            q = parents[q]
    after = dict(held)
    for start in plan.starts:
        entry = snap.queues.entries.get(start.job_id)
        q = entry.queue if entry is not None else None
        while q is not None:
            after[q] = after.get(q, 0) + sum(c for items in start.gres for _, _, c in items)
            q = parents[q]
    for name, limit in limits_of(scene.conf).items():
        assert after.get(name, 0) <= max(limit, held.get(name, 0)), (name, limit, plan.starts)
        if held.get(name, 0) >= limit:
            assert after.get(name, 0) == held.get(name, 0)
    # Reclaim: victims are jobs of preemptible queues, and leave every queue they come
    # from with at least its guarantee (counting what the pass started in it).
    # A job a preemption would suspend keeps its GPUs: no GPU-waiting job takes it.
    assert not set(plan.preempted) & scene.suspend and not plan.suspended
    records = {r.job_id: r for r in snap.queues.running}
    left = dict(after)
    for victim in plan.preempted:
        record = records[victim]
        assert record.preemptible
        q = record.queue
        while q is not None:
            left[q] -= record.resources.get(GPU, 0)
            q = parents[q]
    for name, spec in scene.conf.queues.items():
        guarantee = spec.quotas[GPU].guarantee if GPU in spec.quotas else 0
        assert left.get(name, 0) >= min(guarantee, after.get(name, 0)), (name, plan.why)


def test_gpus_held_by_a_job_in_no_queue_are_used_not_free_to_the_queues() -> None:
    """Two nodes of one GPU: c (guarantee 0) borrows n1, a job in no queue holds n2.
    a's job is within a's guarantee but the cluster has no GPU left: its queue says
    the cohort is full, and reclaim takes c's borrowed GPU back (never the job in no
    queue). Before, a's job was admitted on GPUs the job in no queue held, waited for
    Resources, and nothing was reclaimed."""
    conf = teams(a={"quotas": gpus(2)}, c={"quotas": gpus(0)})
    scene = Scene(
        conf,
        running=(holding(10, "c", ["n1"], 1), holding(11, "other", ["n2"], 1)),
        pending=(asking(1, "a", 1),),
        nodes=2,
        gpus=1,
    )
    plan = scene.plan()
    assert plan.reasons[1] is Reason.QUEUE_COHORT_FULL
    assert plan.preempted == {10: 1}
