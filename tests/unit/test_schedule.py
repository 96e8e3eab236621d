"""controller.core: schedule(snapshot, now) -> Plan, scenario by scenario, plus properties."""

from __future__ import annotations

import importlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import NOW, Cluster, cluster, facts, job, node, partition

from controller.core import BackfillParams, Plan, schedule
from controller.core.plan import Start
from controller.core.request import cpus_per_node, features_match, mem_per_node
from controller.core.snapshot import JobFacts, NodeView, Snapshot
from controller.jobstate import Reason
from controller.model import Job

#: The module, not the function the package exports under its name.
schedule_module = importlib.import_module("controller.core.schedule")

R = Reason

# Four idle 4-CPU/4000-MiB nodes in one partition: the default stage.
FOUR = cluster(
    nodes=[node(f"n{i}") for i in range(1, 5)],
    partitions=[partition("batch", "n[1-4]")],
)
ONE = cluster(nodes=[node("n1")], partitions=[partition("batch", "n1")])


@dataclass(frozen=True)
class Case:
    """A cluster, its pending jobs, and what one pass must decide."""

    id: str
    stage: Cluster
    pending: tuple[Job, ...]
    starts: dict[int, tuple[str, ...]]  # job id -> nodes, in allocation order
    reasons: dict[int, Reason] = field(default_factory=dict)
    jobs: dict[int, JobFacts] = field(default_factory=dict)
    running_per_array: dict[int, int] = field(default_factory=dict)

    def plan(self) -> Plan:
        snap = self.stage.snapshot(
            self.pending, jobs=self.jobs, running_per_array=self.running_per_array
        )
        return schedule(snap, NOW)


def _stage(*nodes: NodeView, parts: tuple[tuple[str, str], ...] = (), **kw: Any) -> Cluster:
    """Nodes plus partitions given as (name, nodes); one ``batch`` of all nodes by default."""
    specs = parts or (("batch", ",".join(n.name for n in nodes)),)
    return cluster(nodes=nodes, partitions=[partition(p, ns, **kw) for p, ns in specs])


CASES = [
    # ---- order
    Case(
        "priority-beats-submit-order",
        ONE,
        (job(1, num_tasks=4, admin_priority=10), job(2, num_tasks=4, admin_priority=100)),
        starts={2: ("n1",)},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "equal-priority-submit-order",
        ONE,
        (job(2, num_tasks=4), job(1, num_tasks=4)),
        starts={1: ("n1",)},
        reasons={2: R.RESOURCES},
    ),
    Case(
        "equal-priority-and-submit-time-job-id-order",
        ONE,
        (job(2, num_tasks=4, submit_time=NOW), job(1, num_tasks=4, submit_time=NOW)),
        starts={1: ("n1",)},
        reasons={2: R.RESOURCES},
    ),
    # ---- blocking
    Case(
        "first-blocked-resources-then-priority",
        _stage(node("n1", used_cpus=2)),
        (job(1, num_tasks=4), job(2, num_tasks=1), job(3, num_tasks=1)),
        starts={},
        reasons={1: R.RESOURCES, 2: R.PRIORITY, 3: R.PRIORITY},
    ),
    Case(
        "blocking-is-per-partition",
        _stage(node("n1", used_cpus=2), node("n2"), parts=(("a", "n1"), ("b", "n2"))),
        (
            job(1, num_tasks=4, partitions=("a",)),
            job(2, partitions=("a",)),
            job(3, partitions=("b",)),
        ),
        starts={3: ("n2",)},
        reasons={1: R.RESOURCES, 2: R.PRIORITY},
    ),
    Case(
        "blocked-partition-skipped-for-next-one",
        _stage(node("n1", used_cpus=2), node("n2"), parts=(("a", "n1"), ("b", "n2"))),
        (job(1, num_tasks=4, partitions=("a",)), job(2, partitions=("a", "b"))),
        starts={2: ("n2",)},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "held-job-does-not-block",
        ONE,
        (job(1, held="user", admin_priority=1000), job(2)),
        starts={2: ("n1",)},
        reasons={1: R.JOB_HELD_USER},
    ),
    Case(
        "partition-limit-does-not-block",
        _stage(node("n1"), max_time=60),
        (job(1, time_limit=120), job(2, time_limit=30)),
        starts={2: ("n1",)},
        reasons={1: R.PARTITION_TIME_LIMIT},
    ),
    Case(
        "earlier-starts-use-up-the-node",
        ONE,
        (job(1, num_tasks=3), job(2, num_tasks=1), job(3, num_tasks=1)),
        starts={1: ("n1",), 2: ("n1",)},
        reasons={3: R.RESOURCES},
    ),
    # ---- exclusive
    Case(
        "exclusive-needs-idle-node",
        _stage(node("n1", used_cpus=1), node("n2")),
        (job(1, exclusive=True),),
        starts={1: ("n2",)},
    ),
    Case(
        "exclusive-no-idle-node",
        _stage(node("n1", used_cpus=1), node("n2", used_cpus=1)),
        (job(1, exclusive=True),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "partition-oversubscribe-exclusive",
        _stage(node("n1", used_cpus=1), node("n2"), exclusive=True),
        (job(1), job(2)),
        starts={1: ("n2",)},
        reasons={2: R.RESOURCES},
    ),
    Case(
        "exclusive-job-then-nothing-fits",
        ONE,
        (job(1, exclusive=True), job(2)),
        starts={1: ("n1",)},
        reasons={2: R.RESOURCES},
    ),
    # ---- memory
    Case(
        "mem-per-node-skips-node-without-free-memory",
        _stage(node("n1", used_memory=2000, used_cpus=1), node("n2")),
        (job(1, mem_per_node=3000),),
        starts={1: ("n2",)},
    ),
    Case(
        "mem-per-node-too-big-everywhere",
        _stage(node("n1", used_memory=2000, used_cpus=1)),
        (job(1, mem_per_node=3000),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "mem-zero-needs-all-memory-free",
        _stage(node("n1", used_memory=1, used_cpus=1), node("n2")),
        (job(1, mem_per_node=0),),
        starts={1: ("n2",)},
    ),
    Case(
        "mem-per-cpu-scales-with-cpus",
        _stage(node("n1", used_memory=2500, used_cpus=1), node("n2")),
        (job(1, num_tasks=2, mem_per_cpu=1000),),
        starts={1: ("n2",)},
    ),
    Case(
        "max-mem-per-node-refuses",
        _stage(node("n1"), max_mem_per_node=2000),
        (job(1, mem_per_node=3000),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    # ---- tasks with -N: exactly min_nodes nodes, tasks spread evenly
    Case(
        "tasks-spread-over-nodes",
        FOUR,
        (job(1, num_tasks=6, min_nodes=2, nodes_given=True),),
        starts={1: ("n1", "n2")},
    ),
    Case(
        "too-many-cpus-per-node",
        FOUR,
        (job(1, num_tasks=5, min_nodes=1, nodes_given=True),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "even-spread-skips-node-without-its-share",
        _stage(node("n1", used_cpus=2), node("n2"), node("n3")),
        (job(1, num_tasks=6, min_nodes=2, nodes_given=True),),
        starts={1: ("n2", "n3")},
    ),
    Case(
        "fixed-count-uses-more-nodes-than-needed",
        FOUR,
        (job(1, num_tasks=1, min_nodes=3, nodes_given=True),),
        starts={1: ("n1", "n2", "n3")},
    ),
    Case(
        "ntasks-per-node-fixes-the-count",
        FOUR,
        (job(1, num_tasks=2, ntasks_per_node=1, min_nodes=2, nodes_given=True),),
        starts={1: ("n1", "n2")},
    ),
    # ---- tasks without -N: packed onto as few nodes as fit, in node order
    Case("packed-fits-one-node", FOUR, (job(1, num_tasks=4),), starts={1: ("n1",)}),
    Case("packed-onto-two-nodes", FOUR, (job(1, num_tasks=8),), starts={1: ("n1", "n2")}),
    Case(
        "packed-uses-partly-busy-node-first",
        _stage(node("n1", used_cpus=3), node("n2"), node("n3")),
        (job(1, num_tasks=6),),
        starts={1: ("n1", "n2", "n3")},
    ),
    Case(
        "packed-skips-full-node",
        _stage(node("n1", used_cpus=4), node("n2"), node("n3")),
        (job(1, num_tasks=5),),
        starts={1: ("n2", "n3")},
    ),
    Case(
        "packed-follows-weight",
        _stage(node("n1", weight=9), node("n2", weight=1), node("n3", weight=5)),
        (job(1, num_tasks=8),),
        starts={1: ("n2", "n3")},
    ),
    Case(
        "packed-more-tasks-than-cluster",
        FOUR,
        (job(1, num_tasks=17),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "packed-whole-tasks-only",
        _stage(node("n1", used_cpus=1), node("n2")),
        (job(1, num_tasks=2, cpus_per_task=2),),
        starts={1: ("n1", "n2")},
    ),
    Case(
        "packed-then-next-job-gets-the-rest",
        FOUR,
        (job(1, num_tasks=10), job(2, num_tasks=6), job(3, num_tasks=1)),
        starts={1: ("n1", "n2", "n3"), 2: ("n3", "n4")},
        reasons={3: R.RESOURCES},
    ),
    Case(
        "packed-exclusive-takes-whole-nodes",
        FOUR,
        (job(1, num_tasks=5, exclusive=True), job(2, num_tasks=8)),
        starts={1: ("n1", "n2"), 2: ("n3", "n4")},
    ),
    Case(
        "packed-memory-per-node-limits-node",
        _stage(node("n1", used_memory=3500, used_cpus=1), node("n2")),
        (job(1, num_tasks=2, mem_per_node=1000),),
        starts={1: ("n2",)},
    ),
    # ---- -w / -x
    Case(
        "required-node-is-used",
        FOUR,
        (job(1, req_nodes=("n3",), nodes_given=True),),
        starts={1: ("n3",)},
    ),
    Case(
        "all-required-nodes-are-used",
        FOUR,
        (job(1, min_nodes=2, req_nodes=("n4", "n2"), nodes_given=True),),
        starts={1: ("n2", "n4")},
    ),
    Case(
        "required-node-first-then-others",
        FOUR,
        (job(1, min_nodes=2, nodes_given=True, req_nodes=("n4",)),),
        starts={1: ("n4", "n1")},
    ),
    Case(
        "required-node-down",
        _stage(node("n1"), node("n2", usable=False)),
        (job(1, req_nodes=("n2",), nodes_given=True), job(2)),
        starts={2: ("n1",)},
        reasons={1: R.REQ_NODE_NOT_AVAIL},
    ),
    Case(
        "required-node-not-in-partition",
        _stage(node("n1"), node("n2"), parts=(("batch", "n1"), ("other", "n2"))),
        (job(1, req_nodes=("n2",), nodes_given=True),),
        starts={},
        reasons={1: R.REQ_NODE_NOT_AVAIL},
    ),
    Case(
        "required-node-busy",
        _stage(node("n1"), node("n2", used_cpus=4)),
        (job(1, req_nodes=("n2",), nodes_given=True),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case("excluded-node-skipped", FOUR, (job(1, exc_nodes=("n1", "n2")),), starts={1: ("n3",)}),
    Case(
        "everything-excluded",
        FOUR,
        (job(1, exc_nodes=("n1", "n2", "n3", "n4")),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "unusable-node-skipped",
        _stage(node("n1", usable=False), node("n2")),
        (job(1),),
        starts={1: ("n2",)},
    ),
    # ---- weight
    Case(
        "lower-weight-first",
        _stage(node("n1", weight=10), node("n2", weight=5), node("n3", weight=5)),
        (job(1, min_nodes=2, nodes_given=True),),
        starts={1: ("n2", "n3")},
    ),
    Case(
        "weight-then-config-order",
        _stage(node("n3"), node("n1"), node("n2", weight=0)),
        (job(1, min_nodes=3, nodes_given=True),),
        starts={1: ("n2", "n3", "n1")},
    ),
    # ---- features
    Case(
        "constraint-and",
        _stage(node("n1", features="a"), node("n2", features="b"), node("n3", features="a,b")),
        (job(1, constraint="a&b"),),
        starts={1: ("n3",)},
    ),
    Case(
        "constraint-or",
        _stage(node("n1", features="c"), node("n2", features="b"), node("n3", features="a")),
        (job(1, constraint="a|b"),),
        starts={1: ("n2",)},
    ),
    Case(
        "constraint-unmatched",
        _stage(node("n1", features="c")),
        (job(1, constraint="a"),),
        starts={},
        reasons={1: R.RESOURCES},
    ),
    # ---- partition limits and state
    Case(
        "partition-time-limit",
        _stage(node("n1"), max_time=60),
        (job(1, time_limit=61), job(2, time_limit=-1)),
        starts={},
        reasons={1: R.PARTITION_TIME_LIMIT, 2: R.PARTITION_TIME_LIMIT},
    ),
    Case(
        "partition-time-limit-equal-is-fine",
        _stage(node("n1"), max_time=60),
        (job(1, time_limit=60),),
        starts={1: ("n1",)},
    ),
    Case(
        "partition-max-nodes",
        _stage(node("n1"), node("n2"), max_nodes=1),
        (job(1, min_nodes=2, nodes_given=True),),
        starts={},
        reasons={1: R.PARTITION_NODE_LIMIT},
    ),
    Case(
        "partition-min-nodes",
        _stage(node("n1"), node("n2"), min_nodes=2),
        (job(1, min_nodes=1, nodes_given=True), job(2, min_nodes=2, nodes_given=True)),
        starts={2: ("n1", "n2")},
        reasons={1: R.PARTITION_NODE_LIMIT},
    ),
    Case(
        "partition-down",
        _stage(node("n1"), state="DOWN"),
        (job(1),),
        starts={},
        reasons={1: R.PARTITION_DOWN},
    ),
    Case(
        "partition-inactive",
        _stage(node("n1"), state="INACTIVE"),
        (job(1),),
        starts={},
        reasons={1: R.PARTITION_INACTIVE},
    ),
    Case(
        "partition-drain-still-runs-queued-jobs",
        _stage(node("n1"), state="DRAIN"),
        (job(1),),
        starts={1: ("n1",)},
    ),
    # ---- held, begin time, dependency
    Case("held-user", ONE, (job(1, held="user"),), starts={}, reasons={1: R.JOB_HELD_USER}),
    Case("held-admin", ONE, (job(1, held="admin"),), starts={}, reasons={1: R.JOB_HELD_ADMIN}),
    Case(
        "begin-time-future",
        ONE,
        (job(1, begin_time=NOW + 1),),
        starts={},
        reasons={1: R.BEGIN_TIME},
    ),
    Case("begin-time-now", ONE, (job(1, begin_time=NOW),), starts={1: ("n1",)}),
    Case(
        "dependency-waiting",
        ONE,
        (job(2, dependency="afterok:1"),),
        starts={},
        reasons={2: R.DEPENDENCY},
        jobs={1: facts("RUNNING")},
    ),
    Case(
        "dependency-never",
        ONE,
        (job(2, dependency="afterok:1"),),
        starts={},
        reasons={2: R.DEPENDENCY_NEVER_SATISFIED},
        jobs={1: facts("FAILED", exit_status=256)},
    ),
    Case(
        "dependency-satisfied",
        ONE,
        (job(2, dependency="afterok:1"),),
        starts={2: ("n1",)},
        jobs={1: facts("COMPLETED")},
    ),
    # ---- arrays
    Case(
        "array-throttle-reached",
        FOUR,
        (job(12, array_job_id=10, array_task_id=2, array_max_tasks=2),),
        starts={},
        reasons={12: R.JOB_ARRAY_TASK_LIMIT},
        running_per_array={10: 2},
    ),
    Case(
        "array-throttle-counts-starts-in-this-pass",
        FOUR,
        tuple(job(10 + i, array_job_id=10, array_task_id=i, array_max_tasks=3) for i in range(4)),
        starts={10: ("n1",), 11: ("n1",)},
        reasons={12: R.JOB_ARRAY_TASK_LIMIT, 13: R.JOB_ARRAY_TASK_LIMIT},
        running_per_array={10: 1},
    ),
    Case(
        "array-throttle-is-per-array",
        FOUR,
        (
            job(12, array_job_id=10, array_task_id=2, array_max_tasks=1),
            job(21, array_job_id=20, array_task_id=1, array_max_tasks=1),
        ),
        starts={21: ("n1",)},
        reasons={12: R.JOB_ARRAY_TASK_LIMIT},
        running_per_array={10: 1},
    ),
    # ---- several partitions
    Case(
        "higher-priority-tier-first",
        cluster(
            nodes=[node("n1"), node("n2")],
            partitions=[partition("low", "n1", tier=1), partition("high", "n2", tier=5)],
        ),
        (job(1, partitions=("low", "high")),),
        starts={1: ("n2",)},
    ),
    Case(
        "falls-back-to-lower-tier",
        cluster(
            nodes=[node("n1"), node("n2", used_cpus=4)],
            partitions=[partition("low", "n1", tier=1), partition("high", "n2", tier=5)],
        ),
        (job(1, partitions=("high", "low")),),
        starts={1: ("n1",)},
    ),
    Case(
        # A higher tier goes first whatever the priority: a job preempted for it and
        # requeued cannot take its place back.
        "tier-before-priority",
        cluster(
            nodes=[node("n1")],
            partitions=[partition("low", "n1", tier=1), partition("high", "n1", tier=2)],
        ),
        (
            job(1, partitions=("low",), num_tasks=4, admin_priority=9000),
            job(2, partitions=("high",), num_tasks=4),
        ),
        starts={2: ("n1",)},
        reasons={1: R.RESOURCES},
    ),
    Case(
        "unknown-partition-ignored",
        _stage(node("n1")),
        (job(1, partitions=("gone", "batch")),),
        starts={1: ("n1",)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_scenario(case: Case) -> None:
    plan = case.plan()
    assert {s.job_id: s.nodes for s in plan.starts} == case.starts
    assert plan.reasons == case.reasons
    assert plan.now == NOW


@pytest.mark.parametrize(
    ("fields", "cpus", "memory"),
    [
        ({"num_tasks": 6, "min_nodes": 2, "nodes_given": True}, (3, 3), (300, 300)),
        ({"num_tasks": 6}, (4, 2), (400, 200)),
    ],
    ids=["even-spread", "packed"],
)
def test_start_names_partition_cpus_and_memory(
    fields: dict[str, Any], cpus: tuple[int, ...], memory: tuple[int, ...]
) -> None:
    stage = cluster(
        nodes=[node("n1"), node("n2")],
        partitions=[partition("batch", "n1,n2", def_mem_per_cpu=100)],
    )
    plan = schedule(stage.snapshot([job(1, **fields)]), NOW)
    (start,) = plan.starts
    assert (start.partition, start.nodes, start.cpus, start.memory) == (
        "batch",
        ("n1", "n2"),
        cpus,
        memory,
    )


def test_packed_cpus_follow_free_cpus_and_tasks() -> None:
    stage = _stage(node("n1", used_cpus=3), node("n2", cpus=8), node("n3"))
    (start,) = schedule(stage.snapshot([job(1, num_tasks=5, cpus_per_task=2)]), NOW).starts
    # n1 has 1 CPU free: no room for a 2-CPU task; n2 takes 4 tasks, n3 the last.
    assert (start.nodes, start.cpus) == (("n2", "n3"), (8, 2))


def test_packed_job_never_exceeds_partition_max_nodes() -> None:
    """MaxNodes caps the nodes of any one job, also when -n alone asks for more CPUs."""
    stage = _stage(node("n1"), node("n2"), max_nodes=1)
    plan = schedule(stage.snapshot([job(1, num_tasks=8)]), NOW)
    assert [s.nodes for s in plan.starts if len(s.nodes) > 1] == []
    assert 1 in plan.reasons


@pytest.mark.parametrize(
    ("fields", "part_kw", "cpus", "memory"),
    [
        ({}, {}, (1,), 0),
        ({"num_tasks": 3}, {"def_mem_per_cpu": 500}, (3,), 1500),
        ({}, {"def_mem_per_node": 700}, (1,), 700),
        ({}, {"def_mem_per_cpu": 500, "def_mem_per_node": 700}, (1,), 500),
        ({"mem_per_node": 1234}, {"def_mem_per_cpu": 500}, (1,), 1234),
        ({"num_tasks": 2, "cpus_per_task": 2, "mem_per_cpu": 100}, {}, (4,), 400),
        ({"mem_per_node": 0}, {}, (1,), 4000),
        ({"exclusive": True}, {"def_mem_per_cpu": 100}, (4,), 400),
        ({"exclusive": True, "mem_per_node": 10}, {}, (4,), 10),
        ({"num_tasks": 2, "min_cpus": 3}, {}, (3,), 0),
    ],
    ids=[
        "no-request-no-default",
        "def-mem-per-cpu",
        "def-mem-per-node",
        "def-mem-per-cpu-wins",
        "explicit-mem-wins",
        "mem-per-cpu-times-cpus",
        "mem-zero-is-whole-node",
        "exclusive-takes-all-cpus-and-their-memory",
        "exclusive-with-mem",
        "mincpus",
    ],
)
def test_allocation_size(
    fields: dict[str, Any], part_kw: dict[str, Any], cpus: tuple[int, ...], memory: int
) -> None:
    stage = cluster(nodes=[node("n1")], partitions=[partition("batch", "n1", **part_kw)])
    (start,) = schedule(stage.snapshot([job(1, **fields)]), NOW).starts
    assert (start.cpus, start.memory) == (cpus, (memory,))


@pytest.mark.parametrize(
    ("fields", "nnodes", "expected"),
    [
        ({"num_tasks": 1}, 1, 1),
        ({"num_tasks": 6}, 2, 3),
        ({"num_tasks": 7}, 2, 4),
        ({"num_tasks": 2, "cpus_per_task": 3}, 1, 6),
        ({"num_tasks": 4, "ntasks_per_node": 2}, 2, 2),
        ({"num_tasks": 4, "ntasks_per_node": 2, "cpus_per_task": 2}, 2, 4),
        ({"num_tasks": 3, "ntasks_per_node": 4, "tasks_given": True}, 2, 2),
        ({"num_tasks": 8, "ntasks_per_node": 2, "tasks_given": True}, 2, 2),
        ({"num_tasks": 1, "min_cpus": 5}, 1, 5),
        ({"num_tasks": 4, "min_cpus": 2}, 1, 4),
    ],
    ids=[
        "one-task",
        "six-tasks-two-nodes",
        "odd-tasks-round-up",
        "cpus-per-task",
        "ntasks-per-node",
        "ntasks-per-node-times-cpus-per-task",
        "ntasks-capped-by-given-total",
        "ntasks-per-node-below-total",
        "mincpus-raises",
        "mincpus-below-need",
    ],
)
def test_cpus_per_node(fields: dict[str, Any], nnodes: int, expected: int) -> None:
    assert cpus_per_node(job(1, **fields), nnodes) == expected


@pytest.mark.parametrize(
    ("constraint", "features", "expected"),
    [
        ("", "", True),
        ("a", "a", True),
        ("a", "b", False),
        ("a&b", "a,b", True),
        ("a&b", "a", False),
        ("a|b", "b", True),
        ("a|b", "c", False),
        ("[a|b]", "a", True),
        ("a*2", "a", True),
        ("(a&b)|c", "c", True),
    ],
    ids=[
        "none",
        "single",
        "single-missing",
        "and",
        "and-missing",
        "or",
        "or-missing",
        "brackets",
        "count-suffix",
        "parentheses",
    ],
)
def test_features_match(constraint: str, features: str, expected: bool) -> None:
    assert features_match(constraint, node("n", features=features).features) is expected


def test_mem_per_node_prefers_explicit_over_defaults() -> None:
    part = partition("p", "n1", def_mem_per_cpu=3, def_mem_per_node=5)
    assert mem_per_node(job(1, mem_per_cpu=7), part, cpus=2, node_memory=100) == 14
    assert mem_per_node(job(1, mem_per_node=0), part, cpus=2, node_memory=100) == 100
    assert mem_per_node(job(1), part, cpus=2, node_memory=100) == 6


# ---------------------------------------------------------------- unequal nodes


def test_exclusive_mem_per_cpu_on_unequal_nodes_fits_each_node() -> None:
    stage = _stage(node("small", cpus=4, memory=4000), node("big", cpus=8, memory=8000))
    pending = [job(1, min_nodes=2, nodes_given=True, exclusive=True, mem_per_cpu=1000)]
    plan = schedule(stage.snapshot(pending), NOW)
    (start,) = plan.starts
    assert (start.nodes, start.cpus, start.memory) == (("small", "big"), (4, 8), (4000, 8000))
    _assert_fits(stage.snapshot([]), plan)


def test_mem_zero_on_unequal_nodes_fits_each_node() -> None:
    stage = _stage(node("small", memory=2000), node("big", memory=8000))
    plan = schedule(stage.snapshot([job(1, min_nodes=2, nodes_given=True, mem_per_node=0)]), NOW)
    (start,) = plan.starts
    assert (start.nodes, start.memory) == (("small", "big"), (2000, 8000))
    _assert_fits(stage.snapshot([]), plan)


def test_memory_taken_per_node_by_earlier_starts() -> None:
    """A start takes each node's own memory: the next job sees what is left on each."""
    stage = _stage(node("small", memory=2000), node("big", memory=8000))
    first = job(1, num_tasks=6, mem_per_cpu=300)  # 4 tasks on small, 2 on big
    second = job(2, mem_per_node=7400)  # exactly what big has left
    plan = schedule(stage.snapshot([first, second]), NOW)
    assert {s.job_id: (s.nodes, s.cpus, s.memory) for s in plan.starts} == {
        1: (("small", "big"), (4, 2), (1200, 600)),
        2: (("big",), (1,), (7400,)),
    }
    _assert_fits(stage.snapshot([]), plan)


def test_required_nodes_with_node_count_start_on_all_of_them() -> None:
    """``-N1 -w n1,n2`` arrives with min_nodes=2 (admission raises it) and runs on both."""
    plan = schedule(
        FOUR.snapshot([job(1, min_nodes=2, nodes_given=True, req_nodes=("n1", "n2"))]), NOW
    )
    assert [s.nodes for s in plan.starts] == [("n1", "n2")]


# ---------------------------------------------------------------- properties


def _assert_fits(snap: Snapshot, plan: Plan) -> None:
    """Starts never take more CPUs or memory of a node than it had free."""
    cpus: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    for start in plan.starts:
        for name, n, mib in zip(start.nodes, start.cpus, start.memory, strict=True):
            cpus[name] += n
            memory[name] += mib
    for name in cpus:
        assert cpus[name] <= snap.nodes[name].free_cpus, name
        assert memory[name] <= snap.nodes[name].free_memory, name


def _assert_tasks_placed(j: Job, start: Start, snap: Snapshot, exclusive: bool) -> None:
    """-N: exactly min_nodes nodes, even spread; otherwise packed, no superfluous node."""
    if j.nodes_given:
        assert len(start.nodes) == j.min_nodes
        if not exclusive:
            assert set(start.cpus) == {cpus_per_node(j, j.min_nodes)}
        return
    assert len(start.nodes) >= 1
    if exclusive:
        tasks = [snap.nodes[n].cpus // j.cpus_per_task for n in start.nodes]
    else:
        assert all(c % j.cpus_per_task == 0 for c in start.cpus)  # whole tasks (no --mincpus)
        tasks = [c // j.cpus_per_task for c in start.cpus]
    assert all(t >= 1 for t in tasks)
    assert sum(tasks) >= j.num_tasks
    assert sum(tasks[:-1]) < j.num_tasks  # the last node was needed
    if not exclusive:
        assert sum(tasks) == j.num_tasks


def _assert_plan_is_sound(snap: Snapshot, plan: Plan) -> None:
    _assert_fits(snap, plan)
    pending = {j.job_id: j for j in snap.pending}
    started = [s.job_id for s in plan.starts]
    assert len(started) == len(set(started))
    assert set(started).isdisjoint(plan.reasons)
    assert set(started) | set(plan.reasons) == set(pending)
    for start in plan.starts:
        j = pending[start.job_id]
        part = snap.partitions[start.partition]
        assert start.partition in j.partitions
        assert len(start.nodes) == len(set(start.nodes)) == len(start.cpus) == len(start.memory)
        if part.max_nodes is not None:
            assert len(start.nodes) <= part.max_nodes
        _assert_tasks_placed(j, start, snap, j.exclusive or part.exclusive)
        for name, cpus, mib in zip(start.nodes, start.cpus, start.memory, strict=True):
            assert mib == mem_per_node(j, part, cpus, snap.nodes[name].real_memory)
        assert all(n in part.nodes and n not in j.exc_nodes for n in start.nodes)
        assert set(j.req_nodes) <= set(start.nodes)
        assert all(snap.nodes[n].usable for n in start.nodes)
        assert all(features_match(j.constraint, snap.nodes[n].features) for n in start.nodes)
        assert not j.held and j.begin_time <= NOW
        if j.exclusive or part.exclusive:
            assert all(snap.nodes[n].idle for n in start.nodes)
            assert start.cpus == tuple(snap.nodes[n].cpus for n in start.nodes)
        if part.max_time >= 0:
            assert 0 <= j.time_limit <= part.max_time
    # Behind a job that waits for resources, nothing starts in its partitions.
    where = {s.job_id: s.partition for s in plan.starts}
    blocked: set[str] = set()

    def tier(j: Job) -> int:
        return max(
            (snap.partitions[p].priority_tier for p in j.partitions if p in snap.partitions),
            default=0,
        )

    for j in sorted(
        pending.values(), key=lambda j: (-tier(j), -snap.ranking.of(j), j.submit_time, j.job_id)
    ):
        if j.job_id in where:
            assert where[j.job_id] not in blocked, j.job_id
        elif plan.reasons[j.job_id] in (Reason.RESOURCES, Reason.PRIORITY):
            blocked.update(j.partitions)


_NAMES = [f"n{i}" for i in range(1, 7)]


@st.composite
def _node(draw: st.DrawFn, name: str, cpus: int, memory: int) -> NodeView:
    used_cpus = draw(st.integers(0, cpus))
    return node(
        name,
        cpus,
        memory,
        weight=draw(st.integers(0, 3)),
        features=draw(st.sampled_from(["", "a", "b", "a,b"])),
        used_cpus=used_cpus,
        used_memory=draw(st.integers(0, memory)) if used_cpus else 0,
        usable=draw(st.booleans().map(lambda b: b or used_cpus > 0)),
    )


@st.composite
def _job(draw: st.DrawFn, job_id: int, node_names: list[str], part_names: list[str]) -> Job:
    subset = st.lists(st.sampled_from(node_names), max_size=2, unique=True).map(tuple)
    memory = draw(st.sampled_from(["none", "node", "cpu"]))
    # As admission builds them: without -N/-w/--ntasks-per-node, one node and packed.
    nodes_given = draw(st.booleans())
    req_nodes = draw(subset) if nodes_given else ()
    return job(
        job_id,
        partitions=tuple(
            draw(st.lists(st.sampled_from(part_names), min_size=1, max_size=2, unique=True))
        ),
        admin_priority=draw(st.none() | st.integers(0, 3)),
        submit_time=draw(st.integers(NOW - 10, NOW)),
        num_tasks=draw(st.integers(1, 8)),
        cpus_per_task=draw(st.integers(1, 2)),
        nodes_given=nodes_given,
        min_nodes=max(draw(st.integers(1, 3)), len(req_nodes)) if nodes_given else 1,
        ntasks_per_node=draw(st.integers(0, 2)) if nodes_given else 0,
        mem_per_node=draw(st.sampled_from([0, 500, 3000])) if memory == "node" else None,
        mem_per_cpu=draw(st.sampled_from([100, 1000])) if memory == "cpu" else None,
        exclusive=draw(st.booleans()),
        constraint=draw(st.sampled_from(["", "a", "a&b", "a|b"])),
        req_nodes=req_nodes,
        exc_nodes=draw(subset),
        held=draw(st.sampled_from(["", "", "", "user"])),
        begin_time=draw(st.sampled_from([0, 0, NOW + 5])),
        time_limit=draw(st.sampled_from([-1, 30, 120])),
    )


@st.composite
def _snapshot(draw: st.DrawFn, homogeneous: bool, most: int = 8) -> Snapshot:
    count = draw(st.integers(1, len(_NAMES)))
    names = _NAMES[:count]
    sizes = st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1000, 2000, 4000]))
    same = draw(sizes)
    nodes = [draw(_node(n, *(same if homogeneous else draw(sizes)))) for n in names]
    parts = [
        partition(
            p,
            draw(st.lists(st.sampled_from(names), min_size=1, unique=True)),
            state=draw(st.sampled_from(["UP", "UP", "UP", "DOWN"])),
            max_time=draw(st.sampled_from([-1, -1, 60])),
            max_nodes=draw(st.sampled_from([None, 1, 2])),
            tier=draw(st.integers(1, 2)),
            def_mem_per_cpu=draw(st.sampled_from([0, 0, 100])),
            exclusive=draw(st.booleans()),
        )
        for p in ("a", "b")
    ]
    jobs = draw(st.lists(st.integers(1, 50), max_size=most, unique=True))
    pending = [draw(_job(j, names, ["a", "b"])) for j in jobs]
    return cluster(nodes, parts).snapshot(pending)


@settings(max_examples=150, deadline=None)
@given(snap=_snapshot(homogeneous=True))
def test_plan_is_sound_on_homogeneous_clusters(snap: Snapshot) -> None:
    _assert_plan_is_sound(snap, schedule(snap, NOW))


@settings(max_examples=150, deadline=None)
@given(snap=_snapshot(homogeneous=False))
def test_plan_is_sound_on_mixed_clusters(snap: Snapshot) -> None:
    _assert_plan_is_sound(snap, schedule(snap, NOW))


@settings(max_examples=50, deadline=None)
@given(snap=_snapshot(homogeneous=True))
def test_schedule_is_deterministic_and_ignores_pending_order(snap: Snapshot) -> None:
    reversed_snap = Snapshot(
        snap.nodes, snap.partitions, snap.pending[::-1], snap.jobs, snap.running_per_array
    )
    assert schedule(snap, NOW) == schedule(reversed_snap, NOW)


@pytest.mark.parametrize("backfill", [None, BackfillParams()], ids=["main", "backfill"])
@settings(max_examples=150, deadline=None)
@given(snap=_snapshot(homogeneous=False, most=20))
def test_jobs_whose_partitions_are_all_blocked_are_answered_as_placing_them_would(
    backfill: BackfillParams | None, snap: Snapshot
) -> None:
    """``held_back`` (the main pass skipping jobs stuck behind blocked partitions)
    changes no start, reason or plan: the same pass placing every job agrees."""
    skipping = schedule(snap, NOW, backfill)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schedule_module, "held_back", lambda *args: None)
        placing = schedule(snap, NOW, backfill)
    assert skipping == placing
