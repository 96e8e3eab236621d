"""Heterogeneous jobs in the pure core: every component starts in the same pass or
none does; a group that cannot start holds back the jobs behind it as a job waiting
for resources does; backfill starts no component alone; the store's re-check drops
a group whole; the component records and the batch script's HET_GROUP variables."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scenario import NOW, cluster, job, node, partition

from controller import hetjobs
from controller.admission import Admitted
from controller.core import BackfillParams, schedule
from controller.core.hetgroup import groups, size
from controller.core.plan import Start
from controller.core.snapshot import Running
from controller.jobstate import JobState, Reason
from controller.model import Job, Payload

TWO = cluster(nodes=[node("n1"), node("n2")], partitions=[partition("batch", "n[1-2]")])


def component(job_id: int, leader: int, count: int = 2, **fields: Any) -> Job:
    return job(
        job_id,
        het_job_id=leader,
        het_job_offset=job_id - leader,
        het_job_id_set=f"{leader}-{leader + count - 1}",
        interactive=job_id != leader,
        **fields,
    )


def test_components_that_fit_start_together_on_what_the_others_left() -> None:
    pending = [component(10, 10, num_tasks=4), component(11, 10, num_tasks=4)]
    plan = schedule(TWO.snapshot(pending), NOW)
    assert sorted((s.job_id, s.nodes) for s in plan.starts) == [(10, ("n1",)), (11, ("n2",))]


def test_no_component_starts_unless_all_can() -> None:
    pending = [component(10, 10, num_tasks=4), component(11, 10, num_tasks=8)]
    plan = schedule(TWO.snapshot(pending), NOW)
    assert plan.starts == ()
    assert plan.reasons[10] is plan.reasons[11] is Reason.RESOURCES


def test_a_waiting_group_blocks_the_jobs_behind_it_and_backfill_starts_no_part() -> None:
    pending = [
        component(10, 10, num_tasks=4, time_limit=10),
        component(11, 10, num_tasks=8, time_limit=10),
        job(12, num_tasks=1, time_limit=10, submit_time=NOW),  # behind it in the queue
    ]
    plan = schedule(TWO.snapshot(pending), NOW)
    assert plan.starts == ()
    assert plan.reasons[12] is Reason.PRIORITY
    backfilled = schedule(TWO.snapshot(pending), NOW, BackfillParams())
    assert {s.job_id for s in backfilled.starts} <= {12}


def test_backfill_plans_a_waiting_group_and_lets_no_job_take_its_place() -> None:
    # n1 is busy for 10 minutes, n2 free: the group needs both; job 12 fits n2 now.
    busy = cluster([node("n1", used_cpus=4), node("n2")], [partition("batch", "n[1-2]")])
    pending = [
        component(10, 10, num_tasks=4, time_limit=10),
        component(11, 10, num_tasks=4, time_limit=10),
        job(12, num_tasks=4, time_limit=60, submit_time=NOW),
    ]
    holder = Running(99, ("n1",), (4,), (0,), NOW + 600)
    plan = schedule(busy.snapshot(pending, running=[holder]), NOW, BackfillParams())
    assert plan.starts == ()  # job 12 would delay the group: it may not backfill
    assert plan.expected[11].start_time >= NOW + 600  # when n1 frees (to the resolution)
    assert plan.reasons[10] is plan.reasons[11] is Reason.RESOURCES


def test_a_group_past_the_queue_depth_is_still_tried_whole() -> None:
    pending = [component(10, 10, num_tasks=4), component(11, 10, num_tasks=4)]
    plan = schedule(TWO.snapshot(pending), NOW, depth=1)
    assert sorted(s.job_id for s in plan.starts) == [10, 11]


def test_the_group_asks_its_licenses_together() -> None:
    pending = [component(10, 10, licenses="fluent:2"), component(11, 10, licenses="fluent:2")]
    snap = replace(TWO.snapshot(pending), licenses={"fluent": 3})
    plan = schedule(snap, NOW)
    assert plan.starts == ()  # 2 + 2 of 3: each alone would fit, the group does not
    assert plan.reasons[10] is plan.reasons[11] is Reason.LICENSES
    enough = schedule(replace(snap, licenses={"fluent": 4}), NOW)
    assert sorted(s.job_id for s in enough.starts) == [10, 11]


def test_a_component_in_a_reservation_that_is_gone_holds_the_group() -> None:
    pending = [component(10, 10), component(11, 10, reservation="gone")]
    plan = schedule(TWO.snapshot(pending), NOW)
    assert plan.starts == ()
    assert plan.reasons[10] is Reason.RESERVATION_DELETED


def test_a_held_component_holds_the_whole_job() -> None:
    pending = [component(10, 10), component(11, 10, held="user")]
    plan = schedule(TWO.snapshot(pending), NOW)
    assert plan.starts == ()
    assert plan.reasons[10] is plan.reasons[11] is Reason.JOB_HELD_USER


def test_groups_and_size() -> None:
    jobs = [component(11, 10, 3), job(5), component(10, 10, 3)]
    assert {k: [j.job_id for j in v] for k, v in groups(jobs).items()} == {10: [10, 11]}
    assert size(jobs[0]) == 3


def test_the_store_recheck_drops_a_group_whole() -> None:
    jobs = {10: component(10, 10), 11: component(11, 10), 12: job(12)}
    starts = [Start(i, "batch", ("n1",), (1,), (0,)) for i in (10, 11, 12)]
    kept = hetjobs.whole(starts, jobs, lambda s: s.job_id != 11)
    assert [s.job_id for s in kept] == [12]
    assert hetjobs.whole(starts[:1], jobs, lambda s: True) == []  # a part of it alone
    assert hetjobs.whole(starts, jobs, lambda s: True) == starts


def test_components_are_marked_and_the_script_sees_each_group() -> None:
    first = hetjobs.component(Admitted(job(20), Payload("#!/bin/sh\n")), 20, 2).job
    second = hetjobs.component(Admitted(job(21), Payload("")), 20, 2).job
    assert (second.het_job_id, second.het_job_offset, second.het_job_id_set) == (20, 1, "20-21")
    assert not first.requeue and not second.requeue  # never requeued in part
    assert (first.display_id, second.display_id) == ("20+0", "20+1")
    assert list(hetjobs.ids(second)) == [20, 21]
    running = [
        Job(**{**_fields(first), "state": JobState.RUNNING, "partition": "batch",
               "nodes": ("n1",), "cpus": (2,), "alloc_mem": (0,)}),
        Job(**{**_fields(second), "state": JobState.RUNNING, "partition": "batch",
               "nodes": ("n2", "n3"), "cpus": (4, 4), "alloc_mem": (0, 0)}),
    ]  # fmt: skip
    env = hetjobs.environment(running, "c")
    assert env["SLURM_HET_SIZE"] == "2"
    assert env["SLURM_JOB_ID_HET_GROUP_0"] == "20"
    assert env["SLURM_JOB_ID_HET_GROUP_1"] == "21"
    assert env["SLURM_JOB_NODELIST_HET_GROUP_1"] == "n[2-3]"
    assert env["SLURM_JOB_NUM_NODES_HET_GROUP_1"] == "2"
    assert env["SLURM_JOB_CPUS_PER_NODE_HET_GROUP_1"] == "4(x2)"
    assert env["SLURM_JOB_PARTITION_HET_GROUP_0"] == "batch"
    assert env["SLURM_JOB_NODELIST_PACK_GROUP_1"] == "n[2-3]"  # 22.05's older names too
    salloc = hetjobs.allocation_environment(running, "c")
    assert salloc["SLURM_JOB_ID"] == "20" and salloc["SLURM_NTASKS"] == "2"
    assert salloc["SLURM_NODELIST_HET_GROUP_1"] == "n[2-3]"
    assert "SLURM_JOB_NODELIST" not in salloc and "SLURM_NNODES" not in salloc


def _fields(job: Job) -> dict[str, Any]:
    return {name: getattr(job, name) for name in Job.__slots__ if name != "deps"}
