"""JobStore's accounting of what running jobs hold: GRES and CPUs shared by OverSubscribe."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller import jobstate
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
GresTypes=gpu
NodeName=g1 CPUs=4 RealMemory=1000 Gres=gpu:a100:1,gpu:v100:1
NodeName=c1 CPUs=2 RealMemory=1000
PartitionName=gpu Nodes=g1 Default=YES
PartitionName=shared Nodes=c1 OverSubscribe=FORCE:2
"""
SPEC = {"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"}
ROOT = principal_for(0, 0)


def store_of(path: Path, conf: str, nodes: dict[str, int]) -> JobStore:
    """A store of ``conf`` in ``path`` (its state loaded), ``nodes`` (name: CPUs) up."""
    store = JobStore(parse(conf, str(path / "slurm.conf")), Journal(str(path / "state")))
    store.load(0.0)
    for name, cpus in nodes.items():
        store.node_registered(Registration(name, cpus, 1000), monotonic=1.0, now=10)
    return store


def _store(path: Path) -> JobStore:
    return store_of(path, CONF, {"g1": 4, "c1": 2})


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return _store(tmp_path)


def _free_gpus(store: JobStore) -> int:
    return sum(count for _, _, count in store.snapshot().nodes["g1"].gres)


def test_gres_are_held_while_jobs_run_and_come_back(store: JobStore, tmp_path: Path) -> None:
    typed = store.submit(from_fields({**SPEC, "gres": "gpu:a100:1"}), ROOT, now=100).job.job_id
    untyped = store.submit(from_fields({**SPEC, "gres": "gpu:1"}), ROOT, now=100).job.job_id
    third = store.submit(from_fields({**SPEC, "gres": "gpu:1"}), ROOT, now=100).job.job_id
    started = store.commit(schedule(store.snapshot(), 110))
    assert [j.job_id for j in started] == [typed, untyped]
    assert store.jobs[third].reason is jobstate.Reason.RESOURCES
    assert _free_gpus(store) == 0
    # A restart recounts them from the running jobs.
    assert _free_gpus(_reloaded(store, tmp_path)) == 0
    store.post(typed, jobstate.Finish(120, 0, "exited"))
    assert _free_gpus(store) == 1
    assert [j.job_id for j in store.commit(schedule(store.snapshot(), 130))] == [third]
    assert _free_gpus(store) == 0


def test_recorded_allocation_is_what_the_store_counts(store: JobStore) -> None:
    job_id = store.submit(from_fields({**SPEC, "gres": "gpu:1"}), ROOT, now=100).job.job_id
    v100 = ((("gpu", "v100", 1),),)
    store.post(job_id, jobstate.Start(110, "gpu", ("g1",), (1,), (0,), 1, v100))
    assert store.jobs[job_id].gres_alloc == v100
    assert store.snapshot().nodes["g1"].gres == (("gpu", "a100", 1), ("gpu", "v100", 0))
    store.post(job_id, jobstate.Finish(120, 0, "exited"))
    assert store.snapshot().nodes["g1"].gres == (("gpu", "a100", 1), ("gpu", "v100", 1))


def test_commit_records_the_planned_gres(store: JobStore) -> None:
    store.submit(from_fields({**SPEC, "gres": "gpu:a100:1"}), ROOT, now=100)
    untyped = store.submit(from_fields({**SPEC, "gres": "gpu:1"}), ROOT, now=100).job.job_id
    store.commit(schedule(store.snapshot(), 110))
    assert store.jobs[untyped].gres_alloc == ((("gpu", "v100", 1),),)


def _reloaded(store: JobStore, tmp_path: Path) -> JobStore:
    asyncio.run(store.flush())
    again = _store(tmp_path)
    assert set(again.jobs) == set(store.jobs)
    return again


def test_cpus_shared_up_to_the_partition_count(store: JobStore) -> None:
    ids = [
        store.submit(
            from_fields({**SPEC, "partitions": ["shared"], "num_tasks": 2}), ROOT, now=100
        ).job.job_id
        for _ in range(3)
    ]
    started = store.commit(schedule(store.snapshot(), 110))
    assert [j.job_id for j in started] == ids[:2]  # FORCE:2: two jobs on each CPU
    view = store.snapshot().nodes["c1"]
    assert (view.free_cpus, view.shared, view.unshared, view.idle) == (
        0,
        (("shared", 4, 2),),
        False,
        False,
    )
    assert store.used("c1")[0] == 0  # held CPUs: none is held alone
    assert store.allocated_cpus("c1") == 2  # what scontrol shows as CPUAlloc
    store.post(ids[0], jobstate.Finish(120, 0, "exited"))
    assert store.snapshot().nodes["c1"].shared == (("shared", 2, 2),)
    assert [j.job_id for j in store.commit(schedule(store.snapshot(), 130))] == [ids[2]]
    store.post(ids[1], jobstate.Finish(140, 0, "exited"))
    store.post(ids[2], jobstate.Finish(140, 0, "exited"))
    view = store.snapshot().nodes["c1"]
    assert (view.free_cpus, view.shared, view.idle, store.allocated_cpus("c1")) == (2, (), True, 0)


def test_gpu_jobs_are_pinned_near_the_gpus_the_probe_placed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    # g1's agent probed its GPUs: the a100 (index 0) near CPUs 2-3, the v100 near 0-1.
    near = ((0, (2, 3)), (1, (0, 1)))
    store.node_registered(Registration("g1", 4, 1000, gpu_cpus=near), monotonic=2.0, now=20)
    a100 = store.submit(from_fields({**SPEC, "gres": "gpu:a100:1"}), ROOT, now=100).job.job_id
    v100 = store.submit(
        from_fields({**SPEC, "gres": "gpu:v100:1", "cpus_per_task": 2}), ROOT, now=100
    )
    store.commit(schedule(store.snapshot(), 110))
    assert store.jobs[a100].cpu_ids == ((2,),)
    assert store.jobs[v100.job.job_id].cpu_ids == ((0, 1),)
    # Pinned CPUs survive a restart, so the next pinned job avoids them.
    assert _reloaded(store, tmp_path).jobs[a100].cpu_ids == ((2,),)


def test_commit_rechecks_the_gres_a_start_takes(store: JobStore) -> None:
    # The plan gives g1's a100 to the first job; before it is committed another
    # job takes it (started by hand): the planned start no longer fits.
    planned = store.submit(from_fields({**SPEC, "gres": "gpu:a100:1"}), ROOT, now=100).job.job_id
    plan = schedule(store.snapshot(), 110)
    other = store.submit(from_fields({**SPEC, "gres": "gpu:a100:1"}), ROOT, now=100).job.job_id
    store.post(other, jobstate.Start(110, "gpu", ("g1",), (1,), (0,), 1, ((("gpu", "a100", 1),),)))
    assert store.commit(plan) == []
    assert store.jobs[planned].state is jobstate.JobState.PENDING
    assert [j.job_id for j in store.commit(schedule(store.snapshot(), 120))] == []
    store.post(other, jobstate.Finish(130, 0, "exited"))
    assert [j.job_id for j in store.commit(schedule(store.snapshot(), 140))] == [planned]


def test_commit_rechecks_a_sharing_start_against_its_partitions_count(store: JobStore) -> None:
    # c1 (2 CPUs, FORCE:2) takes two 2-CPU jobs of "shared"; a plan made before
    # two more started by hand no longer fits.
    sub = {**SPEC, "partitions": ["shared"], "num_tasks": 2}
    planned = store.submit(from_fields(sub), ROOT, now=100).job.job_id
    plan = schedule(store.snapshot(), 110)
    for _ in range(2):
        other = store.submit(from_fields(sub), ROOT, now=100).job.job_id
        store.post(other, jobstate.Start(110, "shared", ("c1",), (2,), (0,), 1))
    assert store.commit(plan) == []
    assert store.jobs[planned].state is jobstate.JobState.PENDING


def test_a_suspended_job_keeps_its_gpus_and_lends_its_cpus(store: JobStore) -> None:
    gpu_job = store.submit(from_fields({**SPEC, "gres": "gpu:2", "cpus_per_task": 4}), ROOT, 100)
    cpu_only = store.submit(from_fields({**SPEC, "cpus_per_task": 2}), ROOT, now=100).job.job_id
    waiting = store.submit(from_fields({**SPEC, "gres": "gpu:1"}), ROOT, now=100).job.job_id
    assert [j.job_id for j in store.commit(schedule(store.snapshot(), 110))] == [gpu_job.job.job_id]
    store.post(gpu_job.job.job_id, jobstate.Suspend(115))
    view = store.snapshot().nodes["g1"]
    assert (_free_gpus(store), view.free_cpus) == (0, 4)
    # A job that needs a GPU still waits; one that needs CPUs alone takes them.
    assert [j.job_id for j in store.commit(schedule(store.snapshot(), 120))] == [cpu_only]
    assert store.jobs[waiting].reason is jobstate.Reason.RESOURCES


def test_a_suspended_sharing_job_leaves_its_partitions_load(store: JobStore) -> None:
    spec = from_fields({**SPEC, "partitions": ["shared"], "num_tasks": 2})
    first = store.submit(spec, ROOT, now=100).job.job_id
    store.commit(schedule(store.snapshot(), 110))
    assert store.snapshot().nodes["c1"].shared == (("shared", 2, 2),)
    store.post(first, jobstate.Suspend(115))
    assert store.snapshot().nodes["c1"].shared == ()
    assert store.cpus_free_for(store.jobs[first])
    store.post(first, jobstate.Resume(120))
    assert store.snapshot().nodes["c1"].shared == (("shared", 2, 2),)
