"""sreport's output for hand-built Report replies, laid out as Slurm 24.11's sreport.

The expected blocks are worked out by hand from Slurm's sreport and
print_fields sources: 80-dash header blocks, ``%*.*s`` columns (headers cut to
the width without a ``+``, values cut with one), usage columns 8 wide or as
wide as the largest number of seconds, +9 in the ``*Per`` formats, ``%.0f``
minutes and ``%.2f%%`` percentages of the cluster's total. Times are UTC.
"""

from __future__ import annotations

from typing import Any

import pytest

from cli.sreport import session as sreport_session
from cli.sreport.layout import (
    HOURS,
    MINUTES,
    PERCENT,
    SECONDS,
    SECONDS_PER,
    time_str,
    usage_width,
)
from corral.wire import codec
from tests.unit.test_timefmt import utc  # noqa: F401 (autouse fixture: times in UTC)

JAN31 = ["start=2024-01-31T00:00:00", "end=2024-02-01T00:00:00"]


def row(cluster: str, account: str = "", user: str = "", **secs: int) -> dict[str, Any]:
    """A ``UsageRow`` as the codec decodes it."""
    decoded = codec.decode("UsageRow", b"")
    decoded.update(cluster=cluster, account=account, user=user, **secs)
    return decoded


#: A 10-CPU cluster that was busy a quarter of January 31st.
BENCH = row("bench", alloc_secs=216000, idle_secs=648000, reported_secs=864000)
TREE = [
    BENCH,
    row("bench", "root", alloc_secs=216000),
    row("bench", "chem", alloc_secs=72000),
    row("bench", "chem", "bob", alloc_secs=72000),
    row("bench", "science", alloc_secs=144000),
    row("bench", "physics", alloc_secs=144000),
    row("bench", "physics", "alice", alloc_secs=108000),
    row("bench", "physics", "carol", alloc_secs=36000),
]
#: TopUsage's rows as dbd sends them: most used first.
TOP = [
    BENCH,
    row("bench", "physics", "alice", alloc_secs=108000),
    row("bench", "chem", "bob", alloc_secs=72000),
    row("bench", "physics", "carol", alloc_secs=36000),
    row("bench", "chem", "alice", alloc_secs=20000),
]


class Reply:
    """A ``Report`` call answering with fixed rows, recording the requests."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return {"rows": self.rows, "start": request["start"], "end": request["end"]}


def output(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    rows: list[dict[str, Any]],
    *argv: str,
) -> str:
    names = {"alice": "Alice Smith", "bob": "Bob,,,"}
    monkeypatch.setattr("cli.sreport.layout.pwd.getpwnam", lambda user: _Passwd(names, user))
    assert sreport_session.sreport(list(argv), Reply(rows)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


class _Passwd:
    def __init__(self, names: dict[str, str], user: str) -> None:
        if user not in names:
            raise KeyError(user)
        self.pw_gecos = names[user]


HEADER = "-" * 80 + "\n"


def test_cluster_utilization_in_minutes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert output(capsys, monkeypatch, [BENCH], "cluster", "Utilization", *JAN31) == (
        HEADER
        + "Cluster Utilization 2024-01-31T00:00:00 - 2024-01-31T23:59:59\n"
        + "Usage reported in CPU Minutes\n"
        + HEADER
        + "  Cluster Allocate     Down PLND Dow     Idle  Planned Reported \n"
        + "--------- -------- -------- -------- -------- -------- -------- \n"
        + "    bench     3600        0        0    10800        0    14400 \n"
    )


def test_usage_columns_grow_with_the_largest_number_of_seconds(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    big = row("big", alloc_secs=150_000_000, idle_secs=50_000_000, reported_secs=200_000_000)
    small = row("small", alloc_secs=60, idle_secs=86340, reported_secs=86400)
    assert output(capsys, monkeypatch, [big, small], "-n", "cluster", "ut", *JAN31) == (
        "      big   2500000        0        0   833333        0   3333333 \n"
        "    small         1        0        0     1439        0      1440 \n"
    )


def test_percentages_and_the_tres_count_parsable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fields = "format=cluster,count,allocated,idle,reported"
    text = output(
        capsys, monkeypatch, [BENCH], "-P", "-t", "percent", "cluster", "ut", fields, *JAN31
    )
    assert text.splitlines()[2] == "Usage reported in Percentage of Total"
    assert text.splitlines()[4:] == [
        "Cluster|TRES Count|Allocated|Idle|Reported",
        "bench|10|25.00%|75.00%|100.00%",
    ]


def test_hours_with_percentages_widen_every_usage_column(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = output(capsys, monkeypatch, [BENCH], "-t", "HourPer", "cluster", "utilization", *JAN31)
    assert text.splitlines()[2:] == [
        "Usage reported in CPU Hours/Percentage of Total",
        "-" * 80,
        "  Cluster         Allocated              Down         PLND Down              Idle "
        "          Planned          Reported ",
        "--------- ----------------- ----------------- ----------------- ----------------- "
        "----------------- ----------------- ",
        "    bench        60(25.00%)          0(0.00%)          0(0.00%)       180(75.00%) "
        "         0(0.00%)      240(100.00%) ",
    ]


def test_account_utilization_by_user(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert output(capsys, monkeypatch, TREE, "cluster", "AccountUtilizationByUser", *JAN31) == (
        HEADER
        + "Cluster/Account/User Utilization 2024-01-31T00:00:00 - 2024-01-31T23:59:59"
        + " (86400 secs)\n"
        + "Usage reported in CPU Minutes\n"
        + HEADER
        + "  Cluster         Account     Login     Proper Name     Used   Energy \n"
        + "--------- --------------- --------- --------------- -------- -------- \n"
        + "    bench            root                               3600        0 \n"
        + "    bench            chem                               1200        0 \n"
        + "    bench            chem       bob             Bob     1200        0 \n"
        + "    bench         science                               2400        0 \n"
        + "    bench         physics                               2400        0 \n"
        + "    bench         physics     alice     Alice Smith     1800        0 \n"
        + "    bench         physics     carol                      600        0 \n"
    )


def test_account_utilization_parsable_in_percent_and_cut_values(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [BENCH, row("bench", "averyveryverylongaccount", "alice", alloc_secs=8640)]
    text = output(
        capsys, monkeypatch, rows, "-p", "-t", "p", "clu", "accountutilizationbyuser", *JAN31
    )
    assert text.splitlines()[4:] == [
        "Cluster|Account|Login|Proper Name|Used|Energy|",
        "bench|averyveryverylongaccount|alice|Alice Smith|1.00%|0.00%|",
    ]
    text = output(
        capsys,
        monkeypatch,
        rows,
        "-n",
        "cluster",
        "AccountUtilizationByUsers",
        "format=acc%-9,used%3",
    )
    assert text == "averyver+      144 \n"


def test_top_usage_groups_accounts_and_keeps_the_top_count(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = output(capsys, monkeypatch, TOP, "user", "TopUsage", "Group", "TopCount=2", *JAN31)
    assert text == (
        HEADER
        + "Top 2 Users 2024-01-31T00:00:00 - 2024-01-31T23:59:59 (86400 secs)\n"
        + "Usage reported in CPU Minutes\n"
        + HEADER
        + "  Cluster     Login     Proper Name         Account     Used   Energy \n"
        + "--------- --------- --------------- --------------- -------- -------- \n"
        + "    bench     alice     Alice Smith   physics, chem     2133        0 \n"
        + "    bench       bob             Bob            chem     1200        0 \n"
    )


def test_top_usage_by_name_with_every_user_in_seconds(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = output(
        capsys, monkeypatch, TOP, "-s", "name", "-t", "s", "-P", "user", "t", "topcount=-1", *JAN31
    )
    assert text.splitlines()[1] == (
        "Top ALL Users 2024-01-31T00:00:00 - 2024-01-31T23:59:59 (86400 secs)"
    )
    assert text.splitlines()[4:] == [
        "Cluster|Login|Proper Name|Account|Used|Energy",
        "bench|alice|Alice Smith|physics|108000|0",
        "bench|alice|Alice Smith|chem|20000|0",
        "bench|bob|Bob|chem|72000|0",
        "bench|carol||physics|36000|0",
    ]


def test_tres_cpu_names_the_tres(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = output(capsys, monkeypatch, [BENCH], "-T", "cpu", "-P", "cluster", "utilization", *JAN31)
    assert text.splitlines()[2] == "Usage reported in TRES Minutes"
    assert text.splitlines()[4:] == [
        "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported",
        "bench|cpu|3600|0|0|10800|0|14400",
    ]


def test_a_cluster_without_usage_prints_only_the_headers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = output(capsys, monkeypatch, [], "-P", "user", "top", *JAN31)
    assert text.splitlines()[4:] == ["Cluster|Login|Proper Name|Account|Used|Energy"]


@pytest.mark.parametrize(
    ("value", "total", "time_format", "shown"),
    [
        (90, 0, MINUTES, "2"),  # 1.5: %.0f rounds half to even
        (150, 0, MINUTES, "2"),
        (5399, 0, HOURS, "1"),
        (7, 0, SECONDS, "7"),
        (1, 3, PERCENT, "33.33%"),
        (0, 0, PERCENT, "0.00%"),
        (60, 240, SECONDS_PER, "60(25.00%)"),
    ],
    ids=["half-even", "half-even-up", "hours", "seconds", "percent", "nothing", "per"],
)
def test_time_strings(value: int, total: int, time_format: int, shown: str) -> None:
    assert time_str(value, total, time_format) == shown


def test_usage_width_counts_digits_between_8_and_19() -> None:
    assert [usage_width(n, MINUTES) for n in (0, 99_999_999, 100_000_000, 10**18, 2**64 - 1)] == [
        8,
        8,
        9,
        19,
        19,
    ]
    assert usage_width(0, SECONDS_PER) == 17
