"""An array is one record until its tasks start: submission, splits, restarts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller.core import schedule
from controller.jobspec import from_fields
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral.config import parse

CONF = """\
ClusterName=test
SlurmctldHost=ctl
FirstJobId=100
NodeName=n[1-2] CPUs=2 RealMemory=1000
PartitionName=p Nodes=ALL Default=YES
"""
SPEC = {"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"}
ROOT = principal_for(0, 0)


def _store(path: Path) -> JobStore:
    store = JobStore(parse(CONF, str(path / "slurm.conf")), Journal(str(path / "state")))
    store.load(0.0)
    return store


def ready(path: Path) -> JobStore:
    """A store whose two nodes have registered (test_store_hetjobs.py uses it too)."""
    store = _store(path)
    for name in ("n1", "n2"):
        store.node_registered(Registration(name, 2, 1000), monotonic=1.0, now=10)
    return store


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return ready(tmp_path)


def test_a_thousand_task_array_is_one_record_and_one_job_id(store: JobStore) -> None:
    admitted = store.submit(from_fields({**SPEC, "array": "1-1000"}), ROOT, now=100)
    assert admitted.tasks == 1000
    assert list(store.jobs) == [100]
    assert store.jobs[100].array_pending == "1-1000"
    assert store.next_job_id == 101
    assert store.counters["submitted"] == 1000


def test_tasks_get_new_job_ids_as_they_start_and_the_last_takes_the_arrays(
    store: JobStore,
) -> None:
    store.submit(from_fields({**SPEC, "array": "1-6"}), ROOT, now=100)
    store.submit(from_fields(SPEC), ROOT, now=100)  # job 101, after the array
    started = store.commit(schedule(store.snapshot(), 110))
    # Two nodes with 2 CPUs each: four tasks start, each with a new id.
    assert [(j.job_id, j.array_task_id) for j in started] == [
        (102, 1),
        (103, 2),
        (104, 3),
        (105, 4),
    ]
    assert store.jobs[100].array_pending == "5-6"
    assert store.jobs[100].reason.name == "RESOURCES"
    five = store.split_task(store.jobs[100], 5)
    six = store.split_task(store.jobs[100], 6)
    assert (five.job_id, six.job_id) == (106, 100)
    assert six.array_pending == "" and six.array_task_id == 6
    assert store.next_job_id == 107


def test_the_throttle_limits_tasks_started_in_one_pass(store: JobStore) -> None:
    store.submit(from_fields({**SPEC, "array": "1-6%3"}), ROOT, now=100)
    started = store.commit(schedule(store.snapshot(), 110))
    assert [j.array_task_id for j in started] == [1, 2, 3]
    assert store.jobs[100].reason.name == "JOB_ARRAY_TASK_LIMIT"


def test_splits_survive_a_restart(store: JobStore, tmp_path: Path) -> None:
    store.submit(from_fields({**SPEC, "array": "1-3", "hold": True}), ROOT, now=100)
    store.split_task(store.jobs[100], 2)
    asyncio.run(store.flush())
    store.journal.close()
    again = _store(tmp_path)
    assert {i: (j.array_task_id, j.array_pending) for i, j in again.jobs.items()} == {
        100: (None, "1,3"),
        101: (2, ""),
    }
    assert again.next_job_id == 102
    assert again.payload(again.jobs[101]) is not None
