"""The Why RPC's answer from a real JobStore: the recorded plan, PrivateData, partitions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller import whyviews
from controller.core import BackfillParams, schedule
from controller.jobspec import from_fields
from controller.journal import Journal
from controller.principal import Principal, principal_for
from controller.store import JobStore, Registration
from corral import errors
from corral.config import parse
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb

CONF = """\
ClusterName=test
SlurmctldHost=ctl
FirstJobId=100
PrivateData=jobs
NodeName=n1 CPUs=2 RealMemory=1000
NodeName=n2 CPUs=2 RealMemory=1000
PartitionName=batch Nodes=n1 Default=YES
PartitionName=open Nodes=n2
PartitionName=closed Nodes=n2 AllowGroups=nosuchgroup
"""
SPEC = {"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp", "exclusive": True}
ROOT = principal_for(0, 0)
ALICE = principal_for(4242, 4242)  # ordinary users (the tests run as root or another uid)
BOB = principal_for(4343, 4343)
NOW = 1000


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
    store.load(0.0)
    for name in ("n1", "n2"):
        store.node_registered(Registration(name, 2, 1000), monotonic=1.0, now=10)
    return store


def _backfill(store: JobStore, now: int) -> None:
    """What the loop does on a backfill pass."""
    snap, params = store.snapshot(), BackfillParams()
    plan = schedule(snap, now, params)
    store.commit(plan)
    store.backfill_pass = (snap, plan, params)


def _why(store: JobStore, job_id: int, who: Principal, now: int = NOW + 5) -> pb.WhyReply:
    return asyncio.run(whyviews.why(store, job_id, who, now))


def test_the_answer_is_the_recorded_plan_within_private_data(store: JobStore) -> None:
    bob = store.submit(from_fields({**SPEC, "time_limit": 10}), BOB, now=NOW).job.job_id
    _backfill(store, NOW)
    mine = store.submit(from_fields({**SPEC, "time_limit": 5}), ALICE, now=NOW + 1).job.job_id
    _backfill(store, NOW + 2)
    job = store.jobs[mine]
    assert job.expected_start > NOW

    reply = _why(store, mine, ALICE)
    assert (reply.state, reply.reason, reply.partition) == ("PENDING", "Resources", "batch")
    assert (reply.expected_start, reply.expected_nodes) == (job.expected_start, "n1")
    assert reply.now == NOW + 2
    hidden = reply.blockers[0]
    assert (hidden.job_id, hidden.user, hidden.nodes, hidden.running) == (0, "", "n1", True)
    assert [s.option for s in reply.suggestions] == ["-p open"]
    assert _why(store, mine, ROOT).blockers[0].job_id == bob

    for who, job_id in ((BOB, mine), (ALICE, 999)):
        with pytest.raises(SlurmError) as refused:
            _why(store, job_id, who)
        assert refused.value.code == errors.ESLURM_INVALID_JOB_ID
    running = _why(store, bob, BOB)
    assert (running.state, running.nodes) == ("RUNNING", "n1")


def test_a_job_newer_than_the_last_pass_is_planned_afresh(store: JobStore) -> None:
    store.submit(from_fields({**SPEC, "time_limit": 10}), BOB, now=NOW)
    _backfill(store, NOW)
    newer = store.submit(from_fields({**SPEC, "time_limit": 5}), ALICE, now=NOW + 1).job.job_id
    assert store.jobs[newer].expected_start == 0  # no pass has planned it yet
    reply = _why(store, newer, ALICE, now=NOW + 3)
    assert reply.now == NOW + 3 and reply.expected_start >= NOW + 600
