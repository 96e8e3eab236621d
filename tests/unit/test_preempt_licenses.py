"""PreemptParameters=reclaim_licenses in the scheduling core: a job waiting for licenses
preempts the lower-tier (or lower-QOS) jobs that hold them, wherever they run, and only
those; without the parameter it waits with reason Licenses, as in Slurm."""

from __future__ import annotations

from dataclasses import replace

from controller.core import Plan, schedule
from controller.core.preempt import PreemptPolicy
from controller.core.snapshot import Running, Snapshot
from controller.jobstate import Reason
from controller.model import Job
from tests.unit.scenario import NOW, cluster, job, node, partition

#: n1 and n2 full (one running job each), n3 idle.
NODES = [node("n1", cpus=4, used_cpus=4), node("n2", cpus=4, used_cpus=4), node("n3", cpus=4)]
PARTS = [partition("low", "n[1-3]"), partition("high", "n[1-3]", tier=2)]
TIERS = PreemptPolicy("partition_prio", tiers={"low": 1, "high": 2})
RECLAIM = replace(TIERS, reclaim_licenses=True)


def victim(job_id: int, node_name: str, **fields: object) -> Running:
    values: dict[str, object] = {
        "preemptable": True,
        "priority": 10,
        "qos": "normal",
        "partition": "low",
        "start_time": NOW - 100,
    }
    values.update(fields)
    return Running(job_id, (node_name,), (4,), (0,), 0, **values)  # type: ignore[arg-type]


#: Job 10 on n1 holds both fluent licenses; job 11 on n2 (younger, so tried first) none.
HOLDERS = [
    victim(10, "n1", licenses="fluent:2"),
    victim(11, "n2", start_time=NOW - 10),
]


def _plan(
    pending: list[Job],
    policy: PreemptPolicy,
    running: list[Running] = HOLDERS,
    nodes: list[object] = NODES,  # type: ignore[assignment]
) -> Plan:
    base = cluster(nodes, PARTS).snapshot(pending, running=running)  # type: ignore[arg-type]
    snap: Snapshot = replace(base, preempt=policy, licenses={"fluent": 2})
    return schedule(snap, NOW)


URGENT = job(1, num_tasks=1, partitions=("high",), licenses="fluent:2")


def test_without_reclaim_licenses_a_job_short_of_licenses_waits() -> None:
    plan = _plan([URGENT], TIERS)
    assert plan.reasons[1] is Reason.LICENSES
    assert plan.preempted == {}


def test_with_it_the_holder_is_preempted_though_the_job_runs_elsewhere() -> None:
    plan = _plan([URGENT], RECLAIM)
    assert plan.reasons[1] is Reason.LICENSES
    assert plan.preempted == {10: 1}  # job 11, tried first, frees no license: dropped


def test_a_job_of_a_tier_that_may_not_preempt_the_holder_still_waits() -> None:
    peer = replace(URGENT, partitions=("low",))
    assert _plan([peer], RECLAIM).preempted == {}


def test_a_holder_that_would_be_suspended_keeps_its_licenses_so_is_no_victim() -> None:
    held = [victim(10, "n1", licenses="fluent:2", mode="SUSPEND"), HOLDERS[1]]
    assert _plan([URGENT], RECLAIM, held).preempted == {}


def test_a_job_waiting_behind_a_job_ahead_that_asks_for_them_preempts_nothing() -> None:
    """Two fluent licenses of 4 are free and no node is idle; job 3 waits only because
    job 2 ahead asks for them (more than there are: no victim helps it). Job 3 is not
    short of licenses, so it takes no victim for them, nor for a node."""
    full = [node("n1", cpus=4, used_cpus=4), node("n2", cpus=4, used_cpus=4)]
    ahead = job(2, num_tasks=1, partitions=("high",), licenses="fluent:5")
    behind = job(3, num_tasks=1, partitions=("high",), licenses="fluent:1")
    base = cluster(full, PARTS).snapshot([ahead, behind], running=HOLDERS)  # type: ignore[arg-type]
    snap = replace(base, preempt=RECLAIM, licenses={"fluent": 4})
    plan = schedule(snap, NOW)
    assert (plan.reasons[2], plan.reasons[3]) == (Reason.LICENSES, Reason.LICENSES)
    assert plan.preempted == {}


def test_a_job_short_of_nodes_and_licenses_takes_victims_for_both() -> None:
    """No idle node: the job needs a whole node and both licenses. Job 11's node alone
    frees no license; job 10's frees both and its node: it is the one victim."""
    full = [node("n1", cpus=4, used_cpus=4), node("n2", cpus=4, used_cpus=4)]
    big = replace(URGENT, num_tasks=4)
    assert _plan([big], RECLAIM, HOLDERS, full).preempted == {10: 1}  # type: ignore[arg-type]
    holders = [victim(10, "n1", licenses="fluent:1"), victim(11, "n2", licenses="fluent:1")]
    assert _plan([big], RECLAIM, holders, full).preempted == {10: 1, 11: 1}  # type: ignore[arg-type]


def test_a_job_waiting_for_nodes_only_takes_no_extra_license_holder() -> None:
    plain = job(1, num_tasks=8, partitions=("high",))  # n3 and one more node
    assert _plan([plain], RECLAIM).preempted == {11: 1}
