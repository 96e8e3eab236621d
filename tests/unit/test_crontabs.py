"""The controller's crontabs (controller/crontabs.py) over a real store and journal:
a job per entry held until its time, requeued under its id when it ends, disabled by
scancel, cancelled with its crontab, and all of it kept across a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller import crontabs, jobcontrol
from controller.crontabs import EntryRefused, NewEntry
from controller.jobspec import JobSpec
from controller.jobstate import Finish, JobState, Reason, Start
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore
from corral.config import parse
from corral.wire import corral_pb2 as pb
from tests.unit.test_timefmt import utc  # noqa: F401  (autouse: local time is UTC)

CONF = (
    "ClusterName=t\nSlurmctldHost=c\nScronParameters=enable\n"
    "NodeName=n1 CPUs=2\nPartitionName=p Nodes=n1 Default=YES\n"
)
NOW = 1_700_000_000  # 22:13:20 UTC
ROOT = principal_for(0, 0)


def open_store(tmp_path: Path) -> JobStore:
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
    store.load(0.0)
    return store


def entry(times: str, first: int, last: int, **spec: object) -> NewEntry:
    job = JobSpec(name="tick", script="#!/bin/sh\ndate\n", work_dir="/tmp", **spec)  # type: ignore[arg-type]
    return NewEntry(job, times, first, last)


def run_once(store: JobStore, job_id: int, start: int, end: int) -> None:
    store.post(job_id, Start(start, "p", ("n1",), (1,), (0,), 1))
    store.post(job_id, Finish(end, 0, "exited"))


def test_a_cron_job_waits_for_its_time_and_comes_back_under_its_id(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    [job_id] = crontabs.install(store, ROOT, "* * * * * date\n", [entry("* * * * *", 1, 1)], NOW)
    job = store.jobs[job_id]
    assert (job.state, job.begin_time, job.cron_spec) == (JobState.PENDING, NOW + 40, "* * * * *")
    run_once(store, job_id, NOW + 40, NOW + 50)
    again = store.jobs[job_id]
    assert (again.state, again.reason, again.restarts) == (JobState.PENDING, Reason.BEGIN_TIME, 1)
    assert again.begin_time == NOW + 100  # the minute after the run's end
    run_once(store, job_id, NOW + 100, NOW + 110)
    assert (store.jobs[job_id].state, store.jobs[job_id].restarts) == (JobState.PENDING, 2)


def test_scancel_disables_the_entry_and_the_job_ends(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    text = "#SCRON -t 1\n* * * * * date\n@daily true\n"
    first, second = crontabs.install(
        store, ROOT, text, [entry("* * * * *", 1, 2), entry("@daily", 3, 3)], NOW
    )
    request = pb.SignalRequest(filter=pb.JobFilter(job_ids=[str(first)]))
    jobcontrol.JobControl(store).signal(request, ROOT, NOW + 1)
    assert store.jobs[first].state is JobState.CANCELLED
    assert store.crontabs.disabled_lines(0) == "1-2"
    assert store.jobs[second].state is JobState.PENDING
    asyncio.run(store.flush())
    store.durable.journal.close()
    reopened = open_store(tmp_path)
    assert reopened.crontabs.tabs[0].text == text
    assert reopened.crontabs.disabled_lines(0) == "1-2"


def test_a_new_crontab_cancels_the_old_ones_pending_jobs(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    [old] = crontabs.install(store, ROOT, "@hourly a\n", [entry("@hourly", 1, 1)], NOW)
    [new] = crontabs.install(store, ROOT, "@daily b\n", [entry("@daily", 1, 1)], NOW)
    assert store.jobs[old].state is JobState.CANCELLED
    assert store.jobs[new].state is JobState.PENDING
    assert store.crontabs.disabled_lines(0) == ""  # replaced, not disabled
    crontabs.remove(store, 0, NOW)
    assert store.jobs[new].state is JobState.CANCELLED
    assert 0 not in store.crontabs.tabs


def test_a_running_job_of_a_removed_crontab_does_not_recur(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    [job_id] = crontabs.install(store, ROOT, "* * * * * a\n", [entry("* * * * *", 1, 1)], NOW)
    store.post(job_id, Start(NOW + 40, "p", ("n1",), (1,), (0,), 1))
    crontabs.remove(store, 0, NOW + 41)
    assert store.jobs[job_id].state is JobState.RUNNING
    store.post(job_id, Finish(NOW + 50, 0, "exited"))
    assert store.jobs[job_id].state is JobState.COMPLETED


def test_a_refused_entry_names_its_lines_and_keeps_the_old_crontab(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    [old] = crontabs.install(store, ROOT, "@hourly a\n", [entry("@hourly", 1, 1)], NOW)
    entries = [entry("@daily", 1, 1), entry("* * * * *", 2, 4, partitions=("nope",))]
    with pytest.raises(EntryRefused) as refused:
        crontabs.install(store, ROOT, "x\n", entries, NOW)
    assert refused.value.lines == "2-4"
    assert store.jobs[old].state is JobState.PENDING
    assert store.crontabs.tabs[0].text == "@hourly a\n"
    assert list(store.jobs) == [old]  # the good entry before it made no job either


@pytest.mark.parametrize(
    ("setting", "on"),
    [("", False), ("ScronParameters=enable\n", True),
     ("ScronParameters=explicit_scancel,enable\n", True)],
    ids=["unset", "enable", "among others"],
)  # fmt: skip
def test_scron_parameters_enable_gates_it(tmp_path: Path, setting: str, on: bool) -> None:
    text = CONF.replace("ScronParameters=enable\n", setting)
    assert crontabs.enabled(parse(text, str(tmp_path / "slurm.conf"))) is on
