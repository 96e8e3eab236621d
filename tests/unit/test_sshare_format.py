"""sshare's output for hand-built Shares replies, compared with Slurm's layout.

The golden blocks are what Slurm 22.05 printed on the golden cluster
(shared/reference/golden-slurm-22.05.txt): users root/root and bench/root,
no usage. The layout is Slurm's ``print_fields`` (``%*.*s`` with negative
widths left-justified, ``+`` marking a cut value, ``%f`` doubles).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from cli import boundary, sshare
from cli.printfields import NOT_PARSABLE, Printer
from controller.core.fairshare import ShareTree, Usage, share_tree
from corral.errors import SlurmError
from corral.wire import codec

TRES_RUN = "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0"


def wire(tree: ShareTree, cluster: str = "bench") -> dict[str, Any]:
    """A Shares reply as the controller builds it from a ``ShareTree``."""
    rows = []
    for index, row in enumerate(tree.rows, 1):
        record = codec.decode("ShareInfo", b"")
        record.update(
            assoc_id=index,
            cluster=cluster,
            name=row.user or row.account,
            parent=row.parent,
            user=bool(row.user),
            raw_shares=row.raw_shares,
            norm_shares=row.norm_shares,
            raw_usage=int(row.raw_usage),
            norm_usage=row.norm_usage,
            effective_usage=row.effective_usage,
            fairshare=row.fairshare,
            level_fs=row.level_fs,
            tres_run_mins=TRES_RUN,
        )
        rows.append(record)
    reply = codec.decode("SharesReply", b"")
    reply.update(shares=rows, fair_tree=tree.fair_tree)
    return reply


GOLDEN = wire(share_tree(Usage(), [("bench", "root")]))

GOLDEN_DEFAULT = """\
Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare 
-------------------- ---------- ---------- ----------- ----------- ------------- ---------- 
root                                          0.000000           0      1.000000            
 root                      root          1    0.500000           0      0.000000   1.000000 
 bench                                   1    0.500000           0      0.000000            
  bench                    root          1    1.000000           0      0.000000   1.000000 
"""  # noqa: W291

GOLDEN_LONG = """\
Account                    User  RawShares  NormShares    RawUsage   NormUsage  EffectvUsage  FairShare    LevelFS                    GrpTRESMins                    TRESRunMins 
-------------------- ---------- ---------- ----------- ----------- ----------- ------------- ---------- ---------- ------------------------------ ------------------------------ 
root                                          0.000000           0                  1.000000                                                      cpu=0,mem=0,energy=0,node=0,b+ 
 root                      root          1    0.500000           0    0.000000      0.000000   1.000000        inf                                cpu=0,mem=0,energy=0,node=0,b+ 
 bench                                   1    0.500000           0    0.000000      0.000000                   inf                                cpu=0,mem=0,energy=0,node=0,b+ 
  bench                    root          1    1.000000           0    0.000000      0.000000   1.000000        inf                                cpu=0,mem=0,energy=0,node=0,b+ 
"""  # noqa: E501, W291


PARTITIONS = """\
Account                    User    Partition  RawShares  NormShares    RawUsage  EffectvUsage  FairShare 
-------------------- ---------- ------------ ---------- ----------- ----------- ------------- ---------- 
root                                                       0.000000           0      1.000000            
 root                      root                       1    0.500000           0      0.000000   1.000000 
 bench                                                1    0.500000           0      0.000000            
  bench                    root                       1    1.000000           0      0.000000   1.000000 
"""  # noqa: E501, W291


class FakeClient:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[tuple[str, Any]] = []

    def call(self, method: str, request: Any) -> Any:
        self.requests.append((method, request))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def run(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: Any,
    *argv: str,
    me: str | None = "root",
) -> tuple[int, str, str, FakeClient]:
    client = FakeClient(answer)
    monkeypatch.setattr(boundary, "connect", lambda: client)
    monkeypatch.setattr(sshare, "my_user_name", lambda: me)
    status = sshare.sshare(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err, client


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param((), GOLDEN_DEFAULT, id="default"),
        pytest.param(("-l", "-a"), GOLDEN_LONG, id="long"),
        pytest.param(("-n",), "".join(GOLDEN_DEFAULT.splitlines(True)[2:]), id="noheader"),
        pytest.param(("-h",), "".join(GOLDEN_DEFAULT.splitlines(True)[2:]), id="-h noheader"),
        pytest.param(
            ("-U",),
            "".join(GOLDEN_DEFAULT.splitlines(True)[i] for i in (0, 1, 3, 5)),
            id="users only",
        ),
        pytest.param(
            ("-p",),
            "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare|\n"
            "root|||0.000000|0|1.000000||\n"
            " root|root|1|0.500000|0|0.000000|1.000000|\n"
            " bench||1|0.500000|0|0.000000||\n"
            "  bench|root|1|1.000000|0|0.000000|1.000000|\n",
            id="parsable",
        ),
        pytest.param(
            ("-P", "-n"),
            "root|||0.000000|0|1.000000|\n"
            " root|root|1|0.500000|0|0.000000|1.000000\n"
            " bench||1|0.500000|0|0.000000|\n"
            "  bench|root|1|1.000000|0|0.000000|1.000000\n",
            id="parsable2",
        ),
        pytest.param(
            ("-o", "acc%8,User%-6,ID,Cluster"),
            " Account User       ID    Cluster \n"
            "-------- ------ ------ ---------- \n"
            "    root             1      bench \n"
            "    root root        2      bench \n"
            "   bench             3      bench \n"
            "   bench root        4      bench \n",
            id="format with widths",
        ),
        pytest.param(("-m",), PARTITIONS, id="partition column"),
    ],
)
def test_reports(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    expected: str,
) -> None:
    status, out, err, _ = run(monkeypatch, capsys, GOLDEN, *argv)
    assert (status, err) == (0, "")
    assert out == expected


@pytest.mark.parametrize(
    ("argv", "me", "sent"),
    [
        pytest.param((), "root", {"users": ["root"], "accounts": []}, id="me by default"),
        pytest.param((), None, {"users": [], "accounts": []}, id="no name: everyone"),
        pytest.param(("-a",), "root", {"users": [], "accounts": []}, id="all"),
        pytest.param(("-u", "-1"), "root", {"users": [], "accounts": []}, id="-u -1"),
        pytest.param(("-u", "x,y,x"), "root", {"users": ["x", "y"], "accounts": []}, id="users"),
        pytest.param(("-u", "0"), "me", {"users": ["root"], "accounts": []}, id="uid"),
        pytest.param(
            ("-A", "Bench,bench", "-A", "phys"),
            "root",
            {"users": ["root"], "accounts": ["bench", "phys"]},
            id="accounts, lowercased",
        ),
    ],
)
def test_requests(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    me: str | None,
    sent: dict[str, Any],
) -> None:
    _, _, _, client = run(monkeypatch, capsys, GOLDEN, *argv, me=me)
    assert client.requests == [("Shares", sent)]


def test_usage_and_fair_tree_values() -> None:
    # A: a1 30, a2 10; B: b1 60 (test_fairshare's worked Fair Tree example).
    tree = share_tree(
        Usage({("A", "a1"): 30.0, ("A", "a2"): 10.0, ("B", "b1"): 60.0}), root_user=False
    )
    text = sshare.render(
        wire(tree), sshare.parse_settings(["-l", "-o", "A,User,Raw,Eff,F,L"], None)
    )
    assert text == (
        "Account                    User  RawShares  EffectvUsage  FairShare    LevelFS \n"
        "-------------------- ---------- ---------- ------------- ---------- ---------- \n"
        "root                                            1.000000                       \n"
        " A                                       1      0.400000              1.250000 \n"
        "  A                          a1          1      0.750000   0.666667   0.666667 \n"
        "  A                          a2          1      0.250000   1.000000   2.000000 \n"
        " B                                       1      0.600000              0.833333 \n"
        "  B                          b1          1      1.000000   0.333333   1.000000 \n"
    )


def test_classic_prints_every_fairshare() -> None:
    tree = share_tree(Usage({("A", "u"): 10.0}), fair_tree=False, root_user=False)
    text = sshare.render(wire(tree), sshare.parse_settings(["-n", "-o", "A,F"], None))
    # root: 2**(-1/1); A and A/u: UE 1, S 1 -> 0.5 as well
    assert text == (
        "root                   0.500000 \n"
        " A                     0.500000 \n"
        "  A                    0.500000 \n"
    )


def test_classic_long_default_has_no_level_fs() -> None:
    tree = share_tree(Usage(), fair_tree=False)
    header = sshare.render(wire(tree), sshare.parse_settings(["-l"], None)).splitlines()[0]
    assert "LevelFS" not in header and "NormUsage" in header


@pytest.mark.parametrize(
    ("value", "width", "expected"),
    [
        pytest.param(0.5, 11, "   0.500000 ", id="fits"),
        pytest.param(0.5, -11, "0.500000    ", id="left"),
        pytest.param(1234567.125, 11, "1.23457e+06 ", id="too wide: %e narrowed"),
        pytest.param(12345678901.0, 13, "1.2345679e+10 ", id="wide column"),
        pytest.param(math.inf, 10, "       inf ", id="infinite"),
        pytest.param(None, 10, "           ", id="unset"),
        pytest.param(4294967294.0, 10, "           ", id="NO_VAL"),
    ],
)
def test_double(value: float | None, width: int, expected: str) -> None:
    assert Printer(NOT_PARSABLE).double(value, width, False) == expected


@pytest.mark.parametrize(
    ("value", "width", "expected"),
    [
        pytest.param("abc", 5, "  abc ", id="right"),
        pytest.param("abc", -5, "abc   ", id="left"),
        pytest.param("abcdefgh", 5, "abcd+ ", id="cut with a plus"),
        pytest.param(None, 5, "      ", id="unset"),
    ],
)
def test_text(value: str | None, width: int, expected: str) -> None:
    assert Printer(NOT_PARSABLE).text(value, width, False) == expected


def test_account_names_without_root() -> None:
    rows = [
        {"name": "bench", "parent": "root", "user": False},
        {"name": "alice", "parent": "bench", "user": True},
    ]
    assert sshare.account_names(rows) == ["bench", " bench"]


def test_empty_reply_prints_the_header(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = dict(GOLDEN, shares=[])
    status, out, _, _ = run(monkeypatch, capsys, empty)
    assert (status, out) == (0, "".join(GOLDEN_DEFAULT.splitlines(True)[:2]))


@pytest.mark.parametrize(
    ("argv", "answer", "status", "out", "err"),
    [
        pytest.param(("--version",), GOLDEN, 0, "slurm 24.11.0\n", "", id="version"),
        pytest.param(("--help",), GOLDEN, 0, sshare.USAGE, "", id="help"),
        pytest.param(("--usage",), GOLDEN, 0, sshare.USAGE, "", id="usage"),
        pytest.param(
            ("-o", "Bogus"), GOLDEN, 1, "", 'sshare: error: Invalid field requested: "bogus"\n',
            id="bad field",
        ),
        pytest.param(
            (), SlurmError(2002), 1, "",
            "Couldn't get shares from controller: Access/permission denied\n",
            id="controller error",
        ),
        pytest.param(
            ("-u", "4000000000"), GOLDEN, 1, "", "Invalid user id: 4000000000\n", id="bad uid"
        ),
    ],
)  # fmt: skip
def test_early_ends(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    answer: Any,
    status: int,
    out: str,
    err: str,
) -> None:
    got = run(monkeypatch, capsys, answer, *argv)
    assert got[:3] == (status, out, err)


def test_help_format() -> None:
    assert sshare.help_format() == (
        "Account           Cluster           EffectvUsage      FairShare        \n"
        "GrpTRESMins       GrpTRESRaw        ID                LevelFS          \n"
        "NormShares        NormUsage         Partition         RawShares        \n"
        "RawUsage          TRESRunMins       User             \n"
    )
