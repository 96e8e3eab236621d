"""--mail-type: what each transition mails and the subject lines, as slurmctld writes them."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from controller import mail
from controller.jobstate import JobState, Reason
from controller.mail import Notice, for_transition, subject, time_limit_due
from corral import mailtype
from corral.config import parse
from tests.unit.scenario import job

MAIL = "BEGIN,END"


def _pending(**fields: object) -> object:
    return job(7, name="x", submit_time=1000, mail_type=MAIL, mail_user="alice", **fields)


def test_mail_type_words_in_slurms_order_and_sets() -> None:
    assert mailtype.parse("end,begin") == "BEGIN,END"
    assert mailtype.parse("ALL") == "INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT"
    assert mailtype.parse("ALL,NONE") == ""
    assert mailtype.parse("TIME_LIMIT_80,ARRAY_TASKS") == "TIME_LIMIT_80,ARRAY_TASKS"
    with pytest.raises(ValueError):
        mailtype.parse("END,LATER")
    assert mailtype.rest_flags("END,TIME_LIMIT_90") == ["END", "TIME=90%"]
    assert mailtype.from_rest(["time=100%", "INVALID_DEPENDENCY"]) == "INVALID_DEPEND,TIME_LIMIT"


def test_begin_and_end_subjects() -> None:
    pending = job(7, name="x", submit_time=1000, mail_type=MAIL, mail_user="alice")
    running = replace(pending, state=JobState.RUNNING, start_time=1061)
    (began,) = for_transition(pending, running, 1061, ())
    assert subject(began) == "Slurm Job_id=7 Name=x Began, Queued time 00:01:01"
    done = replace(running, state=JobState.COMPLETED, end_time=1061 + 90061, exit_status=0)
    (ended,) = for_transition(running, done, done.end_time, ())
    assert (
        subject(ended) == "Slurm Job_id=7 Name=x Ended, Run time 1-01:01:01, COMPLETED, ExitCode 0"
    )


def test_a_failure_is_fail_when_asked_else_end_and_a_timeout_adds_time_limit() -> None:
    running = job(7, name="x", state=JobState.RUNNING, start_time=100, mail_type="END")
    failed = replace(running, state=JobState.FAILED, end_time=160, exit_status=3 << 8)
    (ended,) = for_transition(running, failed, 160, ())
    assert subject(ended) == "Slurm Job_id=7 Name=x Ended, Run time 00:01:00, FAILED, ExitCode 3"
    asked = replace(running, mail_type="END,FAIL,TIME_LIMIT")
    timeout = replace(asked, state=JobState.TIMEOUT, end_time=160, exit_status=0)
    notes = for_transition(asked, timeout, 160, ())
    assert [subject(n) for n in notes] == [
        "Slurm Job_id=7 Name=x Failed, Run time 00:01:00, TIMEOUT, ExitCode 0",
        "Slurm Job_id=7 Name=x Reached time limit, Run time 00:01:00",
    ]
    cancelled = replace(asked, state=JobState.CANCELLED, end_time=160)
    assert [n.kind for n in for_transition(asked, cancelled, 160, ())] == ["END"]


def test_requeue_and_invalid_dependency_and_nothing_unasked() -> None:
    running = job(7, name="x", state=JobState.RUNNING, start_time=100, mail_type="REQUEUE")
    requeued = replace(running, state=JobState.PENDING, restarts=1)
    (note,) = for_transition(running, requeued, 130, ())
    assert subject(note) == "Slurm Job_id=7 Name=x Requeued, Run time 00:00:30"
    waiting = job(8, name="y", mail_type="INVALID_DEPEND", reason=Reason.DEPENDENCY)
    never = replace(waiting, reason=Reason.DEPENDENCY_NEVER_SATISFIED)
    (note,) = for_transition(waiting, never, 5, ())
    assert subject(note) == "Slurm Job_id=8 Name=y Invalid dependency"
    assert for_transition(never, never, 6, ()) == []
    quiet = replace(running, mail_type="BEGIN")
    assert for_transition(quiet, replace(quiet, state=JobState.COMPLETED), 200, []) == []


def test_an_array_is_mailed_as_a_whole_unless_array_tasks() -> None:
    def task(job_id: int, index: int, **fields: object) -> object:
        return job(
            job_id, name="a", array_job_id=5, array_task_id=index, mail_type="BEGIN,END",
            **fields,
        )  # fmt: skip

    first = task(5, 0)
    started = replace(first, state=JobState.RUNNING, start_time=10, submit_time=4)
    other = task(6, 1)
    (note,) = for_transition(first, started, 10, [started, other])
    assert subject(note) == "Slurm Array Summary Job_id=5_* (5) Name=a Began, Queued time 00:00:06"
    other_started = replace(other, state=JobState.RUNNING, start_time=11)
    assert for_transition(other, other_started, 11, [started, other_started]) == []
    done0 = replace(started, state=JobState.COMPLETED, end_time=20)
    assert for_transition(started, done0, 20, [done0, other_started]) == []
    done1 = replace(other_started, state=JobState.FAILED, end_time=30, exit_status=2 << 8)
    (note,) = for_transition(other_started, done1, 30, [done0, done1])
    assert subject(note).startswith("Slurm Array Summary Job_id=5_* (5) Name=a Ended")
    assert subject(note).endswith(", Mixed, ExitCode [0-2]")
    each = replace(other_started, mail_type="END,ARRAY_TASKS")
    (note,) = for_transition(each, replace(done1, mail_type=each.mail_type), 30, [])
    assert subject(note).startswith("Slurm Array Task Job_id=5_1 (6) Name=a Ended, Run time")


def test_time_limit_warnings_once_each_at_their_share() -> None:
    running = job(
        7, state=JobState.RUNNING, start_time=1000, time_limit=10,
        mail_type="TIME_LIMIT_50,TIME_LIMIT_90",
    )  # fmt: skip
    assert time_limit_due(running, 1000 + 299) == []
    assert time_limit_due(running, 1000 + 300) == ["TIME_LIMIT_50"]
    assert time_limit_due(running, 1000 + 540) == ["TIME_LIMIT_50", "TIME_LIMIT_90"]
    assert time_limit_due(replace(running, mail_sent="TIME_LIMIT_50"), 1540) == ["TIME_LIMIT_90"]
    note = Notice(running, "TIME_LIMIT_90", 1540)
    assert subject(note) == "Slurm Job_id=7 Name=job7 Reached 90% of time limit, Run time 00:09:00"


def test_mailprog_runs_with_subject_and_recipient(tmp_path: Path) -> None:
    out = tmp_path / "mails"
    prog = tmp_path / "mailprog"
    prog.write_text(f'#!/bin/sh\necho "$@|$SLURM_JOB_MAIL_TYPE|$SLURM_JOB_ID" >> {out}\n')
    prog.chmod(0o755)
    conf_file = tmp_path / "slurm.conf"
    conf_file.write_text(
        f"ClusterName=c\nSlurmctldHost=h\nMailProg={prog}\nNodeName=n1 CPUs=1\n"
        "PartitionName=p Nodes=n1\n"
    )
    conf = parse(conf_file.read_text(), str(conf_file))
    began = replace(
        job(7, name="x", mail_user="a@b", submit_time=0),
        state=JobState.RUNNING,
        start_time=5,
    )

    async def send() -> None:
        mailer = mail.Mailer()
        mailer.send([Notice(began, "BEGIN", 5)], conf)
        await mailer.drain()

    asyncio.run(send())
    assert out.read_text() == "-s Slurm Job_id=7 Name=x Began, Queued time 00:00:05 a@b|Began|7\n"
