"""sreport's command lines, read into Report requests (no daemons), and its errors.

Slurm 24.11's sreport decides which words it takes: options by getopt, report
names and arguments abbreviated down to a least length each (tried in its
order), lists lower-cased, and the window rounded to the nearest hour. Errors
use its lines; an unknown argument or column is reported and the report still
runs (exit status 1), a bad report name, time, time format or option stops it.
"""

from __future__ import annotations

import calendar
import time
from typing import Any

import pytest

from cli.halt import Halt
from cli.sreport import session as sreport_session
from cli.sreport.layout import (
    HOURS,
    HOURS_PER,
    MINUTES,
    MINUTES_PER,
    PERCENT,
    SECONDS,
    SECONDS_PER,
    TOP_ALL,
    TOP_USAGE,
    UTILIZATION,
)
from corral.wire import codec
from tests.unit.test_timefmt import utc  # noqa: F401 (autouse fixture: times in UTC)


def at(text: str) -> int:
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


NOW = at("2024-02-01T10:17:00")


class Recorder:
    """A ``Report`` call that records its requests and finds nothing."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return {"rows": [], "start": request["start"], "end": request["end"]}


def run(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str, list[dict[str, Any]]]:
    call = Recorder()
    status = sreport_session.sreport(list(argv), call)
    out, err = capsys.readouterr()
    return status, out, err, call.requests


def args(report: str, *words: str, **options: Any) -> sreport_session.ReportArgs:
    settings = sreport_session.Settings()
    for name, value in options.items():
        setattr(settings, name, value)
    parsed, errors = sreport_session.parse_args(report, words, settings, NOW)
    assert errors == []
    return parsed


# ------------------------------------------------------------------ the window
def test_the_default_window_is_yesterday() -> None:
    parsed = args(UTILIZATION)
    assert (parsed.start, parsed.end) == (at("2024-01-31T00:00:00"), at("2024-02-01T00:00:00"))


@pytest.mark.parametrize(
    ("words", "start", "end"),
    [
        (("start=2024-01-30T10:29:29",), "2024-01-30T10:00:00", "2024-02-01T00:00:00"),
        (("start=2024-01-30T10:29:30",), "2024-01-30T11:00:00", "2024-02-01T00:00:00"),
        (
            ("s=2024-01-30T23:45", "e=2024-01-31T00:10"),
            "2024-01-31T00:00:00",
            "2024-01-31T01:00:00",
        ),
        (("end=now",), "2024-01-31T00:00:00", "2024-02-01T10:00:00"),
        (("end=2030-01-01",), "2024-01-31T00:00:00", "2024-02-01T10:00:00"),  # not after now
        (("start=01/30", "end=01/31"), "2024-01-30T00:00:00", "2024-01-31T00:00:00"),
        (("Start=09:00",), "2024-02-01T09:00:00", "2024-02-01T10:00:00"),  # an hour at least
    ],
    ids=["round-down", "round-up", "an-hour", "now", "capped", "dates", "at-least-an-hour"],
)
def test_the_window_is_rounded_to_hours(words: tuple[str, ...], start: str, end: str) -> None:
    parsed = args(UTILIZATION, *words)
    assert (parsed.start, parsed.end) == (at(start), at(end))


def test_a_time_that_does_not_parse_stops_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err, sent = run(capsys, "cluster", "utilization", "start=yesterdayish")
    assert (status, out, sent) == (1, "", [])
    assert err == "Invalid time specification (pos=0): yesterdayish\n"


# ------------------------------------------------------------------ arguments
def test_report_arguments_abbreviate_as_slurms_do() -> None:
    parsed = args(
        sreport_session.ACCOUNTS_BY_USER, "Acc=Physics,chem,physics", "u=Alice", "bob", "Tree"
    )
    assert (parsed.accounts, parsed.users, parsed.tree) == (
        ["chem", "physics"],
        ["alice", "bob"],
        True,
    )
    parsed = args(UTILIZATION, "alpha", "Clusters=beta", "all_clusters", "format=Cl,al%20")
    assert (parsed.clusters, parsed.all_clusters, parsed.formats) == (
        ["alpha", "beta"],
        True,
        ["cl", "al%20"],
    )
    parsed = args(TOP_USAGE, "t=3", "Group", 'Users="Carol,Dave"', "acct=x")
    assert (parsed.top, parsed.group, parsed.users, parsed.accounts) == (
        3,
        True,
        ["carol", "dave"],
        ["x"],
    )
    assert args(TOP_USAGE, "TopCount=-1").top == TOP_ALL


def test_unknown_arguments_are_reported_and_the_report_still_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err, sent = run(capsys, "-n", "cluster", "Utilization", "a=1", "users=x")
    assert (status, out, len(sent)) == (1, "", 1)
    assert err == (
        " Unknown condition: a=1\nUse keyword set to modify value\n"
        " Unknown condition: users=x\nUse keyword set to modify value\n"
    )
    status, _, err, sent = run(capsys, "-n", "user", "top", "topcount=lots")
    assert (status, err, sent[0]["top"]) == (
        1,
        "sreport: error: Invalid value for TopCount (lots)\n",
        10,
    )


def test_unknown_columns_are_reported_and_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    def call(request: dict[str, Any]) -> dict[str, Any]:
        cluster = codec.decode("UsageRow", b"")
        cluster.update(cluster="bench", alloc_secs=60, idle_secs=3540, reported_secs=3600)
        return {"rows": [cluster]}

    status = sreport_session.sreport(["-P", "-n", "cluster", "ut", "format=cluster,bogus,al"], call)
    assert (status, *capsys.readouterr()) == (1, "bench|1\n", " Unknown field 'bogus'\n")


# ------------------------------------------------------------------ requests
def test_requests_name_the_report_window_and_filters(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, _, sent = run(
        capsys,
        "-M",
        "Alpha,beta",
        "cluster",
        "AccountUtilizationByUser",
        "start=2024-01-30T00:00:00",
        "end=2024-01-31T00:00:00",
        "accounts=physics",
        "users=alice",
    )
    assert sent == [
        {
            "report": "cluster accountutilizationbyuser",
            "start": at("2024-01-30T00:00:00"),
            "end": at("2024-01-31T00:00:00"),
            "clusters": ["alpha", "beta"],
            "accounts": ["physics"],
            "users": ["alice"],
            "top": TOP_ALL,
        }
    ]
    _, _, _, sent = run(capsys, "-a", "user", "TopUsage", "TopCount=3")
    assert (sent[0]["report"], sent[0]["clusters"], sent[0]["top"]) == ("user topusage", ["all"], 3)
    _, _, _, sent = run(capsys, "user", "top", "topcount=0")
    assert (sent[0]["clusters"], sent[0]["top"]) == ([], 1)  # the controller's own; one line
    _, _, _, sent = run(capsys, "user", "top", "group")
    assert sent[0]["top"] == TOP_ALL  # grouped here, so every (account, user)


# ------------------------------------------------------------------ options
@pytest.mark.parametrize(
    ("word", "time_format"),
    [
        ("s", SECONDS),
        ("SEC", SECONDS),
        ("secper", SECONDS_PER),
        ("m", MINUTES),
        ("MinPer", MINUTES_PER),
        ("h", HOURS),
        ("hourper", HOURS_PER),
        ("p", PERCENT),
    ],
)
def test_time_formats(word: str, time_format: int) -> None:
    assert sreport_session.parse_time_format(word) == time_format


@pytest.mark.parametrize("word", ["minp", "hours,percent", "x"])
def test_unknown_time_formats_stop(capsys: pytest.CaptureFixture[str], word: str) -> None:
    status, out, err, sent = run(capsys, "-t", word, "cluster", "utilization")
    assert (status, out, err, sent) == (1, "", f"unknown time format {word}\n", [])


def test_sort_orders() -> None:
    assert sreport_session.parse_sort("n") is True
    assert sreport_session.parse_sort("Time") is False
    with pytest.raises(Halt):
        sreport_session.parse_sort("t")


def test_options_errors_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "-x", "cluster", "utilization")[:4] == (
        1,
        "",
        "sreport: invalid option -- 'x'\nTry \"sreport --help\" for more information\n",
        [],
    )
    assert run(capsys, "-V")[:2] == (0, "slurm 24.11.0\n")
    for flag in ("-h", "--help", "--usage"):
        status, out, _, _ = run(capsys, flag)
        assert (status, out) == (0, sreport_session.HELP)
    assert run(capsys, "-a", "-M", "x", "cluster", "ut")[:3] == (
        1,
        "",
        "Only one cluster option can be used (--all_clusters OR --cluster OR --local)\n",
    )


def test_tres_other_than_cpu_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err, sent = run(capsys, "-T", "mem,gres/gpu", "cluster", "ut")
    assert (status, sent) == (1, [])
    assert err == (
        "sreport: error: TRES 'mem' is not reported: only cpu is\n"
        "sreport: error: TRES 'gres/gpu' is not reported: only cpu is\n"
        "sreport: fatal: No valid TRES given\n"
    )
    assert run(capsys, "--tres=ALL", "-n", "cluster", "ut")[0] == 0


# ------------------------------------------------------------------ reports and keywords
def test_report_names(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err, sent = run(capsys, "cluster", "bogus")
    assert (status, sent) == (1, [])
    assert err == (
        "Not valid report bogus\n"
        'Valid cluster reports are, "AccountUtilizationByUser", "AccountUtilizationByQOS", '
        '"UserUtilizationByAccount", "UserUtilizationByWckey", "Utilization", and '
        '"WCKeyUtilizationByUser"\n'
    )
    status, _, err, _ = run(capsys, "user", "bottom")
    assert (status, err) == (1, 'Not valid report bottom\nValid user reports are, "Top"\n')
    status, _, err, sent = run(capsys, "cluster", "UA")
    assert (status, sent) == (1, [])
    assert err == "sreport: error: cluster UA: Corral does not make this report yet\n"
    status, _, err, _ = run(capsys, "job", "SizesByAccount")
    assert err == "sreport: error: job SizesByAccount: Corral does not make this report yet\n"


def test_keywords(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "user")[:3] == (1, "", "too few arguments for keyword:user\n")
    assert run(capsys, "-Q", "user")[:3] == (1, "", "")
    assert run(capsys, "frobnicate")[:3] == (1, "", "invalid keyword: frobnicate\n")
    assert run(capsys, "version")[:3] == (0, "slurm 24.11.0\n", "")
    assert run(capsys, "time")[:3] == (1, "", "too few arguments for keyword:time\n")


def test_interactive_commands_keep_their_settings(capsys: pytest.CaptureFixture[str]) -> None:
    lines = iter(
        [
            "# a comment",
            "parsable2",
            "time hours",
            "cluster utilization start=2024-01-30T00:00:00",
            "!!",
            "",
            "exit",
            "never read",
        ]
    )
    call = Recorder()
    session = sreport_session.Session(sreport_session.Settings(), call, lambda: NOW)
    sreport_session.interactive(session, lambda prompt: next(lines))
    out, _ = capsys.readouterr()
    assert len(call.requests) == 2
    assert out.count("Usage reported in CPU Hours\n") == 2
    assert "Cluster|Allocated|Down|PLND Down|Idle|Planned|Reported\n" in out
    assert session.status == 1  # the empty line, as in Slurm


def test_interactive_input_ends_with_a_newline(capsys: pytest.CaptureFixture[str]) -> None:
    def read(prompt: str) -> str:
        raise EOFError

    session = sreport_session.Session(sreport_session.Settings(), Recorder(), lambda: NOW)
    sreport_session.interactive(session, read)
    assert capsys.readouterr().out == "\n"


def test_words_keep_quoted_blanks() -> None:
    assert sreport_session.words_of("  cluster  ut \"format=a b\" x'y z'") == [
        "cluster",
        "ut",
        '"format=a b"',
        "x'y z'",
    ]
