"""Every job is given CPU ids on its nodes (controller.core.devices), as cons_tres does:
the lowest free ones by whole cores, never another job's unless both share them
(OverSubscribe), checked again at commit, freed at the end, kept over a restart."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from controller import jobstate
from controller.core import schedule
from controller.core.devices import lowest_free, mask
from controller.jobspec import from_fields
from controller.principal import principal_for
from controller.store import JobStore
from tests.unit.test_store_resources import store_of

CONF = """\
ClusterName=test
SlurmctldHost=ctl
FirstJobId=100
NodeName=c1 CPUs=4 RealMemory=1000
NodeName=h1 CPUs=8 Sockets=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=1000
NodeName=s1 CPUs=4 RealMemory=1000
PartitionName=p Nodes=c1 Default=YES
PartitionName=ht Nodes=h1
PartitionName=shared Nodes=s1 OverSubscribe=FORCE:2
"""
SPEC = {"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"}
ROOT = principal_for(0, 0)


def _store(path: Path) -> JobStore:
    return store_of(path, CONF, {"c1": 4, "h1": 8, "s1": 4})


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return _store(tmp_path)


def _submit(store: JobStore, cpus: int, partition: str = "p") -> int:
    fields = {**SPEC, "partitions": [partition], "cpus_per_task": cpus}
    return store.submit(from_fields(fields), ROOT, now=100).job.job_id


def test_the_lowest_free_cpus_are_taken_by_whole_cores() -> None:
    assert lowest_free(8, 1, 0, 3) == [0, 1, 2]
    assert lowest_free(8, 1, mask({0, 2}), 3) == [1, 3, 4]
    # Two threads a core: a core with one thread taken is passed over...
    assert lowest_free(8, 2, mask({1}), 2) == [2, 3]
    # ...unless whole cores are too few: then single free CPUs, lowest first.
    assert lowest_free(4, 2, mask({1, 3}), 2) == [0, 2]
    assert lowest_free(4, 1, mask({0, 1, 2}), 2) == [3]  # too few: the caller refuses


def test_jobs_on_one_node_get_disjoint_cpus_and_an_ending_frees_them(store: JobStore) -> None:
    first, second, third = (_submit(store, 2) for _ in range(3))
    started = store.commit(schedule(store.snapshot(), 110))
    assert [(j.job_id, j.cpu_ids) for j in started] == [(first, ((0, 1),)), (second, ((2, 3),))]
    store.post(first, jobstate.Finish(120, 0, "exited"))
    started = store.commit(schedule(store.snapshot(), 130))
    assert [(j.job_id, j.cpu_ids) for j in started] == [(third, ((0, 1),))]


def test_cores_of_two_threads_fill_socket_zero_first(store: JobStore) -> None:
    one, two, four = (_submit(store, n, "ht") for n in (1, 2, 4))
    store.commit(schedule(store.snapshot(), 110))
    # A 1-CPU job gets a whole core (2 threads), as cons_tres allocates cores.
    assert store.jobs[one].cpu_ids == ((0, 1),)
    assert store.jobs[two].cpu_ids == ((2, 3),)  # socket 0's second core
    assert store.jobs[four].cpu_ids == ((4, 5, 6, 7),)  # socket 1


def test_sharing_jobs_take_idle_cpus_first_then_share_them(store: JobStore) -> None:
    ids = [_submit(store, 2, "shared") for _ in range(4)]
    store.commit(schedule(store.snapshot(), 110))
    assert [store.jobs[i].cpu_ids for i in ids] == [((0, 1),), ((2, 3),), ((0, 1),), ((2, 3),)]


def test_commit_refuses_a_start_whose_cpus_were_taken_meanwhile(store: JobStore) -> None:
    early, late = _submit(store, 2), _submit(store, 2)
    plan = schedule(store.snapshot(), 110)
    assert [s.cpu_ids for s in plan.starts] == [((0, 1),), ((2, 3),)]
    first, second = plan.starts
    assert [j.job_id for j in store.commit(replace(plan, starts=(first,)))] == [early]
    # A plan made before that commit, when CPUs 0-1 were free, names them for ``late``:
    # the CPU count still fits, the ids do not.
    clash = replace(plan, starts=(replace(second, cpu_ids=((0, 1),)),))
    assert store.commit(clash) == []
    assert store.jobs[late].state is jobstate.JobState.PENDING
    assert [j.cpu_ids for j in store.commit(replace(plan, starts=(second,)))] == [((2, 3),)]


def test_cpu_ids_survive_a_restart(store: JobStore, tmp_path: Path) -> None:
    first = _submit(store, 2)
    store.commit(schedule(store.snapshot(), 110))
    asyncio.run(store.flush())
    again = _store(tmp_path)
    assert again.jobs[first].cpu_ids == ((0, 1),)
    second = _submit(again, 2)
    again.commit(schedule(again.snapshot(), 120))
    assert again.jobs[second].cpu_ids == ((2, 3),)
