"""Each run of a requeued job is an accounting record of its own, as slurmdbd keeps them
(``sacct -D``): the run a requeue ended closes in the state it ended in, and the next
run is filed under the requeue's time."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller import accounting, views
from controller.core import schedule
from controller.jobspec import from_fields
from controller.jobstate import Event, Finish, NodeFail, Requeue
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral.config import parse
from corral.wire import codec

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n1 CPUs=4 RealMemory=4000
PartitionName=p Nodes=ALL Default=YES
"""
SPEC = from_fields({"name": "r", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"})
USER = principal_for(1000, 1000)


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))
    store.node_registered(Registration("n1", 4, 4000), monotonic=1.0, now=10)
    store.durable.recorder = lambda job: accounting.record(store, job)
    return store


def runs(store: JobStore) -> list[tuple[int, str, list[str], int, int]]:
    """dbd's rows as (submit time, state, flags, start, end): the newest record per key."""
    asyncio.run(store.flush())
    newest: dict[tuple[int, int], dict[str, Any]] = {}
    for data in store.durable.outbox.values():
        info = codec.decode("JobInfo", data)
        newest[info["job_id"], info["submit_time"]] = info
    return [
        (i["submit_time"], i["state"], i["state_flags"], i["start_time"], i["end_time"])
        for _, i in sorted(newest.items())
    ]


@pytest.mark.parametrize(
    ("preempted", "events", "closed"),
    [
        (False, [Requeue(200), Finish(201, 15, "exited")], "REQUEUED"),
        (True, [Requeue(200), Finish(201, 15, "exited")], "PREEMPTED"),
        (False, [NodeFail(201, requeue=True)], "NODE_FAIL"),
    ],
)
def test_a_requeue_closes_the_run_and_files_the_next_apart(
    store: JobStore, preempted: bool, events: list[Event], closed: str
) -> None:
    job_id = store.submit(SPEC, USER, now=100).job.job_id
    store.commit(schedule(store.snapshot(), 110))
    if preempted:
        store.update(replace(store.jobs[job_id], preempt_time=190))
    for event in events:
        store.post(job_id, event)
    first, second = runs(store)
    assert first[:2] == (100, closed) and first[3:] == (110, 201)
    assert second[:2] == (201, "PENDING")
    # Slurm's SubmitTime is the requeue's from then on.
    assert views.job_info(store.jobs[job_id], store).submit_time == 201
    store.commit(schedule(store.snapshot(), 400))
    store.post(job_id, Finish(450, 0, "exited"))
    assert runs(store)[1] == (201, "COMPLETED", [], 400, 450)
