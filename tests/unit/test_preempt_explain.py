"""Every preemption explained, from a real JobStore through the scheduler: the
victim's SystemComment, PreemptEligibleTime and PreemptTime in ``scontrol show
job``, ``corral why`` of the waiting job, and ``Checkpointed=`` updates."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from cli import why as why_cli
from cli.jobs import record
from cli.nodes.record import partition_lines
from controller import preemption, views, whyviews
from controller.core import schedule
from controller.jobcontrol import JobControl
from controller.jobspec import from_fields
from controller.jobstate import JobState
from controller.jobupdate import JobUpdate, changes, parse
from controller.journal import Journal
from controller.principal import Principal, principal_for
from controller.store import JobStore, Registration
from corral import errors, timefmt
from corral.config import parse as parse_conf
from corral.errors import SlurmError
from corral.whydoc import why_document
from corral.wire import codec
from corral.wire import corral_pb2 as pb
from tests.unit.scenario import NOW, job

CONF = """\
ClusterName=test
SlurmctldHost=ctl
PrivateData=jobs
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PreemptExemptTime=00:00:20
NodeName=n1 CPUs=2 RealMemory=1000
PartitionName=low Nodes=n1 GraceTime=30 Default=YES
PartitionName=high Nodes=n1 PriorityTier=2
"""
ALICE = principal_for(4242, 4242)
BOB = principal_for(4343, 4343)
SPEC = {"name": "a", "script": "#!/bin/sh\n", "work_dir": "/tmp", "exclusive": True}


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    store = JobStore(parse_conf(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
    store.load(0.0)
    store.node_registered(Registration("n1", 2, 1000), monotonic=1.0, now=10)
    return store


def cycle(store: JobStore, now: int) -> None:
    """The loop's steps that matter here."""
    plan = schedule(store.snapshot(), now)
    store.commit(plan)
    preemption.begin(store, plan)


def shown(store: JobStore, job_id: int, now: int) -> str:
    info = views.job_info(store.jobs[job_id], store)
    return record.record(codec.decode("JobInfo", info.SerializeToString()), now)


def test_a_preemption_is_explained_where_each_user_looks(store: JobStore) -> None:
    victim = store.submit(from_fields(SPEC), BOB, now=1000).job.job_id
    cycle(store, 1000)
    assert store.jobs[victim].state is JobState.RUNNING
    stamp = timefmt.format_timestamp
    assert f"PreemptEligibleTime={stamp(1020)} PreemptTime=None" in shown(store, victim, 1001)

    urgent = from_fields({**SPEC, "partitions": ["high"]})
    waiting = store.submit(urgent, ALICE, now=1010).job.job_id
    cycle(store, 1010)
    assert store.jobs[victim].preempt_time == 0  # within its PreemptExemptTime
    cycle(store, 1020)
    held = store.jobs[victim]
    assert (held.state, held.preempt_time, held.end_time) == (JobState.RUNNING, 1020, 1050)
    text = shown(store, victim, 1021)
    assert f"PreemptEligibleTime={stamp(1020)} PreemptTime={stamp(1020)}" in text
    assert f"SystemComment=Preempted (requeue) for job {waiting} at {stamp(1020)}" in text
    cycle(store, 1025)
    assert store.jobs[victim].preempt_time == 1020  # chosen once: no new warning

    reply = asyncio.run(whyviews.why(store, waiting, ALICE, 1025))
    (entry,) = reply.preempting
    assert (entry.job_id, entry.user, entry.state) == (0, "", "RUNNING")  # PrivateData
    assert (entry.nodes, entry.grace_end) == ("n1", 1050)
    doc = why_document(codec.decode("WhyReply", reply.SerializeToString()))
    line = why_cli.text(doc)
    assert "Preempting a job on n1, now RUNNING, its GraceTime ends" in line
    assert "PriorityTier 2 over 1 of partition low; GraceTime 30s" in line
    root = asyncio.run(whyviews.why(store, waiting, principal_for(0, 0), 1025))
    assert root.preempting[0].job_id == victim


def test_checkpointed_is_the_running_jobs_and_never_in_the_future() -> None:
    update = parse({"Checkpointed": "now"}, NOW)
    assert update == JobUpdate(checkpointed=NOW)
    running = job(1, state=JobState.RUNNING, start_time=NOW - 50)
    assert changes(running, update, privileged=False) == {"checkpointed": NOW}
    later = parse({"checkpointed": "now+1hour"}, NOW)
    assert later.checkpointed == NOW
    for state, code in (
        (JobState.PENDING, errors.ESLURM_JOB_PENDING),
        (JobState.COMPLETED, errors.ESLURM_ALREADY_DONE),
    ):
        with pytest.raises(SlurmError) as refused:
            changes(job(1, state=state), update, privileged=False)
        assert refused.value.code == code
    with pytest.raises(SlurmError):
        parse({"Checkpointed": "whenever"}, NOW)


def test_a_checkpoint_shows_in_scontrol_show_job(store: JobStore) -> None:
    victim = store.submit(from_fields(SPEC), BOB, now=1000).job.job_id
    cycle(store, 1000)
    store.update(replace(store.jobs[victim], checkpointed=1005))
    assert f"Checkpointed={timefmt.format_timestamp(1005)}" in shown(store, victim, 1006)


def test_scontrol_show_partition_gives_its_grace_time_and_mode(store: JobStore) -> None:
    low, high = (
        codec.decode("PartitionInfo", views.partition_info(p, store).SerializeToString())
        for p in store.conf.partitions
    )
    assert "GraceTime=30 " in " ".join(partition_lines(low))
    assert "OverTimeLimit=NONE PreemptMode=REQUEUE" in partition_lines(high)  # slurm.conf's
    plain = parse_conf(CONF.replace("PreemptType=preempt/partition_prio\n", ""), "x")
    assert views.preempt_mode_shown(plain.partitions[0], plain) == "OFF"


def test_only_the_owner_or_an_operator_reports_a_checkpoint(store: JobStore) -> None:
    victim = store.submit(from_fields(SPEC), BOB, now=1000).job.job_id
    cycle(store, 1000)
    control = JobControl(store)

    def update(who: Principal) -> int:
        request = pb.JobControlRequest(
            action="update", job_ids=[str(victim)], updates={"Checkpointed": "now"}
        )
        results = control.control(request, who, 1010).results  # none: it succeeded
        return results[0].code if results else 0

    assert update(ALICE) == errors.ESLURM_ACCESS_DENIED
    assert store.jobs[victim].checkpointed == 0
    assert update(BOB) == 0
    assert store.jobs[victim].checkpointed == 1010
