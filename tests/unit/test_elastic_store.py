"""Elastic jobs carried out by the controller (issue 18, point 3): a pass's growth
and shrink become one ``Resize`` each, the ledger and the accounting records follow,
and the agents are told (``controller/elastic.py``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cli.jobs import record
from cli.sacct import query
from controller import accounting, elastic, views
from controller.core import schedule
from controller.effects import Effect, Resized
from controller.jobcontrol import JobControl
from controller.jobspec import from_fields
from controller.jobstate import (
    Cancel,
    Finish,
    InvalidTransition,
    JobState,
    Reason,
    Resize,
    Resume,
    Suspend,
    apply,
)
from controller.journal import Journal
from controller.model import Job
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral import errors
from corral.config import parse
from corral.wire import codec
from corral.wire import corral_pb2 as pb
from tests.unit.test_timefmt import utc  # noqa: F401  (autouse: timestamps in UTC)

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-3] CPUs=4 RealMemory=4000
PartitionName=p Nodes=ALL Default=YES
"""
ELASTIC = from_fields(
    {
        "name": "e",
        "script": "#!/bin/sh\ntrue\n",
        "work_dir": "/tmp",
        "min_nodes": 1,
        "max_nodes": 3,
        "elastic_signal": 28,
        "exclusive": True,
    }
)
WHOLE = from_fields({"name": "w", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"})
USER = principal_for(1000, 1000)


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))
    for name in ("n1", "n2", "n3"):
        store.node_registered(Registration(name, 4, 4000), monotonic=1.0, now=10)
    return store


def cycle(store: JobStore, now: int) -> list[Job]:
    """One pass as the loop makes it: schedule, commit, carry out resizes."""
    plan = schedule(store.snapshot(), now)
    store.commit(plan)
    return elastic.apply(store, plan)


def effects(store: JobStore) -> list[Effect]:
    sent: list[Effect] = []
    store.dispatch_to(sent.extend)
    asyncio.run(store.flush())
    return sent


def test_an_elastic_job_starts_with_the_free_nodes_and_grows_as_others_end(
    store: JobStore,
) -> None:
    blockers = [
        store.submit(replace(WHOLE, req_nodes=name, exclusive=True), USER, now=100).job
        for name in ("n2", "n3")
    ]
    cycle(store, 110)
    job = store.submit(ELASTIC, USER, now=120).job
    cycle(store, 130)
    assert store.jobs[job.job_id].nodes == ("n1",)  # what was free: at least its minimum
    effects(store)
    store.post(blockers[0].job_id, Cancel(140))
    cycle(store, 141)
    assert store.jobs[job.job_id].nodes == ("n1",)  # n2 completing: still held
    store.post(blockers[0].job_id, Finish(142, 0, "cancelled"))
    resized = cycle(store, 143)
    assert [j.nodes for j in resized] == [("n1", "n2")]
    grown = store.jobs[job.job_id]
    assert grown.state is JobState.RUNNING and grown.resize_time == 143
    assert grown.cpus == (4, 4) and grown.cpu_ids == ((0, 1, 2, 3), (0, 1, 2, 3))
    assert store.used("n2") == (4, 0)
    told = [e for e in effects(store) if isinstance(e, Resized)]
    assert [(e.old.nodes, e.job.nodes) for e in told] == [(("n1",), ("n1", "n2"))]


def test_a_resize_closes_the_accounting_record_of_the_old_size(store: JobStore) -> None:
    store.durable.recorder = lambda job: (
        f"{job.nodes}:{sorted(job.flags)}:{job.end_time}:{job.resize_time}".encode()
    )
    job = store.submit(ELASTIC, USER, now=100).job
    cycle(store, 110)
    asyncio.run(store.flush())
    store.durable.delivered(max(store.durable.outbox))
    assert store.jobs[job.job_id].nodes == ("n1", "n2", "n3")
    started = store.jobs[job.job_id]
    store.post(job.job_id, Resize(150, ("n1",), (4,), (0,), (), (), ((0, 1, 2, 3),)))
    asyncio.run(store.flush())
    assert list(store.durable.outbox.values()) == [
        f"{started.nodes}:['RESIZING']:150:0".encode(),
        b"('n1',):[]:0:150",
    ]
    assert store.used("n2") == (0, 0) and store.used("n1") == (4, 0)


def test_a_resize_keeps_the_batch_host_and_needs_a_running_job() -> None:
    job = Job(
        1, "e", 0, 0, "u", "g", JobState.RUNNING, Reason.NONE, 0, ("p",),
        nodes=("n1", "n2"), cpus=(1, 1), alloc_mem=(0, 0),
    )  # fmt: skip
    with pytest.raises(InvalidTransition):
        apply(job, Resize(5, ("n2",), (1,), (0,)))
    with pytest.raises(InvalidTransition):
        apply(replace(job, state=JobState.SUSPENDED), Resize(5, ("n1",), (1,), (0,)))
    assert apply(job, Resize(5, ("n1",), (1,), (0,))).nodes == ("n1",)


# ---------------------------------------------------------------- scontrol update NumNodes


def update(
    store: JobStore, job_id: int, uid: int = 1000, now: int = 200, **updates: str
) -> pb.JobResult | None:
    """``scontrol update JobId=<job_id> <updates>`` at ``now``: the failure, if any."""
    req = pb.JobControlRequest(action="update", job_ids=[str(job_id)], updates=updates)
    results = list(JobControl(store).control(req, principal_for(uid, uid), now).results)
    return results[0] if results else None


def test_numnodes_shrinks_a_running_job_to_its_first_nodes(store: JobStore) -> None:
    plain = store.submit(replace(WHOLE, min_nodes=3, exclusive=True), USER, now=100).job
    cycle(store, 110)
    effects(store)
    assert update(store, plain.job_id, NumNodes="2") is None
    job = store.jobs[plain.job_id]
    assert (job.nodes, job.min_nodes, job.max_nodes, job.resize_time) == (("n1", "n2"), 2, 2, 200)
    assert store.used("n3") == (0, 0)
    told = [e for e in effects(store) if isinstance(e, Resized)]
    assert [(e.old.nodes, e.job.nodes, e.job.elastic_signal) for e in told] == [
        (("n1", "n2", "n3"), ("n1", "n2"), 0)
    ]
    assert update(store, plain.job_id, NumNodes="2") is None  # no change: nothing told
    assert effects(store) == []


#: (what the update says, the job's nodes) -> Slurm's answer
REFUSED = {
    "growth, as Slurm refuses it": ({"NumNodes": "3"}, ("n1", "n2"), 2006),
    "no node at all": ({"NumNodes": "0"}, ("n1", "n2"), 2006),
    "MinNodes of a running job": ({"MinNodes": "1"}, ("n1", "n2"), 2073),
}


@pytest.mark.parametrize(("updates", "nodes", "code"), list(REFUSED.values()), ids=list(REFUSED))
def test_slurms_answers_to_a_size_it_refuses(
    store: JobStore, updates: dict[str, str], nodes: tuple[str, ...], code: int
) -> None:
    job = store.submit(replace(WHOLE, min_nodes=2, exclusive=True), USER, now=100).job
    cycle(store, 110)
    refused = update(store, job.job_id, **updates)
    assert refused is not None and refused.code == code
    assert refused.message == errors.MESSAGES[code]
    assert store.jobs[job.job_id].nodes == nodes


def test_a_suspended_job_keeps_its_size_and_disable_job_shrink_refuses(
    store: JobStore, tmp_path: Path
) -> None:
    job = store.submit(replace(WHOLE, min_nodes=2, exclusive=True), USER, now=100).job
    cycle(store, 110)
    store.post(job.job_id, Suspend(120))
    assert update(store, job.job_id, NumNodes="1").code == errors.ESLURM_DISABLED  # type: ignore[union-attr]
    store.post(job.job_id, Resume(130))
    conf = parse(CONF + "SchedulerParameters=disable_job_shrink\n", str(tmp_path / "slurm.conf"))
    store.apply_config(conf)
    refused = update(store, job.job_id, NumNodes="1")
    assert refused is not None and refused.code == errors.ESLURM_NOT_SUPPORTED
    assert store.jobs[job.job_id].nodes == ("n1", "n2")


def test_numnodes_sets_an_elastic_jobs_range(store: JobStore) -> None:
    job = store.submit(ELASTIC, USER, now=100).job
    cycle(store, 110)
    assert update(store, job.job_id, NumNodes="2") is None
    shrunk = store.jobs[job.job_id]
    assert (shrunk.nodes, shrunk.min_nodes, shrunk.max_nodes) == (("n1", "n2"), 1, 2)
    assert cycle(store, 120) == []  # no growth back past its new maximum
    assert update(store, job.job_id, NumNodes="1-3") is None
    assert (store.jobs[job.job_id].nodes, store.jobs[job.job_id].max_nodes) == (("n1",), 3)
    assert [j.nodes for j in cycle(store, 130)] == [("n1", "n2", "n3")]


def test_only_the_owner_or_an_operator_resizes(store: JobStore) -> None:
    job = store.submit(replace(WHOLE, min_nodes=2, exclusive=True), USER, now=100).job
    cycle(store, 110)
    refused = update(store, job.job_id, uid=2000, NumNodes="1")
    assert refused is not None and refused.code == errors.ESLURM_ACCESS_DENIED
    assert update(store, job.job_id, uid=0, NumNodes="1") is None


def test_under_preemption_an_elastic_job_gives_back_a_node_and_goes_on(tmp_path: Path) -> None:
    conf = parse(
        CONF.replace("PartitionName=p Nodes=ALL Default=YES", "PartitionName=p Nodes=ALL")
        + "PartitionName=low Nodes=ALL Default=YES PriorityTier=1\n"
        "PartitionName=high Nodes=ALL PriorityTier=2\n"
        "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n",
        str(tmp_path / "slurm.conf"),
    )
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    for name in ("n1", "n2", "n3"):
        store.node_registered(Registration(name, 4, 4000), monotonic=1.0, now=10)
    wide = store.submit(ELASTIC, USER, now=100).job
    cycle(store, 110)
    assert store.jobs[wide.job_id].nodes == ("n1", "n2", "n3")
    urgent = store.submit(replace(WHOLE, partitions=("high",), exclusive=True), USER, now=120).job
    resized = cycle(store, 130)
    assert [j.nodes for j in resized] == [("n1", "n2")]
    assert store.jobs[wide.job_id].state is JobState.RUNNING
    cycle(store, 131)
    assert store.jobs[urgent.job_id].nodes == ("n3",)
    assert store.jobs[wide.job_id].nodes == ("n1", "n2")


def test_sacct_lists_one_record_per_size_and_the_steps_under_the_newest(
    store: JobStore,
) -> None:
    """Slurm's way: the size a job left is a record ending at the resize, RESIZING;
    the job goes on in a record submitted and started then; the batch step, under
    the newest record, starts when the run did."""
    store.durable.recorder = lambda job: accounting.record(store, job)
    job = store.submit(ELASTIC, USER, now=1_000).job
    cycle(store, 1_010)
    assert update(store, job.job_id, now=1_200, NumNodes="1") is None
    store.post(job.job_id, Finish(1_300, 0, "exited"))
    asyncio.run(store.flush())
    newest: dict[tuple[int, int], dict[str, Any]] = {}
    for data in store.durable.outbox.values():
        info = codec.decode("JobInfo", data)
        newest[info["job_id"], info["submit_time"]] = info  # dbd's key; the last wins
    records = sorted(newest.values(), key=lambda info: info["submit_time"])
    settings = query.parse_settings(
        ["--format=JobID,State,Submit,Start,End,NNodes,NodeList"], {}, 2_000, 0
    )
    assert query.render(records, 2_000, settings, {}).splitlines()[2:] == [
        "1              RESIZING 1970-01-01T00:16:40 1970-01-01T00:16:50 1970-01-01T00:20:00"
        "        3          n[1-3] ",
        "1             COMPLETED 1970-01-01T00:20:00 1970-01-01T00:20:00 1970-01-01T00:21:40"
        "        1              n1 ",
        "1.batch       COMPLETED 1970-01-01T00:16:50 1970-01-01T00:16:50 1970-01-01T00:21:40"
        "        1              n1 ",
    ]


def test_scontrol_show_job_shows_the_new_allocation_and_the_range(store: JobStore) -> None:
    blocker = store.submit(replace(WHOLE, req_nodes="n3", exclusive=True), USER, now=100).job
    cycle(store, 110)
    job = store.submit(ELASTIC, USER, now=120).job
    cycle(store, 130)
    store.post(blocker.job_id, Cancel(140))
    store.post(blocker.job_id, Finish(141, 0, "cancelled"))
    cycle(store, 142)
    data = views.job_info(store.jobs[job.job_id], store).SerializeToString()
    shown = " ".join(record.lines(codec.decode("JobInfo", data), 150))
    assert "NodeList=n[1-3]" in shown and "NumNodes=3 NumCPUs=12" in shown
    assert "ResizeTime=1970-01-01T00:02:22" in shown
    assert "Elastic=1-3 ResizeSignal=SIGWINCH" in shown
