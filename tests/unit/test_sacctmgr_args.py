"""sacctmgr's command lines, read into AcctAdminRequest dicts (no daemons).

Slurm 24.11's sacctmgr decides which words it accepts: entity and key
abbreviations stop at a fixed least length and are tried in its order,
``where``/``set`` split ``modify``, synonyms (``Names=``, ``Shares=``...)
mean one thing, list values are lower-cased and de-duplicated, and bad
input is refused with its exact lines and exit status 1 before anything is
sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from cli.halt import Halt
from cli.sacctmgr import session
from cli.sacctmgr.words import parse as parse_request
from corral.wire import codec


class Recorder:
    """An ``AcctAdmin`` call that records its requests and finds nothing."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return {"rows": [], "columns": [], "defaults": []}


class NoTerminal:
    """A prompt nobody answers."""

    def read_char(self, timeout: float) -> str | None:
        return None

    def read_line(self) -> str | None:
        return None


def run(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str, list[dict[str, Any]]]:
    call = Recorder()
    status = session.sacctmgr(list(argv), call, NoTerminal())
    out, err = capsys.readouterr()
    return status, out, err, call.requests


def request(*words: str) -> dict[str, object]:
    verbs = {"show": "list", "list": "list", "add": "add", "create": "add", "modify": "modify"}
    return parse_request(verbs.get(words[0], "delete"), list(words[1:])).message()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(("show", "user"), {"verb": "list", "kind": "user", "where": {}}, id="show"),
        pytest.param(("list", "USERS"), {"verb": "list", "kind": "user", "where": {}}, id="case"),
        pytest.param(("lis", "qos"), {"verb": "list", "kind": "qos", "where": {}}, id="lis"),
        pytest.param(("show", "as"), {"verb": "list", "kind": "association", "where": {}}, id="as"),
        pytest.param(("show", "ac"), {"verb": "list", "kind": "account", "where": {}}, id="ac"),
        pytest.param(("show", "acct"), {"verb": "list", "kind": "account", "where": {}}, id="acct"),
        pytest.param(("show", "cl"), {"verb": "list", "kind": "cluster", "where": {}}, id="cl"),
        pytest.param(("show", "tres"), {"verb": "list", "kind": "tres", "where": {}}, id="tres"),
        pytest.param(("show", "q"), {"verb": "list", "kind": "qos", "where": {}}, id="q"),
    ],
)
def test_list_requests(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], expected: dict[str, Any]
) -> None:
    status, _, err, requests = run(capsys, *argv)
    assert (status, err, requests) == (0, "", [expected])


def test_every_request_encodes_as_the_wire_message() -> None:
    message = request("modify", "user", "bob", "set", "qos+=high", "maxjobs=4")
    assert codec.decode("AcctAdminRequest", codec.encode("AcctAdminRequest", message)) == {
        **message,
        "cred": None,
    }


@pytest.mark.parametrize(
    ("words", "where", "settings"),
    [
        pytest.param(
            ("modify", "user", "where", "name=bob", "set", "maxjobs=5", "DefaultAccount=Phys"),
            {"name": "bob"},
            {"maxjobs": "5", "defaultaccount": "phys"},
            id="where and set",
        ),
        pytest.param(
            ("modify", "account", "physics", "set", "Description=Physics Dept"),
            {"name": "physics"},
            {"description": "physics dept"},
            id="bare name before set",
        ),
        pytest.param(
            ("modify", "user", "set", "maxjobs=1", "where", "user=bob"),
            {"name": "bob"},
            {"maxjobs": "1"},
            id="set before where",
        ),
        pytest.param(
            ("modify", "user", "names=bob", "accounts=phys", "set", "share=10"),
            {"name": "bob", "account": "phys"},
            {"fairshare": "10"},
            id="synonyms",
        ),
        pytest.param(
            ("modify", "user", "bob", "set", "FairShare=parent", "MaxW=1:00:00"),
            {"name": "bob"},
            {"fairshare": "parent", "maxwall": "1:00:00"},
            id="abbreviations",
        ),
        pytest.param(
            ("modify", "user", "bob", "set", "qos+=high", "defaultqos-=low"),
            {"name": "bob"},
            {"qos": "+high", "defaultqos": "-low"},
            id="plus and minus",
        ),
        pytest.param(
            ("modify", "user", "bob", "set", "grpcpus=10", "grpnodes=2", "MaxCPUs=4"),
            {"name": "bob"},
            {"grptres": "cpu=10,node=2", "maxtres": "cpu=4"},
            id="pre-TRES limits",
        ),
        pytest.param(
            ("modify", "qos", "normal", "set", "GrpTRES=cpu=10", "MaxJobs=3", "MaxSubmit=9"),
            {"name": "normal"},
            {"grptres": "cpu=10", "maxjobspu": "3", "maxsubmitpu": "9"},
            id="qos per-user limits",
        ),
        pytest.param(
            ("modify", "cluster", "where", "cluster=bench", "set", "qos=normal,high"),
            {"name": "bench"},
            {"qos": "normal,high"},
            id="cluster defaults",
        ),
    ],
)
def test_modify_splits_conditions_from_settings(
    words: tuple[str, ...], where: dict[str, str], settings: dict[str, str]
) -> None:
    message = request(*words)
    assert (message["where"], message["set"], message["commit"]) == (where, settings, False)


@pytest.mark.parametrize(
    ("words", "where", "settings"),
    [
        pytest.param(
            ("add", "account", "Physics,chem", "Description='Physics Dept'", "Org=sci"),
            {"name": "physics,chem"},
            {"description": "physics dept", "organization": "sci"},
            id="account",
        ),
        pytest.param(
            ("add", "acct", "x", "parent=root", "cluster=bench,other", "fairshare=10"),
            {"name": "x"},
            {"parent": "root", "cluster": "bench,other", "fairshare": "10"},
            id="account placed",
        ),
        pytest.param(
            ("add", "user", "bob", "acc=physics", "partition=debug", "adminlevel=Operator"),
            {"name": "bob"},
            {"account": "physics", "partition": "debug", "adminlevel": "Operator"},
            id="user",
        ),
        pytest.param(
            ("add", "user", "name=bob", "DefaultAccount=physics"),
            {"name": "bob"},
            {"defaultaccount": "physics", "account": "physics"},
            id="default account is an account",
        ),
        pytest.param(
            ("create", "qos", "high", "Priority=10", "Flags=DenyOnLimit", "set", "GraceTime=60"),
            {"name": "high"},
            {"priority": "10", "flags": "DenyOnLimit", "gracetime": "60"},
            id="qos; set is ignored",
        ),
        pytest.param(
            ("add", "cluster", "Bench"),
            {"name": "bench"},
            {},
            id="cluster",
        ),
    ],
)
def test_add_names_go_to_where_and_values_to_set(
    words: tuple[str, ...], where: dict[str, str], settings: dict[str, str]
) -> None:
    message = request(*words)
    assert (message["verb"], message["where"], message["set"]) == ("add", where, settings)


@pytest.mark.parametrize(
    ("words", "where"),
    [
        pytest.param(("show", "user", "alice", "Bob"), {"name": "alice,bob"}, id="bare names"),
        pytest.param(
            ("show", "user", "name=Bob,alice,bob"), {"name": "alice,bob"}, id="repeat moves to end"
        ),
        pytest.param(
            ("show", "user", "users=a", "where", "user=b"), {"name": "a,b"}, id="keys add up"
        ),
        pytest.param(("show", "user", "withassoc"), {"withassoc": "yes"}, id="withassoc"),
        pytest.param(
            ("show", "user", "WithAssoc", "WithCoor"),
            {"withassoc": "yes"} | {"withcoord": "yes"},
            id="flags",
        ),
        pytest.param(
            ("show", "assoc", "users=bob", "cluster=bench", "account=phys", "part=debug"),
            {"user": "bob", "cluster": "bench", "account": "phys", "partition": "debug"},
            id="association conditions",
        ),
        pytest.param(("show", "assoc", "5"), {"id": "5"}, id="association bare id"),
        pytest.param(("show", "assoc", "tree"), {"tree": "yes"}, id="tree"),
        pytest.param(("show", "tres", "gres"), {"type": "gres"}, id="tres bare type"),
        pytest.param(("show", "qos", "normal"), {"name": "normal"}, id="qos"),
        pytest.param(("show", "cluster", "clusters=bench"), {"name": "bench"}, id="cluster"),
        pytest.param(
            ("show", "account", "acct=phys", "Desc=X", "o=Sci"),
            {"name": "phys", "description": "x", "organization": "sci"},
            id="account",
        ),
        pytest.param(
            ("delete", "user", "bob", "where", "account=phys", "cluster=bench"),
            {"name": "bob", "account": "phys", "cluster": "bench"},
            id="delete",
        ),
    ],
)
def test_conditions(words: tuple[str, ...], where: dict[str, str]) -> None:
    assert request(*words)["where"] == where


def test_format_stays_on_this_side() -> None:
    parsed = parse_request("list", ["assoc", "format=Cluster,Account%20", "user=bob"])
    assert (parsed.format, parsed.message()["where"]) == (
        ["cluster", "account%20"],
        {"user": "bob"},
    )


def test_associations_option_asks_for_associations(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, _, requests = run(capsys, "-n", "-s", "list", "user", "bob", "format=account%256")
    assert status == 0
    assert requests == [
        {"verb": "list", "kind": "user", "where": {"name": "bob", "withassoc": "yes"}}
    ]


def test_change_asks_before_it_commits(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, _, requests = run(capsys, "delete", "qos", "high")
    assert requests == [
        {"verb": "delete", "kind": "qos", "where": {"name": "high"}, "commit": False}
    ]


def test_immediate_commits_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    _, _, _, requests = run(capsys, "-i", "add", "qos", "high")
    assert [r["commit"] for r in requests] == [True]


@pytest.mark.parametrize(
    ("argv", "err"),
    [
        pytest.param(
            ("show", "user", "foo=bar"),
            " Unknown condition: foo=bar\n Use keyword 'set' to modify value\n",
            id="unknown condition",
        ),
        pytest.param(
            ("show", "qos", "foo=bar"),
            " Unknown condition: foo=bar\n Use keyword 'set' to modify SLURM_PRINT_VALUE\n",
            id="qos unknown condition",
        ),
        pytest.param(
            ("show", "assoc", "foo=bar"), " Unknown condition: foo=bar\n", id="assoc condition"
        ),
        pytest.param(
            ("modify", "user", "bob", "set", "foo=1"),
            " Unknown option: foo=1\n Use keyword 'where' to modify condition\n",
            id="unknown option",
        ),
        pytest.param(
            ("add", "user", "bob", "a=physics"),
            " Unknown option: a=physics\n",
            id="too short for Accounts",
        ),
        pytest.param(
            ("add", "user", "bob", "DefaultAcct=physics"),
            " Unknown option: DefaultAcct=physics\n",
            id="not a prefix",
        ),
        pytest.param(
            ("modify", "account", "x", "set", "name=y"),
            " Can't modify the name of an account\n",
            id="rename account",
        ),
        pytest.param(
            ("modify", "user", "x", "set", "bogus"),
            " Bad format on bogus: End your option with an '=' sign\n",
            id="bare setting",
        ),
        pytest.param(
            ("modify", "cluster", "bench", "set", "grpwall=10"),
            "GrpWall is not a valid option for the root association of a cluster.\n",
            id="cluster grpwall",
        ),
        pytest.param(
            ("add", "frob", "x"),
            'No valid entity in add command\nInput line must include "Account", '
            '"Cluster", "Coordinator", "Federation", "QOS", "Resource", or "User"\n',
            id="unknown entity",
        ),
        pytest.param(
            ("show", "a"),
            'No valid entity in list command\nInput line must include "Account", '
            '"Association", "Cluster", "Configuration",\n"Event", "Federation", "Problem", '
            '"QOS", "Resource", "Reservation",\n"RunAwayJobs", "Stats", "Transaction", '
            '"TRES", "User", or "WCKey"\n',
            id="ambiguous entity",
        ),
        pytest.param(
            ("modify", "c", "x", "set", "fairshare=1"),
            'No valid entity in modify command\nInput line must include "Account", '
            '"Cluster", "Federation", "Job", "QOS", "Resource" or "User"\n',
            id="modify cluster needs five letters",
        ),
        pytest.param(
            ("delete", "q", "x"),
            'No valid entity in delete command\nInput line must include "Account", '
            '"Cluster", "Coordinator", "Federation", "QOS", "Resource", or "User"\n',
            id="delete qos needs two letters",
        ),
        pytest.param(("delete",), "No valid entity in delete command\n", id="no entity"),
        pytest.param(("li", "user"), "invalid keyword: li\n", id="invalid keyword"),
        pytest.param(
            ("show", "wckeys"),
            "sacctmgr: error: list WCKeys is not supported by Corral\n",
            id="entity Corral lacks",
        ),
        pytest.param(("add", "account"), " Need name of account to add.\n", id="no account"),
        pytest.param(("add", "qos", "priority=1"), " Need name of qos to add.\n", id="no qos"),
        pytest.param(
            ("add", "user", "bob"), " Need name of account or wckey to add.\n", id="no account"
        ),
        pytest.param(
            ("modify", "user", "bob"), " You didn't give me anything to set\n", id="no set"
        ),
        pytest.param(
            ("delete", "user"),
            " No conditions given to remove, not executing.\n",
            id="no conditions",
        ),
        pytest.param(
            ("delete", "account", "Root"),
            " You are not allowed to remove the root account.\n Use remove cluster instead.\n",
            id="root account",
        ),
        pytest.param(
            ("-r", "add", "account", "x"),
            "Can't run this command in readonly mode.\n",
            id="readonly",
        ),
        pytest.param(
            ("show", "assoc", "format=cluster,bogus%9"),
            "Unknown field 'bogus'\n",
            id="unknown field",
        ),
        pytest.param(
            ("-x", "show", "user"),
            "sacctmgr: invalid option -- 'x'\nTry \"sacctmgr --help\" for more information\n",
            id="bad option",
        ),
        pytest.param(
            ("--json", "show", "user"),
            "sacctmgr: error: --json is not supported: JSON output is not implemented\n"
            'Try "sacctmgr --help" for more information\n',
            id="json",
        ),
    ],
)
def test_bad_input_is_refused_before_any_call(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], err: str
) -> None:
    status, out, got, requests = run(capsys, *argv)
    assert (status, out, requests) == (1, "", [])
    assert got.startswith(err)


def test_every_unknown_word_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err, _ = run(capsys, "show", "user", "x=1", "withassoc", "y=2")
    assert status == 1
    assert err.count("Unknown condition") == 2


@pytest.mark.parametrize("option", ["-V", "--version", "--vers"])
def test_version(capsys: pytest.CaptureFixture[str], option: str) -> None:
    assert run(capsys, option, "show", "user")[:3] == (0, "slurm 24.11.0\n", "")


@pytest.mark.parametrize("option", ["-h", "--help", "--usage"])
def test_help(capsys: pytest.CaptureFixture[str], option: str) -> None:
    status, out, _, requests = run(capsys, option)
    assert (status, requests) == (0, [])
    assert out == session.HELP


def test_help_command(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _, _ = run(capsys, "help")
    assert status == 0
    assert out == session.HELP


def test_version_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "version")[:3] == (0, "slurm 24.11.0\n", "")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("show user bob", ["show", "user", "bob"], id="plain"),
        pytest.param(
            "add account x description='A B'  org=\"C D\"",
            ["add", "account", "x", "description='A B'", 'org="C D"'],
            id="quotes keep blanks",
        ),
        pytest.param("   ", [], id="blank"),
    ],
)
def test_interactive_lines_split_like_slurm(text: str, words: list[str]) -> None:
    assert session.split_line(text) == words


def test_quoted_values_lose_their_quotes() -> None:
    message = request("add", "account", "x", "description='A B'", 'org="C\'s"')
    assert message["set"] == {"description": "a b", "organization": "c`s"}


def test_parse_raises_halt_with_all_lines() -> None:
    with pytest.raises(Halt) as caught:
        parse_request("list", ["user", "x=1"])
    assert caught.value.lines == (
        " Unknown condition: x=1",
        " Use keyword 'set' to modify value",
    )
