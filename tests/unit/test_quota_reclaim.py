"""Reclaim between queues and preemption within one (controller/core/quotareclaim.py)."""

from __future__ import annotations

from dataclasses import replace

from controller.core.quota import (
    GUARANTEE_DESERVED_QUOTA,
    MAINTAIN_FAIR_SHARE,
    Eviction,
    RunningJob,
    WaitingJob,
    divide,
    preempt_within,
    reclaim,
)
from corral.queueconf import QueueConf, QueueSpec, ResourceQuota
from tests.unit.quotascenario import (
    CPU,
    GPU,
    NOW,
    asked,
    departments,
    gpus,
    held,
    running,
    team,
    tree,
    waiting,
)

TWO_TEAMS = tree(team("a", gpus(4)), team("b", gpus(4)))
#: Team a runs 8 one-GPU jobs on the 8 GPUs (job i started at 10*i), half of them on b's quota.
A_ON_ALL = [running(i, "a", started=10 * i) for i in range(1, 9)]


def _reclaim(
    conf: QueueConf,
    run: list[RunningJob],
    wait: list[WaitingJob],
    capacity: int = 8,
) -> list[Eviction]:
    shares = divide(conf, {GPU: capacity}, asked(run, wait), {})
    return reclaim(conf, shares, held(run), wait, run, NOW)


def _victims(evictions: list[Eviction]) -> list[int]:
    return [e.victim for e in evictions]


def test_team_b_takes_back_its_gpus_from_the_most_recent_of_team_as_borrowed_jobs() -> None:
    got = _reclaim(TWO_TEAMS, A_ON_ALL, [waiting(100, "b", 2)])
    assert _victims(got) == [8, 7]
    assert {(e.for_job, e.for_queue, e.victim_queue, e.strategy) for e in got} == {
        (100, "b", "a", MAINTAIN_FAIR_SHARE)
    }
    assert got[0].freed == {GPU: 1}
    assert got[0].why == (
        "job 8 of queue a (gres/gpu 8 held, fair share 6, guarantee 4) reclaimed for job 100 "
        "of queue b (gres/gpu 0 held +2 asked, fair share 2) by MaintainFairShare"
    )


def test_reclaim_goes_down_to_the_lenders_guarantee_and_no_further() -> None:
    assert _victims(_reclaim(TWO_TEAMS, A_ON_ALL, [waiting(100, "b", 4)])) == [8, 7, 6, 5]
    assert _reclaim(TWO_TEAMS, A_ON_ALL, [waiting(100, "b", 5)]) == []


def test_each_waiting_job_counts_as_started_for_the_next() -> None:
    got = _reclaim(TWO_TEAMS, A_ON_ALL, [waiting(100, "b", 2), waiting(101, "b", 2)])
    assert [(e.victim, e.for_job) for e in got] == [(8, 100), (7, 100), (6, 101), (5, 101)]


def test_in_quota_jobs_are_never_reclaimed() -> None:
    both = [running(i, "a") for i in range(1, 5)] + [running(i, "b") for i in range(5, 9)]
    # b would go above its guarantee: a's jobs are all within a's.
    assert _reclaim(TWO_TEAMS, both, [waiting(100, "b", 1)]) == []
    a_over = [running(i, "a") for i in range(1, 6)] + [running(i, "b") for i in range(6, 9)]
    assert _reclaim(TWO_TEAMS, a_over, [waiting(100, "b", 2)]) == []
    assert _victims(_reclaim(TWO_TEAMS, a_over, [waiting(100, "b", 1)])) == [5]


def test_nothing_is_evicted_for_a_job_that_fits_already() -> None:
    four = [running(i, "a") for i in range(1, 5)]
    assert _reclaim(TWO_TEAMS, four, [waiting(100, "b", 2)]) == []


def test_jobs_that_cannot_be_preempted_are_never_victims() -> None:
    pinned = [replace(j, preemptible=False) if j.job_id <= 6 else j for j in A_ON_ALL]
    assert _reclaim(TWO_TEAMS, pinned, [waiting(100, "b", 4)]) == []
    assert _victims(_reclaim(TWO_TEAMS, pinned, [waiting(100, "b", 2)])) == [8, 7]


def test_a_job_that_cannot_be_preempted_reclaims_within_its_guarantee() -> None:
    got = _reclaim(TWO_TEAMS, A_ON_ALL, [waiting(100, "b", 2, preemptible=False)])
    assert _victims(got) == [8, 7]


def test_the_victim_that_loses_the_least_work_goes_first() -> None:
    """A job that asked to be told (--signal) first, then the least run since its last
    checkpoint (or start), then the lowest priority: job 3 asked, job 2 checkpointed
    after job 8 started; of 5 and 6, started together, the lower priority goes."""
    told = {3: {"told": True}, 2: {"checkpointed": A_ON_ALL[7].start_time + 1}}
    run = [replace(j, **told.get(j.job_id, {})) for j in A_ON_ALL]  # type: ignore[arg-type]
    assert _victims(_reclaim(TWO_TEAMS, run, [waiting(100, "b", 2)])) == [3, 2]
    same = [replace(j, start_time=A_ON_ALL[7].start_time + 5) for j in A_ON_ALL[4:6]]
    run = [*A_ON_ALL[:4], replace(same[0], priority=3), same[1], *A_ON_ALL[6:]]
    assert _victims(_reclaim(TWO_TEAMS, run, [waiting(100, "b", 2)])) == [6, 5]


def test_the_queue_most_over_its_share_gives_first() -> None:
    conf = tree(team("a", gpus(2), over_quota_weight=2), team("b", gpus(4)), team("c", gpus(2)))
    run = [running(i, "a", started=i) for i in range(1, 7)]
    run += [running(i, "c", started=i) for i in range(11, 17)]
    # Fair shares: a 6, b 2, c 4: c is the one over.
    got = _reclaim(conf, run, [waiting(100, "b", 2)], capacity=12)
    assert _victims(got) == [16, 15]


def test_reclaim_min_runtime_protects_young_jobs_and_is_inherited() -> None:
    run = [replace(j, start_time=NOW - 100) if j.job_id in (7, 8) else j for j in A_ON_ALL]
    root = QueueSpec(name="root", parent=None, quotas={}, reclaim_min_runtime=600)
    conf = tree(team("a", gpus(4)), team("b", gpus(4)), root=root)
    assert _victims(_reclaim(conf, run, [waiting(100, "b", 2)])) == [6, 5]
    assert _victims(_reclaim(TWO_TEAMS, run, [waiting(100, "b", 2)])) == [8, 7]
    own = tree(team("a", gpus(4), reclaim_min_runtime=0), team("b", gpus(4)), root=root)
    assert _victims(_reclaim(own, run, [waiting(100, "b", 2)])) == [8, 7]


def test_a_waiting_job_evicts_nobody_before_its_queues_preemption_delay() -> None:
    conf = tree(team("a", gpus(4)), team("b", gpus(4), preemption_delay=300))
    assert _reclaim(conf, A_ON_ALL, [waiting(100, "b", 2, waited=100)]) == []
    assert _victims(_reclaim(conf, A_ON_ALL, [waiting(100, "b", 2, waited=400)])) == [8, 7]


def test_reclaim_within_cohort_policy() -> None:
    never = tree(team("a", gpus(4)), team("b", gpus(4), reclaim_within_cohort="Never"))
    assert _reclaim(never, A_ON_ALL, [waiting(100, "b", 2)]) == []
    lower = tree(team("a", gpus(4)), team("b", gpus(4), reclaim_within_cohort="LowerPriority"))
    run = [replace(j, priority=10 if j.job_id <= 7 else 1) for j in A_ON_ALL]
    assert _reclaim(lower, run, [waiting(100, "b", 2, priority=5)]) == []
    run = [replace(j, priority=10 if j.job_id <= 6 else 1) for j in A_ON_ALL]
    assert _victims(_reclaim(lower, run, [waiting(100, "b", 2, priority=5)])) == [8, 7]


def test_reclaiming_beyond_the_guarantee_needs_borrow_within_cohort() -> None:
    # 12 GPUs: fair shares 6 and 6; b's job of 6 would borrow 2 beyond its guarantee of 4.
    run = [running(i, "a", started=i) for i in range(1, 13)]
    ask = [waiting(100, "b", 6, priority=10)]
    assert _reclaim(TWO_TEAMS, run, ask, capacity=12) == []
    borrow = tree(team("a", gpus(4)), team("b", gpus(4), borrow_within_cohort="LowerPriority"))
    got = _reclaim(borrow, run, ask, capacity=12)
    assert _victims(got) == [12, 11, 10, 9, 8, 7]
    assert {e.strategy for e in got} == {MAINTAIN_FAIR_SHARE}
    capped = tree(
        team("a", gpus(4)),
        team("b", gpus(4), borrow_within_cohort="LowerPriority", borrow_priority_threshold=-1),
    )
    assert _reclaim(capped, run, ask, capacity=12) == []


def test_guarantee_deserved_quota_when_fair_share_reclaim_finds_no_victim() -> None:
    conf = tree(team("a", gpus(2)), team("b", gpus(3)), team("c", gpus(0)))
    run = [running(i, "a", started=i) for i in range(1, 4)]
    run += [running(i, "b") for i in range(4, 6)]
    run += [running(i, "c", preemptible=False) for i in range(6, 9)]
    # Fair shares a 3, b 3, c 2: c is over its share but cannot be preempted; a is at
    # its fair share (MaintainFairShare spares it) but above its guarantee of 2.
    got = _reclaim(conf, run, [waiting(100, "b", 1)])
    assert [(e.victim, e.strategy) for e in got] == [(3, GUARANTEE_DESERVED_QUOTA)]


DEPARTMENTS = departments(d1=gpus(4), t1=gpus(0), t2=gpus(4), d2=gpus(4), t3=gpus(4))


def test_reclaim_takes_from_the_borrowing_sibling_not_from_another_departments_quota() -> None:
    run = [running(i, "t1", started=i) for i in range(1, 5)]
    run += [running(i, "t3", started=10 + i) for i in range(5, 9)]
    got = _reclaim(DEPARTMENTS, run, [waiting(100, "t2", 2)])
    assert _victims(got) == [4, 3]
    assert {e.victim_queue for e in got} == {"t1"}


def test_jobs_of_queues_that_take_none_reclaim_nothing() -> None:
    run = [running(i, "t1", started=i) for i in range(1, 9)]
    assert _reclaim(DEPARTMENTS, run, [waiting(100, "d2", 2), waiting(101, "nowhere", 2)]) == []
    assert _victims(_reclaim(DEPARTMENTS, run, [waiting(100, "t3", 2)])) == [8, 7]


def test_a_department_within_its_guarantee_is_protected_as_a_whole() -> None:
    # t1 is over its own guarantee (0), but d1 is within its 4: d2's t3 may not take it.
    conf = departments(d1=gpus(4), t1=gpus(0), d2=gpus(4), t3=gpus(4))
    run = [running(i, "t1") for i in range(1, 5)] + [running(i, "t3") for i in range(5, 8)]
    assert _reclaim(conf, run, [waiting(100, "t3", 1)], capacity=7) == []


WITHIN = tree(team("a", gpus(8), within_queue="LowerPriority"))


def test_preempt_within_a_queue_takes_lower_priority_most_recent_first() -> None:
    run = [
        running(1, "a", priority=1, started=100),
        running(2, "a", priority=1, started=200),
        running(3, "a", priority=5, started=300),
        running(4, "b", priority=0, started=400),
    ]
    got = preempt_within(WITHIN, "a", [waiting(100, "a", 2, priority=10)], run, NOW)
    assert [(e.victim, e.for_job, e.strategy) for e in got] == [
        (2, 100, "LowerPriority"),
        (1, 100, "LowerPriority"),
    ]
    assert got[0].why == (
        "job 2 (priority 1) preempted in queue a for job 100 (priority 10) by LowerPriority"
    )
    assert preempt_within(WITHIN, "a", [waiting(100, "a", 2, priority=1)], run, NOW) == []


def test_preempt_within_needs_the_queues_policy() -> None:
    run = [running(1, "a", priority=1)]
    never = tree(team("a", gpus(8)))
    assert preempt_within(never, "a", [waiting(100, "a", 1, priority=10)], run, NOW) == []


def test_lower_or_newer_equal_priority_takes_equal_jobs_submitted_later() -> None:
    conf = tree(team("a", gpus(8), within_queue="LowerOrNewerEqualPriority"))
    run = [
        running(1, "a", priority=1, started=300, submit_time=NOW - 2_000),
        running(2, "a", priority=1, started=100, submit_time=NOW - 500),
    ]
    ask = [waiting(100, "a", 1, priority=1, waited=1_000)]
    assert [e.victim for e in preempt_within(conf, "a", ask, run, NOW)] == [2]
    assert preempt_within(WITHIN, "a", ask, run, NOW) == []


def test_preempt_min_runtime_and_the_fewest_victims() -> None:
    conf = tree(team("a", gpus(8), within_queue="LowerPriority", preempt_min_runtime=600))
    run = [
        running(1, "a", 1, priority=1, started=9_950),  # ran 50 s: protected
        running(2, "a", 1, priority=1, started=200),
        running(3, "a", 2, priority=2, started=100),
    ]
    ask = [waiting(100, "a", 2, priority=10)]
    # Job 2 then job 3 cover the 2 GPUs; job 3 alone does, so job 2 is spared.
    assert [e.victim for e in preempt_within(conf, "a", ask, run, NOW)] == [3]
    assert preempt_within(conf, "a", [waiting(100, "a", 4, priority=10)], run, NOW) == []


# ---------------------------------------------------------------- victims that are suspended

CPU_TEAMS = tree(
    team("a", {CPU: ResourceQuota(4)}),
    team("b", {CPU: ResourceQuota(4)}),
)


def _cpu_reclaim(run: list[RunningJob], wait: list[WaitingJob]) -> list[Eviction]:
    shares = divide(CPU_TEAMS, {CPU: 8}, asked(run, wait), {})
    return reclaim(CPU_TEAMS, shares, held(run), wait, run, NOW)


def test_a_suspended_victim_gives_back_its_cpus_alone() -> None:
    """Team a borrows b's 4 CPUs with a job that PreemptMode=SUSPEND suspends: it is
    taken for b's CPUs, and frees them alone (its GPU stays counted in a)."""
    borrower = running(2, "a", 1, started=20, resources={CPU: 4}, suspends=True)
    run = [running(1, "a", 0, started=10, resources={CPU: 4}), borrower]
    got = _cpu_reclaim(run, [waiting(100, "b", 0, resources={CPU: 4})])
    assert [(e.victim, e.freed) for e in got] == [(2, {CPU: 4})]
    assert borrower.freed == {CPU: 4} and replace(borrower, suspends=False).freed == {
        GPU: 1,
        CPU: 4,
    }


def test_a_suspended_victim_is_no_victim_for_gpus() -> None:
    """b waits for a GPU a borrows: a suspension would keep it, so the job that would be
    suspended is passed over for one that ends, and with none, nobody is taken."""
    keeps = running(8, "a", started=80, suspends=True)
    got = _reclaim(TWO_TEAMS, [*A_ON_ALL[:-1], keeps], [waiting(100, "b", 1)])
    assert _victims(got) == [7]
    everyone = [replace(j, suspends=True) for j in A_ON_ALL]
    assert _reclaim(TWO_TEAMS, everyone, [waiting(100, "b", 1)]) == []


def test_within_a_queue_suspensions_cover_the_cpus_of_a_job_nothing_else_can() -> None:
    """A job asking CPUs and a node: its queue's jobs that would be suspended give back
    their CPUs alone, never a node, so they cover its CPUs only when no victims that
    end cover all of it (the rest must be free beside them: placement checks)."""
    conf = tree(team("a", {CPU: ResourceQuota(8)}, within_queue="LowerPriority"))
    ask = [waiting(100, "a", 0, priority=10, resources={CPU: 4, "node": 1})]

    def low(job_id: int, started: int, suspends: bool) -> RunningJob:
        return running(
            job_id, "a", 0, priority=1, started=started, resources={CPU: 4, "node": 1},
            suspends=suspends,
        )  # fmt: skip

    got = preempt_within(conf, "a", ask, [low(1, 100, True), low(2, 50, True)], NOW)
    assert [(e.victim, e.freed) for e in got] == [(1, {CPU: 4})]
    got = preempt_within(conf, "a", ask, [low(1, 100, True), low(2, 50, False)], NOW)
    assert [(e.victim, e.freed) for e in got] == [(2, {CPU: 4, "node": 1})]
