"""Pending jobs the scheduler ends, and arrays whose tasks wait each for its own counterpart."""

from __future__ import annotations

from controller.core import BackfillParams, schedule
from controller.jobstate import Reason
from tests.unit.scenario import NOW, cluster, facts, job, node, partition

ONE = cluster([node("n1", cpus=4)], [partition("batch", "n1")])


def test_a_job_that_cannot_end_before_its_deadline_is_ended() -> None:
    late = job(1, time_limit=30, deadline=NOW + 600)  # 30 minutes from now: past 10
    fits = job(2, time_limit=5, deadline=NOW + 600)
    plan = schedule(ONE.snapshot([late, fits]), NOW)
    assert plan.ended == {1: Reason.DEADLINE}
    assert [s.job_id for s in plan.starts] == [2]


def test_time_min_counts_for_the_deadline() -> None:
    plan = schedule(ONE.snapshot([job(1, time_limit=30, time_min=5, deadline=NOW + 600)]), NOW)
    assert plan.ended == {}


def test_kill_on_invalid_dep_ends_a_job_whose_dependency_never_holds() -> None:
    failed = {9: facts("FAILED", exit_status=1 << 8)}
    kill = job(1, dependency="afterok:9", kill_on_invalid_dep=True)
    keep = job(2, dependency="afterok:9")
    plan = schedule(ONE.snapshot([kill, keep], jobs=failed), NOW)
    assert plan.ended == {1: Reason.DEPENDENCY_NEVER_SATISFIED}
    assert plan.reasons[2] is Reason.DEPENDENCY_NEVER_SATISFIED


def test_aftercorr_starts_each_task_when_its_counterpart_succeeded() -> None:
    other = {
        11: facts("COMPLETED", array_job_id=10, array_task_id=1),
        12: facts("RUNNING", array_job_id=10, array_task_id=2),
        10: facts("COMPLETED", array_job_id=10, array_task_id=3),
    }
    tasks = job(20, array_job_id=20, array_pending="1-3", dependency="aftercorr:10")
    for backfill in (None, BackfillParams()):
        plan = schedule(ONE.snapshot([tasks], jobs=other), NOW, backfill)
        assert [(s.job_id, s.task) for s in plan.starts] == [(20, 1), (20, 3)]


def test_aftercorr_waits_while_no_counterpart_is_done() -> None:
    other = {10: facts("RUNNING", array_job_id=10, array_task_id=1)}
    tasks = job(20, array_job_id=20, array_pending="1", dependency="aftercorr:10")
    plan = schedule(ONE.snapshot([tasks], jobs=other), NOW)
    assert plan.reasons[20] is Reason.DEPENDENCY
