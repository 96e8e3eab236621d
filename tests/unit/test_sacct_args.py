"""sacct's command line: options, time forms, the default window, users, and errors.

``parse_settings`` takes the clock and the caller's uid, so the window rules
(Slurm 24.11's ``slurmdb_job_cond_def_start_end``) are checked against a fixed
"now" in UTC. The commands at the end are what submitit, Snakemake and parsl
run, checked down to the ``History`` request they send.
"""

from __future__ import annotations

import os
import pwd
import sys
from typing import Any

import pytest

from cli import boundary
from cli.halt import Halt
from cli.sacct import main, query
from cli.sacct.query import JobSelection
from corral import errors
from corral.errors import SlurmError
from corral.wire import codec
from tests.unit.test_sprio_format import FakeClient
from tests.unit.test_timefmt import NOW, epoch, utc  # noqa: F401  (utc: autouse fixture)

MIDNIGHT = epoch("2026-11-30T00:00:00")
USER = 1000


def settings(*argv: str, uid: int = USER, env: dict[str, str] | None = None) -> query.Settings:
    return query.parse_settings(list(argv), env or {}, NOW, uid)


def halt(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of a command line that stops early."""
    with pytest.raises(Halt) as stop:
        settings(*argv)
    status = stop.value.report()
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# ---------------------------------------------------------------- time forms
@pytest.mark.parametrize(
    ("text", "stamp"),
    [
        pytest.param("2026-11-28T04:00", "2026-11-28T04:00:00", id="snakemake ISO"),
        pytest.param("2026-11-28", "2026-11-28T00:00:00", id="ISO date"),
        pytest.param("2026-11-28T04:05:06", "2026-11-28T04:05:06", id="ISO seconds"),
        pytest.param("03:15", "2026-11-30T03:15:00", id="HH:MM today"),
        pytest.param("03:15:20", "2026-11-30T03:15:20", id="HH:MM:SS"),
        pytest.param("1127", "2026-11-27T00:00:00", id="MMDD"),
        pytest.param("112725", "2025-11-27T00:00:00", id="MMDDYY"),
        pytest.param("1127-10:30", "2026-11-27T10:30:00", id="MMDD-HH:MM"),
        pytest.param("11/27/25-10:30:05", "2025-11-27T10:30:05", id="MM/DD/YY-HH:MM:SS"),
        pytest.param("12/25", "2025-12-25T00:00:00", id="later date is last year"),
        pytest.param("now", "2026-11-30T04:56:52", id="now"),
        pytest.param("now-2days", "2026-11-28T04:56:52", id="now minus days"),
        pytest.param("now-90", "2026-11-30T04:55:22", id="now minus seconds"),
        pytest.param("now+1hour", "2026-11-30T05:56:52", id="now plus"),
        pytest.param("today", "2026-11-30T00:00:00", id="today"),
        pytest.param("midnight", "2026-11-30T00:00:00", id="midnight"),
        pytest.param("noon", "2026-11-30T12:00:00", id="noon"),
    ],
)
def test_time_forms(text: str, stamp: str) -> None:
    assert query.parse_time(text, NOW) == epoch(stamp)


@pytest.mark.parametrize("text", ["yesterday-ish", "25:00", "2026-13-01", "now-3parsecs", ""])
def test_bad_times(capsys: pytest.CaptureFixture[str], text: str) -> None:
    status, out, err = halt(capsys, "-S", text)
    assert (status, out, err) == (1, "", f"Invalid time specification (pos=0): {text}\n")


# ---------------------------------------------------------------- the window
@pytest.mark.parametrize(
    ("argv", "start", "end"),
    [
        pytest.param((), MIDNIGHT, NOW, id="midnight to now"),
        pytest.param(("-j", "12"), 0, NOW, id="jobs: epoch to now"),
        pytest.param(("-s", "R"), NOW, NOW, id="states: the instant now"),
        pytest.param(("-s", "R", "-j", "12"), 0, NOW, id="states and jobs"),
        pytest.param(("-S", "2026-11-01"), epoch("2026-11-01T00:00:00"), NOW, id="-S"),
        pytest.param(("-E", "01:00"), MIDNIGHT, epoch("2026-11-30T01:00:00"), id="-E"),
        pytest.param(
            ("-s", "CD", "-S", "2026-11-01"),
            epoch("2026-11-01T00:00:00"),
            epoch("2026-11-01T00:00:00"),
            id="states with -S: that instant",
        ),
        pytest.param(("-s", "CD", "-E", "now+1hour"), NOW, NOW + 3600, id="states with -E"),
        pytest.param(
            ("-j", "1", "-S", "2026-11-01", "-E", "2026-11-02"),
            epoch("2026-11-01T00:00:00"),
            epoch("2026-11-02T00:00:00"),
            id="both given",
        ),
    ],
)
def test_window(argv: tuple[str, ...], start: int, end: int) -> None:
    chosen = settings(*argv)
    assert (chosen.start, chosen.end) == (start, end)
    request = query.request(chosen)["filter"]
    assert (request["start"], request["end"]) == (start, end)


def test_start_after_end(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = halt(capsys, "-S", "2026-11-30T04:00", "-E", "2026-11-29")
    assert status == 1
    assert err == (
        "sacct: error: Start time (2026-11-30T04:00:00) requested is after end time "
        "(2026-11-29T00:00:00).\n"
    )
    assert halt(capsys, "-S", "now+1hour")[0] == 1


# ---------------------------------------------------------------- users
@pytest.mark.parametrize(
    ("argv", "uid", "uids"),
    [
        pytest.param((), USER, [USER], id="own jobs"),
        pytest.param((), 0, [], id="root sees all"),
        pytest.param(("-a",), USER, [], id="allusers"),
        pytest.param(("-u", "-1"), USER, [], id="-u -1"),
        pytest.param(("-u", "root,1000,root"), USER, [0, 1000], id="names and uids"),
        pytest.param(("-u", "0", "--uid=7"), USER, [0, 7], id="repeated"),
        pytest.param(("-u", "0", "-a"), USER, [], id="-a after -u"),
        pytest.param(("-a", "-u", "0"), USER, [0], id="-u after -a"),
        pytest.param(("-j", "5"), USER, [], id="jobs: every user"),
        pytest.param(("-N", "n1"), USER, [], id="nodes: every user"),
        pytest.param(("-j", "5", "-u", "0"), USER, [0], id="jobs and user"),
        pytest.param(("-u", "2"), 0, [2], id="root asks for one"),
    ],
)
def test_users(argv: tuple[str, ...], uid: int, uids: list[int]) -> None:
    assert query.request(settings(*argv, uid=uid))["filter"]["uids"] == uids


def test_unknown_user(capsys: pytest.CaptureFixture[str]) -> None:
    assert halt(capsys, "-u", "root,no-such-user-here") == (
        1,
        "",
        "sacct: error: Invalid user id: no-such-user-here\n",
    )


def test_user_names_come_from_the_password_database() -> None:
    me = pwd.getpwuid(os.getuid())
    assert settings("-u", me.pw_name).uids == [me.pw_uid]


# ---------------------------------------------------------------- states
@pytest.mark.parametrize(
    ("text", "states"),
    [
        pytest.param("CD,F,CA,TO", ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"], id="compact"),
        pytest.param("r,pd,nf,oom", ["RUNNING", "PENDING", "NODE_FAIL", "OUT_OF_MEMORY"], id="lc"),
        pytest.param("completed,Failed", ["COMPLETED", "FAILED"], id="long any case"),
        pytest.param("PR,BF,DL,S", ["PREEMPTED", "BOOT_FAIL", "DEADLINE", "SUSPENDED"], id="rest"),
        pytest.param("RQ,RS,RV", ["REQUEUED", "RESIZING", "REVOKED"], id="recorded flags"),
        pytest.param("CD,cd,COMPLETED", ["COMPLETED"], id="no repeats"),
    ],
)
def test_states(text: str, states: list[str]) -> None:
    assert query.request(settings("-s", text))["filter"]["states"] == states


def test_bad_states(capsys: pytest.CaptureFixture[str]) -> None:
    assert halt(capsys, "-s", "CD,bogus") == (
        1,
        "",
        "sacct: fatal: unrecognized job state value 'bogus'\n",
    )
    assert halt(capsys, "--state=CG") == (
        1,
        "",
        "sacct: fatal: job state CG is not supported / accounted\n",
    )


# ---------------------------------------------------------------- job ids
@pytest.mark.parametrize(
    ("argv", "selections", "ids"),
    [
        pytest.param(("-j", "123"), [JobSelection(123)], ["123"], id="job"),
        pytest.param(("-j", "123_4"), [JobSelection(123, "4")], ["123_4"], id="task"),
        pytest.param(
            ("-j", "123_[1-3,5]"), [JobSelection(123, "[1-3,5]")], ["123_[1-3,5]"], id="range"
        ),
        pytest.param(
            ("-j", "123.batch"), [JobSelection(123, None, "batch")], ["123"], id="batch step"
        ),
        pytest.param(("-j", "123.07"), [JobSelection(123, None, "7")], ["123"], id="step number"),
        pytest.param(
            ("-j", "4_2.extern"), [JobSelection(4, "2", "extern")], ["4_2"], id="task step"
        ),
        pytest.param(
            ("-j", "1,2", "--jobs=3", "--job", "2"),
            [JobSelection(1), JobSelection(2), JobSelection(3), JobSelection(2)],
            ["1", "2", "3"],
            id="lists and repeats",
        ),
        pytest.param(("-j", "'5,6'"), [JobSelection(5), JobSelection(6)], ["5", "6"], id="quoted"),
        pytest.param(("-j", "12x"), [JobSelection(12)], ["12"], id="atoi"),
        pytest.param(("-j", "7+1"), [JobSelection(7)], ["7"], id="het offset"),
        pytest.param(("-j", "1,,2,"), [JobSelection(1), JobSelection(2)], ["1", "2"], id="empty"),
    ],
)
def test_job_ids(argv: tuple[str, ...], selections: list[JobSelection], ids: list[str]) -> None:
    chosen = settings(*argv)
    assert chosen.jobs == selections
    assert query.request(chosen)["filter"]["job_ids"] == ids


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("abc", "Bad job/step specified: abc", id="not a number"),
        pytest.param("1,x2", "Bad job/step specified: x2", id="second item"),
        pytest.param("12.x", "Bad step specified: 12", id="bad step"),
        pytest.param("12_x", "Bad job array element specified: 12", id="bad task"),
        pytest.param("12_[3-1]", "Bad job array element specified: 12", id="bad range"),
        pytest.param("12_", "Bad job array element specified: 12", id="empty task"),
    ],
)
def test_bad_job_ids(capsys: pytest.CaptureFixture[str], text: str, message: str) -> None:
    assert halt(capsys, "-j", text) == (1, "", f"sacct: fatal: {message}\n")


# ---------------------------------------------------------------- other filters
def test_filters_reach_the_request() -> None:
    chosen = settings(
        "-A", "bench,phys", "-r", "debug", "--partition=gpu", "--name=a,b", "-N", "n[1-3]"
    )
    request = query.request(chosen)["filter"]
    assert request["accounts"] == ["bench", "phys"]
    assert request["partitions"] == ["debug", "gpu"]
    assert request["names"] == ["a", "b"]
    assert request["nodes"] == ["n1", "n2", "n3"]
    assert request["clusters"] == []


@pytest.mark.parametrize(
    ("argv", "clusters"),
    [
        pytest.param(("-M", "all"), ["all"], id="all"),
        pytest.param(("--clusters", "ALL"), ["all"], id="any case"),
        pytest.param(("-L",), ["all"], id="allclusters"),
        pytest.param(("-M", "Alpha,beta"), ["alpha", "beta"], id="list lowercased"),
        pytest.param(("-L", "-M", "alpha"), ["alpha"], id="later -M wins"),
        pytest.param(("-L", "--local"), [], id="local"),
    ],
)
def test_clusters(argv: tuple[str, ...], clusters: list[str]) -> None:
    assert query.request(settings(*argv))["filter"]["clusters"] == clusters


def test_second_nodelist_is_refused_with_a_message() -> None:
    chosen = settings("-N", "n1", "-N", "n2")
    assert chosen.nodes == ["n1"]
    assert chosen.warnings == ["sacct: error: Already asked for nodes 'n2'"]


def test_bad_nodelist(capsys: pytest.CaptureFixture[str]) -> None:
    assert halt(capsys, "-N", "n[1-") == (
        1,
        "",
        "sacct: error: 'n[1-' invalid entry for --nodelist\n",
    )


def test_json_of_the_one_data_parser() -> None:
    assert settings("--json").json and settings("--json=data_parser/v0.0.42").json


def test_accepted_flags() -> None:
    chosen = settings("--noconvert", "--units=g", "--array", "--whole-hetjob=no", "-t")
    assert (chosen.noconvert, chosen.units, chosen.array, chosen.allocations) == (
        True,
        3,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("argv", "err"),
    [
        pytest.param(
            ("--units=x",),
            "sacct: error: Invalid unit type 'x'. Possible options are 'KMGTP'\n"
            "sacct: fatal: Invalid unit type\n",
            id="units",
        ),
        pytest.param(
            ("--whole-hetjob=maybe",),
            'sacct: error: Invalid --whole-hetjob value "maybe". Valid values: [yes|no].\n',
            id="whole-hetjob",
        ),
        pytest.param(
            ("-o", "JobID,Bogus"),
            'sacct: error: Invalid field requested: "Bogus"\n',
            id="unknown field",
        ),
        pytest.param(
            ("-o", "jobid ,state"),
            'sacct: error: Invalid field requested: "jobid "\n',
            id="trailing blank",
        ),
        pytest.param(
            ("-o", "AllocGRES"),
            "sacct: fatal: AllocGRES has been removed, please use AllocTRES\n",
            id="allocgres",
        ),
        pytest.param(
            ("-l", "-o", "jobid"),
            "sacct: fatal: Options -o(--format) and -l(--long) are mutually exclusive. "
            "Please remove one and retry.\n",
            id="long and format",
        ),
        pytest.param(
            ("-X", "|", "tail"),
            "sacct: error: Unknown arguments:\nsacct: error:  |\nsacct: error:  tail\n",
            id="operands",
        ),
        pytest.param(("-Q",), "sacct: invalid option -- 'Q'\n", id="unknown option"),
        pytest.param(
            ("-T",),
            "sacct: error: --truncate is not supported: times are not truncated to the window\n",
            id="truncate",
        ),
        pytest.param(
            ("--json=v0.0.40",),
            "sacct: error: --json=v0.0.40 is not supported: only data_parser v0.0.42 is\n",
            id="json-version",
        ),
        pytest.param(
            ("--st=1",),
            "sacct: option '--st=1' is ambiguous; possibilities: '--state' '--starttime'\n",
            id="ambiguous",
        ),
        pytest.param(("-S",), "sacct: option requires an argument -- 'S'\n", id="no argument"),
    ],
)
def test_errors(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], err: str) -> None:
    assert halt(capsys, *argv) == (1, "", err)


# ---------------------------------------------------------------- help
def test_help_usage_version_helpformat(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = halt(capsys, "--help")
    assert (status, err) == (0, "") and out == query.HELP
    assert halt(capsys, "-h")[1] == query.HELP
    assert halt(capsys, "--usage") == (0, "Usage: sacct [options]\n\tUse --help for help\n", "")
    assert halt(capsys, "-V") == (0, "slurm 24.11.0\n", "")
    status, out, _ = halt(capsys, "-e")
    assert status == 0 and out.startswith("Account             AdminComment")
    # Help comes after every other check, as in Slurm.
    assert halt(capsys, "--help", "-o", "bogus")[0] == 1


# ---------------------------------------------------------------- whole commands
def reply(*jobs: dict[str, Any]) -> dict[str, Any]:
    answer = codec.decode("HistoryReply", b"")
    answer.update(jobs=list(jobs), now=NOW)
    return answer


def finished(job_id: int, **fields: Any) -> dict[str, Any]:
    record = codec.decode("JobInfo", b"")
    record.update(
        job_id=job_id,
        name="run-1",
        account="bench",
        partition="debug",
        state="COMPLETED",
        start_time=NOW - 60,
        end_time=NOW - 30,
        nodes="n1",
        batch_host="n1",
        batch_flag=True,
        num_nodes=1,
        num_cpus=1,
        alloc_tres="cpu=1,node=1",
    )
    record.update(fields)
    return record


def run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: Any,
    *argv: str,
) -> tuple[FakeClient, int, str, str]:
    client = FakeClient(answer)
    monkeypatch.setattr(boundary, "connect", lambda: client)
    monkeypatch.setattr(query.time, "time", lambda: float(NOW))
    monkeypatch.setattr(query.os, "getuid", lambda: USER)
    monkeypatch.delenv("SACCT_FORMAT", raising=False)
    status = query.sacct(list(argv))
    captured = capsys.readouterr()
    return client, status, captured.out, captured.err


def test_parsl_probe_and_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, status, out, err = run(monkeypatch, capsys, reply(), "-X")
    assert (status, err) == (0, "")
    assert out.startswith("JobID           JobName")
    client, status, out, _ = run(
        monkeypatch,
        capsys,
        reply(finished(5), finished(6, state="RUNNING")),
        "-X",
        "--noheader",
        "--format=jobid,state%20",
        "--job",
        "5,6",
    )
    assert status == 0
    assert out == "5                       COMPLETED \n6                         RUNNING \n"
    assert client.requests[0][1]["filter"]["job_ids"] == ["5", "6"]


def test_submitit_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client, status, out, _ = run(
        monkeypatch,
        capsys,
        reply(finished(5), finished(6)),
        "-o",
        "JobID,State,NodeList",
        "--parsable2",
        "-j",
        "5",
        "-j",
        "6",
    )
    assert status == 0
    assert out == (
        "JobID|State|NodeList\n5|COMPLETED|n1\n5.batch|COMPLETED|n1\n"
        "6|COMPLETED|n1\n6.batch|COMPLETED|n1\n"
    )
    method, request = client.requests[0]
    assert method == "History"
    assert request["filter"] == {
        "job_ids": ["5", "6"],
        "uids": [],
        "accounts": [],
        "partitions": [],
        "states": [],
        "names": [],
        "nodes": [],
        "clusters": [],
        "start": 0,
        "end": NOW,
        "duplicates": False,
    }


def test_snakemake_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = "-X --parsable2 --clusters all --noheader --format=JobIdRaw,State "
    argv += "--starttime 2026-11-28T04:00 --endtime now --name run-1"
    array_task = finished(9, array_job_id=8, array_task_id=1)
    client, status, out, _ = run(monkeypatch, capsys, reply(array_task), *argv.split())
    assert (status, out) == (0, "9|COMPLETED\n")
    request = client.requests[0][1]["filter"]
    assert request["clusters"] == ["all"]
    assert request["names"] == ["run-1"]
    assert (request["start"], request["end"]) == (epoch("2026-11-28T04:00:00"), NOW)
    assert request["uids"] == [USER]
    # The request encodes as a HistoryRequest.
    assert codec.encode("HistoryRequest", client.requests[0][1])


def test_snakemake_account_guess_with_a_stray_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["-nu", "root", "-o", "Account%256", "|", "tail", "-1"]
    client, status, out, err = run(monkeypatch, capsys, reply(), *argv)
    assert (status, out, client.requests) == (1, "", [])
    assert err == "sacct: invalid option -- '1'\n"


def test_snakemake_reason_of_a_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, status, out, _ = run(
        monkeypatch, capsys, reply(finished(5)), "-j", "5.0", "--format=Reason", "--noheader"
    )
    assert (status, out) == (0, "")


def test_controller_errors_go_through_the_boundary(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    down = SlurmError(errors.ESLURM_DB_CONNECTION, "Problem talking to the database: refused")
    monkeypatch.setattr(boundary, "connect", lambda: FakeClient(down))
    monkeypatch.setattr(sys, "argv", ["sacct", "-X"])
    monkeypatch.delenv("SLURM_EXIT_ERROR", raising=False)
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "sacct: error: Problem talking to the database: refused\n",
    )


def test_disabled_accounting_is_said_as_slurm_says_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    disabled = SlurmError(errors.ESLURM_DISABLED, "Slurm accounting storage is disabled")
    monkeypatch.setattr(boundary, "connect", lambda: FakeClient(disabled))
    assert query.sacct(["-X"]) == 1
    assert capsys.readouterr().err == "Slurm accounting storage is disabled\n"


def test_duplicates_asks_for_every_run(capsys: pytest.CaptureFixture[str]) -> None:
    """-D: every run of a requeued job (and every job a reused id named), not the last."""
    assert query.request(settings("-D", "-j", "5"))["filter"]["duplicates"] is True
    assert query.request(settings("--duplicates"))["filter"]["duplicates"] is True
    assert query.request(settings("-j", "5"))["filter"]["duplicates"] is False


def test_options_not_implemented_are_warned(capsys: pytest.CaptureFixture[str]) -> None:
    """-v changes nothing."""
    settings("-v")
    assert "sacct: warning: --verbose has no effect" in capsys.readouterr().err
