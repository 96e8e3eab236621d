"""``scontrol update job``: keys parsed once into a typed update, then applied to a job."""

from __future__ import annotations

import pytest

from controller.jobstate import JobState
from controller.jobupdate import JobUpdate, NodeCount, changes, parse
from corral import errors
from corral.errors import SlurmError
from tests.unit.scenario import NOW, job


def test_keys_in_any_case_become_typed_fields() -> None:
    update = parse(
        {
            "TimeLimit": "1:00:00",
            "Partition": "gpu,batch",
            "NumNodes": "2-4",
            "MinMemoryCPU": "2G",
            "Nice": "-5",
            "JobName": "renamed",
            "Priority": "7",
            "Requeue": "0",
            "Dependency": "afterok:12",
        },
        NOW,
    )
    assert update == JobUpdate(
        time_limit=60,
        partitions=("gpu", "batch"),
        nodes=NodeCount(2, 4),
        mem_per_cpu=2048,
        nice=-5,
        name="renamed",
        admin_priority=7,
        requeue=False,
        dependency="afterok:12",
    )
    assert parse({"MinNodes": "3"}, NOW).nodes == NodeCount(3, None)  # the maximum kept
    assert parse({"NumNodes": "3"}, NOW).nodes == NodeCount(3, 3)
    assert parse({"NumNodes": "0"}, NOW).nodes == NodeCount(0, 0)  # expansion.merge's
    assert parse({"NumNodes": "ALL"}, NOW).nodes is None  # Slurm's: nothing changes
    assert parse({"StartTime": "now+60"}, NOW).begin_time == NOW + 60
    assert parse({"Switches": "2@1:30"}, NOW).switches == (2, 90)  # --switches' syntax
    assert parse({"Switches": "1"}, NOW).switches == (1, None)


@pytest.mark.parametrize(
    ("updates", "code"),
    [
        ({"TimeLimit": "soon"}, errors.ESLURM_INVALID_TIME_LIMIT),
        ({"Partition": ","}, errors.ESLURM_INVALID_PARTITION_NAME),
        ({"MinNodes": "0"}, errors.ESLURM_INVALID_NODE_COUNT),  # NumNodes=0: an expansion's
        ({"NumNodes": "4-2"}, errors.ESLURM_INVALID_NODE_COUNT),
        ({"NumNodes": "x"}, errors.ESLURM_INVALID_NODE_COUNT),
        ({"MinCPUsNode": "many"}, errors.EINVAL),
        ({"MinMemoryNode": "1Q"}, errors.EINVAL),
        ({"Nice": "high"}, errors.EINVAL),
        ({"Priority": "-1"}, errors.EINVAL),
        ({"BeginTime": "someday"}, errors.EINVAL),
        ({"Gres": "gpu:1"}, errors.EINVAL),
        ({"Switches": "two"}, errors.EINVAL),
        ({"Switches": "1@soon"}, errors.EINVAL),
    ],
)
def test_values_that_are_not_one_are_refused_with_slurms_error(
    updates: dict[str, str], code: int
) -> None:
    with pytest.raises(SlurmError) as refused:
        parse(updates, NOW)
    assert refused.value.code == code


def test_pending_only_fields_of_a_started_job_are_refused() -> None:
    running = job(1, state=JobState.RUNNING, start_time=NOW)
    # NumNodes= of a running job is a resize (tests/unit/test_elastic_store.py); MinNodes not.
    for updates in (
        {"Partition": "gpu"},
        {"Account": "a"},
        {"MinNodes": "2"},
        {"QOS": "q"},
        {"Switches": "1"},
    ):
        with pytest.raises(SlurmError) as refused:
            changes(running, parse(updates, NOW), privileged=True)
        assert refused.value.code == errors.ESLURM_JOB_NOT_PENDING
    assert changes(running, parse({"Comment": "c"}, NOW), privileged=False) == {"comment": "c"}


def test_a_longer_limit_a_lower_nice_and_a_priority_need_rights() -> None:
    pending = job(1, time_limit=30, nice=10)
    for updates in (
        {"TimeLimit": "60"},
        {"TimeLimit": "UNLIMITED"},
        {"Nice": "0"},
        {"Priority": "5"},
    ):
        with pytest.raises(SlurmError) as refused:
            changes(pending, parse(updates, NOW), privileged=False)
        assert refused.value.code == errors.ESLURM_ACCESS_DENIED
        assert changes(pending, parse(updates, NOW), privileged=True)
    assert changes(pending, parse({"TimeLimit": "10", "Nice": "20"}, NOW), privileged=False) == {
        "time_limit": 10,
        "nice": 20,
    }


def test_a_running_jobs_new_limit_moves_its_end() -> None:
    running = job(1, state=JobState.RUNNING, start_time=NOW, time_limit=30)
    assert changes(running, parse({"TimeLimit": "10"}, NOW), privileged=False) == {
        "time_limit": 10,
        "end_time": NOW + 600,
    }
    assert changes(running, parse({"TimeLimit": "-1"}, NOW), privileged=True)["end_time"] == 0


def test_node_counts_set_tasks_unless_tasks_were_asked_for() -> None:
    assert changes(job(1), parse({"NumNodes": "2-3"}, NOW), privileged=False) == {
        "min_nodes": 2,
        "max_nodes": 3,
        "nodes_given": True,
        "num_tasks": 2,
    }
    tasks = job(1, tasks_given=True, num_tasks=8, max_nodes=4)
    assert changes(tasks, parse({"MinNodes": "2"}, NOW), privileged=False) == {
        "min_nodes": 2,
        "max_nodes": 4,
        "nodes_given": True,
    }
    with pytest.raises(SlurmError) as refused:  # over the job's own maximum
        changes(tasks, parse({"MinNodes": "5"}, NOW), privileged=False)
    assert refused.value.code == errors.ESLURM_INVALID_NODE_COUNT


def test_one_kind_of_memory_replaces_the_other_and_empty_names_are_refused() -> None:
    update = parse({"MinMemoryCPU": "1G", "MinMemoryNode": "4G"}, NOW)
    assert changes(job(1), update, privileged=False) == {"mem_per_node": 4096, "mem_per_cpu": None}
    for key, code in (
        ("Account", errors.ESLURM_INVALID_ACCOUNT),
        ("QOS", errors.ESLURM_INVALID_QOS),
    ):
        with pytest.raises(SlurmError) as refused:
            changes(job(1), parse({key: ""}, NOW), privileged=True)
        assert refused.value.code == code
