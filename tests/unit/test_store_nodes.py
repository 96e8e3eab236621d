"""JobStore's node bookkeeping: registration, shortfalls, admin states."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller.jobspec import from_fields
from controller.jobstate import Cancel
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral.config import parse

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n1 CPUs=8 RealMemory=16000
PartitionName=p Nodes=ALL Default=YES
"""


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))


@pytest.mark.parametrize(
    ("cpus", "memory", "drained", "reason"),
    [
        (8, 16000, False, ""),
        (16, 32000, False, ""),
        (4, 16000, True, "Low socket*core*thread count, Low CPUs (4 < 8)"),
        (8, 8000, True, "Low RealMemory (reported:8000 < 100.00% of configured:16000)"),
    ],
    ids=["as configured", "more than configured", "fewer cpus", "less memory"],
)
def test_registration_drains_a_node_short_of_its_configuration(
    store: JobStore, cpus: int, memory: int, drained: bool, reason: str
) -> None:
    store.node_registered(Registration("n1", cpus, memory), monotonic=1.0, now=100)
    node = store.nodes["n1"]
    assert (node.state, node.responding, node.drain, node.reason) == ("UP", True, drained, reason)


def test_admin_drain_survives_reregistration_and_resume_clears_it(store: JobStore) -> None:
    store.node_registered(Registration("n1", 8, 16000), monotonic=1.0, now=100)
    store.set_node_admin_state(["n1"], "DRAIN", "disk", principal_for(0, 0), 200)
    store.node_registered(Registration("n1", 8, 16000), monotonic=2.0, now=300)
    assert (store.nodes["n1"].drain, store.nodes["n1"].reason) == (True, "disk")
    store.set_node_admin_state(["n1"], "RESUME", "", principal_for(0, 0), 400)
    assert (store.nodes["n1"].drain, store.nodes["n1"].state) == (False, "UP")


def test_down_node_stays_down_without_return_to_service(store: JobStore) -> None:
    store.node_registered(Registration("n1", 8, 16000), monotonic=1.0, now=100)
    store.set_node_down("n1", "Not responding", "slurm", 0, 200)
    store.node_registered(Registration("n1", 8, 16000), monotonic=2.0, now=300)
    assert store.nodes["n1"].state == "DOWN"


def test_purging_an_array_task_keeps_the_script_its_siblings_need(store: JobStore) -> None:
    """Array tasks share one payload; purging finished tasks must not take it."""
    spec = {"name": "a", "script": "#!/bin/sh\ntrue\n", "array": "1-2", "work_dir": "/tmp"}
    array = store.submit(from_fields(spec), principal_for(0, 0), now=100).job
    first = store.split_task(array, 1)
    second = store.split_task(store.jobs[array.job_id], 2)
    store.post(first.job_id, Cancel(now=110))
    assert store.purge(now=110 + store.conf.min_job_age) == [first.job_id]
    asyncio.run(store.flush())
    assert store.payload(second) is not None
    store.post(second.job_id, Cancel(now=120))
    assert store.purge(now=120 + store.conf.min_job_age) == [second.job_id]
    asyncio.run(store.flush())
    assert store.journal.payload(first.job_id) is None
