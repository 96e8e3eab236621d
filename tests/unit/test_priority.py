"""Multifactor priority: each factor, the weighted sum, and the special cases.

Expected numbers are worked by hand from the formulas in Slurm's
``set_priority_factors`` and ``_get_priority_internal`` (quoted per test).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.priority import (
    MAX_PRIORITY,
    Cluster,
    PartitionFacts,
    PriorityFactors,
    PriorityJob,
    Weights,
    account_of,
    basic_priority,
    factors,
    job_priorities,
    job_priority,
)
from controller.jobstate import JobState, Reason
from controller.model import Job
from corral.config import PriorityConfig, parse

NOW = 1796014614
DAY = 86400
WEEK = 7 * DAY

PARTS = {
    "debug": PartitionFacts(
        "debug",
        priority_job_factor=1,
        max_time=60,
        tres=(("cpu", 8), ("mem", 16000), ("node", 4), ("billing", 8)),
    ),
    "big": PartitionFacts("big", priority_job_factor=4, tres=(("cpu", 16), ("mem", 32000))),
    "zero": PartitionFacts("zero", priority_job_factor=0),
}


def cluster(config: PriorityConfig | None = None, **changes: object) -> Cluster:
    fields: dict[str, object] = {
        "config": config or PriorityConfig(),
        "nodes": 4,
        "cpus": 8,
        "partitions": PARTS,
    }
    fields.update(changes)
    return Cluster(**fields)  # type: ignore[arg-type]


def pjob(**changes: object) -> PriorityJob:
    base = PriorityJob(
        job_id=7,
        user="alice",
        account="physics",
        partitions=("debug",),
        accrue_time=NOW,
        submit_time=NOW,
        min_nodes=1,
        cpus=2,
        tres=(("cpu", 2), ("mem", 4000), ("node", 1), ("billing", 2)),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


# ---------------------------------------------------------------- age
@pytest.mark.parametrize(
    ("accrue", "submit", "flags", "age"),
    [
        pytest.param(NOW, NOW, (), 0.0, id="just eligible"),
        pytest.param(NOW - WEEK // 2, NOW, (), 0.5, id="half of max age"),
        pytest.param(NOW - WEEK, NOW, (), 1.0, id="max age"),
        pytest.param(NOW - 3 * WEEK, NOW, (), 1.0, id="past max age"),
        pytest.param(0, NOW - DAY, (), 0.0, id="not accruing"),
        pytest.param(NOW + 60, NOW, (), 0.0, id="eligible later"),
        pytest.param(0, NOW - WEEK // 7, ("ACCRUE_ALWAYS",), 1 / 7, id="accrue always"),
    ],
)
def test_age(accrue: int, submit: int, flags: tuple[str, ...], age: float) -> None:
    # min(now - accrue_time, PriorityMaxAge) / PriorityMaxAge, PriorityMaxAge = 7 days
    config = PriorityConfig(flags=frozenset(flags))
    got = factors(pjob(accrue_time=accrue, submit_time=submit), "debug", NOW, cluster(config))
    assert got.age == pytest.approx(age)


def test_age_with_zero_max_age_is_full() -> None:
    config = PriorityConfig(max_age=0)
    assert factors(pjob(), "debug", NOW, cluster(config)).age == 1.0


# ---------------------------------------------------------------- job size
@pytest.mark.parametrize(
    ("min_nodes", "cpus", "favor_small", "flags", "size"),
    [
        # favour large: (min_nodes/nodes + cpus/cluster_cpus) / 2 = (1/4 + 2/8) / 2
        pytest.param(1, 2, False, (), 0.25, id="large: 1 node 2 cpus"),
        pytest.param(4, 8, False, (), 1.0, id="large: whole cluster"),
        pytest.param(1, 0, False, (), 0.25, id="large: cpus unknown, node term alone"),
        # favour small: ((nodes-min_nodes)/nodes + (cluster_cpus-cpus)/cluster_cpus) / 2
        pytest.param(1, 2, True, (), 0.75, id="small: (3/4 + 6/8) / 2"),
        pytest.param(4, 8, True, (), 0.0, id="small: whole cluster"),
        pytest.param(6, 4, True, (), 0.25, id="small: more nodes than exist, (0 + 4/8) / 2"),
        # relative to time: max(min_nodes*cluster_cpus/nodes, cpus) / limit / cluster_cpus
        pytest.param(1, 2, False, ("SMALL_RELATIVE_TO_TIME",), 2 / 60 / 8, id="relative"),
        pytest.param(1, 2, True, ("SMALL_RELATIVE_TO_TIME",), 1 - 2 / 60 / 8, id="relative small"),
        pytest.param(2, 1, False, ("SMALL_RELATIVE_TO_TIME",), 4 / 60 / 8, id="relative nodes"),
    ],
)
def test_job_size(
    min_nodes: int, cpus: int, favor_small: bool, flags: tuple[str, ...], size: float
) -> None:
    config = PriorityConfig(favor_small=favor_small, flags=frozenset(flags))
    job = pjob(min_nodes=min_nodes, cpus=cpus, time_limit=60)
    assert factors(job, "debug", NOW, cluster(config)).job_size == pytest.approx(size)


def test_job_size_relative_uses_partition_limit_without_one() -> None:
    config = PriorityConfig(flags=frozenset({"SMALL_RELATIVE_TO_TIME"}))
    # No time limit: the partition's MaxTime (60 minutes) -> 2 / 60 / 8.
    got = factors(pjob(time_limit=-1), "debug", NOW, cluster(config))
    assert got.job_size == pytest.approx(2 / 60 / 8)


def test_job_size_without_nodes_is_zero() -> None:
    assert factors(pjob(), "debug", NOW, cluster(nodes=0)).job_size == 0.0


# ---------------------------------------------------------------- partition, QOS, TRES
@pytest.mark.parametrize(
    ("partition", "flags", "value"),
    [
        pytest.param("debug", (), 0.25, id="1 of 4"),  # PriorityJobFactor / max
        pytest.param("big", (), 1.0, id="the largest"),
        pytest.param("zero", (), 0.0, id="factor 0"),
        pytest.param("gone", (), 0.0, id="unknown partition"),
        pytest.param("big", ("NO_NORMAL_PART",), 4.0, id="raw"),
    ],
)
def test_partition_factor(partition: str, flags: tuple[str, ...], value: float) -> None:
    config = PriorityConfig(flags=frozenset(flags))
    assert factors(pjob(), partition, NOW, cluster(config)).partition_factor == value


@pytest.mark.parametrize(
    ("qos", "priorities", "value"),
    [
        pytest.param("normal", {}, 0.0, id="every QOS 0"),
        pytest.param("normal", {"normal": 10, "high": 100}, 0.1, id="10 of 100"),
        pytest.param("high", {"normal": 10, "high": 100}, 1.0, id="the highest"),
    ],
)
def test_qos_factor(qos: str, priorities: dict[str, int], value: float) -> None:
    # qos priority / the largest qos priority
    got = factors(pjob(qos=qos), "debug", NOW, cluster(qos_priority=priorities))
    assert got.qos_factor == pytest.approx(value)


def test_tres_factors_over_partition_totals() -> None:
    # PriorityWeightTRES=CPU=1000,Mem=2000: 2 of 8 CPUs, 4000 of 16000 MiB -> .25 each,
    # weighted 250 and 500. The weights come in Slurm's TRES order (cpu before mem).
    config = PriorityConfig(weight_tres=(("mem", 2000.0), ("cpu", 1000.0)))
    got = factors(pjob(), "debug", NOW, cluster(config))
    assert got.tres == (("cpu", 0.25), ("mem", 0.25))
    assert got.weighted_tres == (("cpu", 250.0), ("mem", 500.0))
    assert got.priority == 750


def test_tres_factor_raw_and_missing_totals() -> None:
    config = PriorityConfig(weight_tres=(("cpu", 1.0), ("gres/gpu", 5.0)))
    assert factors(pjob(), "zero", NOW, cluster(config)).tres == (("cpu", 0.0), ("gres/gpu", 0.0))
    raw = replace(config, flags=frozenset({"NO_NORMAL_TRES"}))
    assert factors(pjob(), "debug", NOW, cluster(raw)).tres == (("cpu", 2.0), ("gres/gpu", 0.0))


def test_fairshare_factor_comes_from_the_tree() -> None:
    shares = {("physics", "alice"): 0.75}
    assert factors(pjob(), "debug", NOW, cluster(fairshare=shares)).fairshare == 0.75
    assert factors(pjob(user="bob"), "debug", NOW, cluster(fairshare=shares)).fairshare == 0.0


# ---------------------------------------------------------------- the sum
WEIGHTED = PriorityConfig(
    weight_age=1000,
    weight_fairshare=10000,
    weight_job_size=1000,
    weight_partition=1000,
    weight_qos=0,
)


@pytest.mark.parametrize(
    ("changes", "priority"),
    [
        # age .5*1000 + fairshare .75*10000 + size .25*1000 + partition .25*1000 = 8500
        pytest.param({}, 8500, id="sum of weighted factors"),
        pytest.param({"nice": 100}, 8400, id="minus nice"),
        pytest.param({"nice": -100}, 8600, id="negative nice adds"),
        pytest.param({"nice": 100000}, 1, id="at least 1"),
        pytest.param({"held": True}, 0, id="held"),
        pytest.param({"admin_priority": 42}, 42, id="administrator's priority"),
        pytest.param({"admin_priority": 42, "held": True}, 0, id="held beats administrator"),
    ],
)
def test_priority(changes: dict[str, object], priority: int) -> None:
    job = pjob(accrue_time=NOW - WEEK // 2, **changes)
    shares = {("physics", "alice"): 0.75}
    got = factors(job, "debug", NOW, cluster(WEIGHTED, fairshare=shares))
    assert got.priority == priority
    assert job_priority(job, NOW, cluster(WEIGHTED, fairshare=shares)) == priority


def test_priority_truncates_and_clips() -> None:
    # 1/3 * 1000 = 333.33 -> 333 (Slurm's uint32 cast); a huge sum -> 2**32 - 1.
    config = PriorityConfig(weight_job_size=1000)
    job = pjob(min_nodes=1, cpus=0)
    got = factors(job, "debug", NOW, cluster(config, nodes=3))
    assert got.job_size == pytest.approx(1 / 3)
    assert got.priority == 333
    huge = PriorityConfig(weight_age=MAX_PRIORITY, weight_fairshare=MAX_PRIORITY)
    old = pjob(accrue_time=NOW - WEEK)
    assert (
        factors(old, "debug", NOW, cluster(huge, fairshare={("physics", "alice"): 1})).priority
        == MAX_PRIORITY
    )


def test_administrator_priority_zeroes_the_factors() -> None:
    got = factors(pjob(admin_priority=5, accrue_time=NOW - WEEK), "debug", NOW, cluster(WEIGHTED))
    assert (got.direct, got.age, got.weighted_age, got.priority) == (5, 0.0, 0.0, 5)


def test_one_priority_per_partition() -> None:
    # Partition factor 1/4 in debug, 4/4 in big: 250 and 1000 with PriorityWeightPartition=1000.
    config = PriorityConfig(weight_partition=1000)
    rows = job_priorities(pjob(partitions=("debug", "big")), NOW, cluster(config))
    assert [(row.partition, row.priority) for row in rows] == [("debug", 250), ("big", 1000)]
    assert job_priority(pjob(partitions=("debug", "big")), NOW, cluster(config)) == 250


def test_weights_follow_the_configuration() -> None:
    config = PriorityConfig(
        weight_age=1, weight_assoc=2, weight_fairshare=3, weight_job_size=4,
        weight_partition=5, weight_qos=6, weight_tres=(("gres/gpu", 9.0), ("cpu", 7.0)),
        weight_tres_text="GRES/gpu=9,CPU=7",
    )  # fmt: skip
    assert Weights.from_config(config) == Weights(
        1, 2, 3, 4, 5, 6, (("cpu", 7.0), ("gres/gpu", 9.0)), "GRES/gpu=9,CPU=7"
    )


# ---------------------------------------------------------------- priority/basic
@pytest.mark.parametrize(
    ("lowest", "nice", "priority"),
    [
        pytest.param(None, 0, 4294901759, id="first job: 0xffff0000 - 1"),
        pytest.param(4294901759, 0, 4294901758, id="next job"),
        pytest.param(100, 10, 89, id="minus nice"),
        pytest.param(2, 0, 1, id="at least 1"),
        pytest.param(2, 50, 1, id="nice cannot reach 0"),
    ],
)
def test_basic_priority(lowest: int | None, nice: int, priority: int) -> None:
    assert basic_priority(lowest, nice) == priority


# ---------------------------------------------------------------- from a Job
def test_priority_job_from_job() -> None:
    job = Job(
        job_id=12,
        name="x",
        uid=1000,
        gid=100,
        user="alice",
        group="users",
        state=JobState.PENDING,
        reason=Reason.NONE,
        submit_time=NOW - 60,
        partitions=("debug", "big"),
        eligible_time=NOW - 30,
        num_tasks=4,
        cpus_per_task=2,
        min_nodes=2,
        mem_per_cpu=100,
        nice=5,
        time_limit=30,
    )
    got = PriorityJob.from_job(job)
    assert got == PriorityJob(
        job_id=12,
        user="alice",
        account="users",
        partitions=("debug", "big"),
        nice=5,
        accrue_time=NOW - 30,
        submit_time=NOW - 60,
        min_nodes=2,
        cpus=8,
        time_limit=30,
        tres=(("cpu", 8), ("mem", 800), ("node", 2), ("billing", 8)),
    )
    assert account_of(replace(job, account="physics")) == "physics"
    held = PriorityJob.from_job(replace(job, held="user"))
    assert (held.held, held.accrue_time) == (True, 0)


# ---------------------------------------------------------------- properties
_JOBS = st.builds(
    pjob,
    accrue_time=st.integers(0, NOW + DAY),
    min_nodes=st.integers(1, 10),
    cpus=st.integers(0, 64),
    time_limit=st.integers(-1, 10**6),
    nice=st.integers(-(10**6), 10**6),
    partitions=st.sampled_from([("debug",), ("big", "debug"), ("zero",), ("gone",)]),
)
_CONFIGS = st.builds(
    PriorityConfig,
    weight_age=st.integers(0, 10**6),
    weight_fairshare=st.integers(0, 10**6),
    weight_job_size=st.integers(0, 10**6),
    weight_partition=st.integers(0, 10**6),
    weight_tres=st.sampled_from([(), (("cpu", 1000.0), ("mem", 0.5))]),
    favor_small=st.booleans(),
    max_age=st.integers(0, 4 * WEEK),
    flags=st.sampled_from([frozenset(), frozenset({"SMALL_RELATIVE_TO_TIME"})]),
)


@given(_JOBS, _CONFIGS, st.floats(0, 1), st.integers(0, 16), st.integers(0, 128))
def test_factors_are_between_0_and_1(
    job: PriorityJob, config: PriorityConfig, share: float, nodes: int, cpus: int
) -> None:
    where = cluster(config, nodes=nodes, cpus=cpus, fairshare={("physics", "alice"): share})
    for row in job_priorities(job, NOW, where):
        values = [row.age, row.fairshare, row.job_size, row.partition_factor, row.qos_factor]
        values += [factor for _, factor in row.tres]
        assert all(0.0 <= value <= 1.0 for value in values), row
        assert 1 <= row.priority <= MAX_PRIORITY


@given(_JOBS, _CONFIGS, st.integers(0, 4 * WEEK))
def test_waiting_longer_never_lowers_priority(
    job: PriorityJob, config: PriorityConfig, later: int
) -> None:
    where = cluster(config)
    assert job_priority(job, NOW + later, where) >= job_priority(job, NOW, where)


def test_factors_record_is_frozen() -> None:
    row = PriorityFactors(1, "debug", "normal", Weights())
    with pytest.raises(AttributeError):
        row.age = 1.0  # type: ignore[misc]


def test_cluster_from_config() -> None:
    conf = parse(
        "ClusterName=c\nSlurmctldHost=h\nPriorityWeightPartition=100\n"
        "NodeName=n[1-2] CPUs=4 RealMemory=1000 Gres=gpu:a100:2\n"
        "NodeName=n3 CPUs=8 RealMemory=4000\n"
        "PartitionName=gpu Nodes=n[1-2] PriorityJobFactor=2 MaxTime=60\n"
        "PartitionName=all Nodes=ALL\n",
        "slurm.conf",
    )
    where = Cluster.from_config(conf, {("a", "u"): 0.5})
    assert (where.nodes, where.cpus, where.max_partition_factor) == (3, 16, 2)
    assert where.partitions["gpu"] == PartitionFacts(
        "gpu",
        priority_job_factor=2,
        max_time=60,
        tres=(("cpu", 8), ("mem", 2000), ("node", 2), ("billing", 8), ("gres/gpu", 4)),
    )
    assert where.partitions["all"].total("cpu") == 16
    assert where.weights.partition == 100
    assert where.fairshare == {("a", "u"): 0.5}
    assert Cluster.from_config(conf, active_nodes=2).nodes == 2
