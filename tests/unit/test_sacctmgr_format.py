"""sacctmgr's output for hand-built AcctAdmin replies, compared with Slurm's.

The golden blocks are what Slurm 22.05 printed on the golden cluster
(shared/reference/golden-slurm-22.05.txt): cluster ``bench``, accounts root
and bench, user root, QOS normal. The daemon sends rows already formatted
and keyed by sacctmgr's headers; the layout (widths, ``+`` cut marks, ``|``
forms) is Slurm's ``print_fields``. The change dialogues run against fake
calls and a scripted terminal, and dump/load round-trip through a small
in-memory accounting database.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from cli.sacctmgr import session
from cli.sacctmgr.text import admin_level
from corral.errors import SlurmError
from corral.timefmt import format_hms, parse_duration

GOLDEN_ASSOC_P = """\
Cluster|Account|User|Partition|Share|Priority|GrpJobs|GrpTRES|GrpSubmit|GrpWall|GrpTRESMins|MaxJobs|MaxTRES|MaxTRESPerNode|MaxSubmit|MaxWall|MaxTRESMins|QOS|Def QOS|GrpTRESRunMins
bench|root|||1|||||||||||||normal||
bench|root|root||1|||||||||||||normal||
bench|bench|||1|||||||||||||normal||
bench|bench|root||1|||||||||||||normal||
"""  # noqa: E501

GOLDEN_QOS_P = """\
Name|Priority|GraceTime|Preempt|PreemptExemptTime|PreemptMode|Flags|UsageThres|UsageFactor|GrpTRES|GrpTRESMins|GrpTRESRunMins|GrpJobs|GrpSubmit|GrpWall|MaxTRES|MaxTRESPerNode|MaxTRESMins|MaxWall|MaxTRESPU|MaxJobsPU|MaxSubmitPU|MaxTRESPA|MaxJobsPA|MaxSubmitPA|MinTRES
normal|0|00:00:00|||cluster|||1.000000|||||||||||||||||
"""

GOLDEN_CLUSTER = """\
   Cluster     ControlHost  ControlPort   RPC     Share GrpJobs       GrpTRES GrpSubmit MaxJobs       MaxTRES MaxSubmit     MaxWall                  QOS   Def QOS 
---------- --------------- ------------ ----- --------- ------- ------------- --------- ------- ------------- --------- ----------- -------------------- --------- 
     bench       127.0.0.1         6817  9728         1                                                                                           normal           
"""  # noqa: E501, W291


ASSOC_COLUMNS = GOLDEN_ASSOC_P.splitlines()[0].split("|")
QOS_COLUMNS = GOLDEN_QOS_P.splitlines()[0].split("|")


def headers(table: str) -> list[str]:
    """The headers of a table, read by the columns its dashes mark."""
    title, dashes = table.splitlines()[:2]
    spans, start = [], 0
    for run in dashes.split(" ")[:-1]:
        spans.append((start, start + len(run)))
        start += len(run) + 1
    return [title[a:b].strip() for a, b in spans]


def row(**fields: str) -> dict[str, Any]:
    return {"fields": {key.replace("_", " "): value for key, value in fields.items()}}


CLUSTER_COLUMNS = headers(GOLDEN_CLUSTER)

GOLDEN_REPLIES: dict[str, dict[str, Any]] = {
    "association": {
        "rows": [
            row(Cluster="bench", Account="root", Share="1", QOS="normal"),
            row(Cluster="bench", Account="root", User="root", Share="1", QOS="normal"),
            row(Cluster="bench", Account="bench", Share="1", QOS="normal", ParentName="root"),
            row(Cluster="bench", Account="bench", User="root", Share="1", QOS="normal"),
        ],
        "columns": [*ASSOC_COLUMNS, "ParentName"],
        "defaults": ASSOC_COLUMNS,
    },
    "qos": {
        "rows": [
            row(
                Name="normal",
                Priority="0",
                GraceTime="00:00:00",
                PreemptMode="cluster",
                UsageFactor="1.000000",
            )
        ],
        "columns": QOS_COLUMNS,
        "defaults": QOS_COLUMNS,
    },
    "cluster": {
        "rows": [
            row(
                Cluster="bench",
                ControlHost="127.0.0.1",
                ControlPort="6817",
                RPC="9728",
                Share="1",
                QOS="normal",
            )
        ],
        "columns": CLUSTER_COLUMNS,
        "defaults": CLUSTER_COLUMNS,
    },
}


class Golden:
    """An AcctAdmin call answering ``list`` with the golden cluster's rows."""

    def __init__(self, replies: dict[str, dict[str, Any]] | None = None) -> None:
        self.replies = GOLDEN_REPLIES if replies is None else replies
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return self.replies.get(request["kind"], {"rows": []})


class Script:
    """A terminal whose keys are given in advance; None is a 30-second silence."""

    def __init__(self, keys: str | list[str | None] = "", lines: tuple[str, ...] = ()) -> None:
        self.keys: list[str | None] = list(keys)
        self.lines = list(lines)
        self.waited: list[float] = []

    def read_char(self, timeout: float) -> str | None:
        self.waited.append(timeout)
        return self.keys.pop(0) if self.keys else ""

    def read_line(self) -> str | None:
        return self.lines.pop(0) if self.lines else None


def run(
    capsys: pytest.CaptureFixture[str], call: Any, *argv: str, keys: Any = ""
) -> tuple[int, str, str]:
    status = session.sacctmgr(list(argv), call, Script(keys))
    out, err = capsys.readouterr()
    return status, out, err


# ----------------------------------------------------------------- tables
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(("show", "assoc", "-P"), GOLDEN_ASSOC_P, id="show assoc -P"),
        pytest.param(("show", "qos", "-P"), GOLDEN_QOS_P, id="show qos -P"),
        pytest.param(("show", "cluster"), GOLDEN_CLUSTER, id="show cluster"),
        pytest.param(
            ("-p", "list", "assoc"),
            "".join(line + "|\n" for line in GOLDEN_ASSOC_P.splitlines()),
            id="-p ends every field",
        ),
        pytest.param(
            ("-n", "show", "cluster"),
            GOLDEN_CLUSTER.splitlines(True)[2],
            id="-n noheader",
        ),
    ],
)
def test_golden_tables(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], expected: str
) -> None:
    assert run(capsys, Golden(), *argv) == (0, expected, "")


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        pytest.param(
            "format=cluster,account,user",
            "   Cluster    Account       User \n"
            "---------- ---------- ---------- \n"
            "     bench       root            \n"
            "     bench       root       root \n"
            "     bench      bench            \n"
            "     bench      bench       root \n",
            id="names and default widths",
        ),
        pytest.param(
            "format=Acc%3,ParentName,Share%-4,QOS%2",
            "Acc ParentName Shar QO \n"
            "--- ---------- ---- -- \n"
            "ro+            1    n+ \n"
            "ro+            1    n+ \n"
            "be+       root 1    n+ \n"
            "be+            1    n+ \n",
            id="widths, cuts, left justified",
        ),
        pytest.param(
            "format=share%0,account,account",
            "    Share    Account \n"
            "--------- ---------- \n"
            "        1       root \n"
            "        1       root \n"
            "        1      bench \n"
            "        1      bench \n",
            id="width 0 is the default, repeats dropped",
        ),
    ],
)
def test_format_chooses_columns(
    capsys: pytest.CaptureFixture[str], fmt: str, expected: str
) -> None:
    assert run(capsys, Golden(), "show", "assoc", fmt) == (0, expected, "")


def test_numbers_overflow_and_doubles_narrow(capsys: pytest.CaptureFixture[str]) -> None:
    replies = {
        "qos": {
            "rows": [
                row(Name="longer-than-ten", Priority="12345678901", UsageFactor="123456.500000")
            ],
        }
    }
    status, out, _ = run(capsys, Golden(replies), "-n", "show", "qos", "format=name,prio,usagef%9")
    assert status == 0
    assert out == "longer-th+ 12345678901 1.235e+05 \n"


def test_account_for_snakemake(capsys: pytest.CaptureFixture[str]) -> None:
    """snakemake's account check: ``sacctmgr -n -s list user U format=account%256``."""
    replies = {"user": {"rows": [row(User="root", Account="bench", Cluster="bench")]}}
    call = Golden(replies)
    status, out, _ = run(capsys, call, "-n", "-s", "list", "user", "root", "format=account%256")
    assert (status, out) == (0, " " * 251 + "bench \n")
    assert call.requests[0]["where"] == {"name": "root", "withassoc": "yes"}


def test_default_widths_of_slurm_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    replies = {"qos": {"rows": [row(Name="normal", Flags="DenyOnLimit")], "defaults": []}}
    _, out, _ = run(capsys, Golden(replies), "show", "qos")
    header = out.splitlines()[0]
    assert header.split()[:8] == [
        "Name",
        "Priority",
        "GraceTime",
        "Preempt",
        "PreemptExemptTime",
        "PreemptMode",
        "Flags",
        "UsageThres",
    ]
    assert " " * 35 + "Flags " in header  # Flags%40
    assert "MaxTRESRunMinsPA " in header and " " * 6 + "MaxTRESRunMinsPA" in header


def test_withassoc_adds_slurm_columns(capsys: pytest.CaptureFixture[str]) -> None:
    replies = {
        "user": {
            "rows": [row(User="root", Def_Acct="root", Admin="Administrator", Cluster="bench")],
            "defaults": ["User", "Def Acct", "Admin"],
        }
    }
    _, out, _ = run(capsys, Golden(replies), "-P", "show", "user", "withassoc")
    assert out == (
        "User|Def Acct|Admin|Cluster|Account|Partition|Share|Priority|MaxJobs|MaxNodes|"
        "MaxCPUs|MaxSubmit|MaxWall|MaxCPUMins|QOS|Def QOS\n"
        "root|root|Administrator|bench||||||||||||\n"
    )


def test_daemon_errors_reach_the_boundary() -> None:
    def refuse(request: dict[str, Any]) -> dict[str, Any]:
        raise SlurmError(1, "Access/permission denied")

    with pytest.raises(SlurmError):
        session.sacctmgr(["show", "user"], refuse, Script())


# ----------------------------------------------------------------- changes
class Changes:
    """An AcctAdmin call answering every change with the same rows."""

    def __init__(self, *rows: dict[str, Any]) -> None:
        self.rows = list(rows)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(request)
        return {"rows": self.rows}


PHYSICS = (
    row(Account="physics"),
    row(Cluster="bench", Account="physics", ParentName="root"),
)
ADD_PHYSICS = """\
 Adding Account(s)
  physics
 Settings
  Description     = physics dept
  Organization    = Parent/Account Name
 Associations =
  C = bench      A = physics             
 Settings
  Fairshare     = 10
  Parent        = root
Would you like to commit changes? (You have 30 seconds to decide)
(N/y): 
"""  # noqa: W291
ADD_ARGV = ("add", "account", "physics", "Description=Physics Dept", "parent=root", "share=10")


def test_add_account_commits_on_y(capsys: pytest.CaptureFixture[str]) -> None:
    call = Changes(*PHYSICS)
    assert run(capsys, call, *ADD_ARGV, keys="y") == (0, ADD_PHYSICS, "")
    assert [r["commit"] for r in call.requests] == [False, True]
    assert call.requests[1] == {
        "verb": "add",
        "kind": "account",
        "where": {"name": "physics"},
        "set": {"description": "physics dept", "parent": "root", "fairshare": "10"},
        "commit": True,
    }


@pytest.mark.parametrize(
    ("keys", "tail"),
    [
        pytest.param("n", "(N/y): \n Changes Discarded\n", id="n"),
        pytest.param("\n", "(N/y): \n Changes Discarded\n", id="enter"),
        pytest.param("", "(N/y): \n Changes Discarded\n", id="end of input"),
        pytest.param([None], "(N/y): timeout\n Changes Discarded\n", id="30 seconds"),
        pytest.param(
            "xY", "(N/y): \nY or N please\n(N/y): \n", id="asks again until it understands"
        ),
    ],
)
def test_commit_prompt(capsys: pytest.CaptureFixture[str], keys: Any, tail: str) -> None:
    call = Changes(*PHYSICS)
    status, out, _ = run(capsys, call, *ADD_ARGV, keys=keys)
    assert status == 0
    assert out == ADD_PHYSICS.removesuffix("(N/y): \n") + tail
    committed = tail.endswith("(N/y): \n")
    assert [r["commit"] for r in call.requests] == [False, True] if committed else [False]


def test_immediate_commits_and_says_the_same(capsys: pytest.CaptureFixture[str]) -> None:
    call = Changes(*PHYSICS)
    status, out, _ = run(capsys, call, "-i", *ADD_ARGV)
    assert (status, out) == (0, ADD_PHYSICS.split("Would you")[0])
    assert [r["commit"] for r in call.requests] == [True]


@pytest.mark.parametrize(
    ("argv", "rows", "expected", "status"),
    [
        pytest.param(
            ("add", "user", "bob", "account=physics", "AdminLevel=admin", "MaxWall=1-0"),
            (row(User="bob"), row(Cluster="bench", Account="physics", User="bob")),
            " Adding User(s)\n  bob\n Settings\n  Admin Level     = Administrator\n"
            " Associations =\n  C = bench      A = physics              U = bob      \n"
            " Non Default Settings\n  MaxWall       = 1-00:00:00\n",
            0,
            id="add user",
        ),
        pytest.param(
            ("add", "user", "bob", "DefaultAccount=physics", "partition=debug", "GrpJobs=-1"),
            (row(Cluster="bench", Account="physics", User="bob", Partition="debug"),),
            " Associations =\n  C = bench      A = physics              U = bob       P = debug\n"
            " Non Default Settings\n  GrpJobs       = NONE\n",
            0,
            id="add association of a known user",
        ),
        pytest.param(
            ("add", "user", "bob", "account=physics"),
            (),
            "Request didn't affect anything\nNothing added.\nMake sure the accounts requested "
            "here have been added to the system/cluster. (sacctmgr add account...)\n",
            1,
            id="user exists",
        ),
        pytest.param(
            ("add", "account", "physics"),
            (),
            " Request didn't affect anything\n",
            1,
            id="account exists",
        ),
        pytest.param(
            ("add", "qos", "high,low", "Priority=10", "UsageFactor=2", "MaxJobsPU=4", "GrpJobs=-1"),
            (row(Name="high"), row(Name="low")),
            " Adding QOS(s)\n  high\n  low\n Settings\n  Description    = low\n"
            "  GrpJobs                  = NONE\n"
            "  MaxJobsPerUser = 4\n"
            "  Priority                 = 10\n"
            "  UsageFactor              = 2.0000\n",
            0,
            id="add qos",
        ),
        pytest.param(("add", "qos", "normal"), (), " Nothing new added.\n", 1, id="qos exists"),
        pytest.param(
            ("add", "cluster", "bench,other", "fairshare=5"),
            (row(Cluster="other"),),
            " This cluster bench already exists.  Not adding.\n Adding Cluster(s)\n"
            "  Name           = other\n Setting\n  Default Limits:\n  Fairshare     = 5\n",
            0,
            id="add cluster",
        ),
        pytest.param(
            ("add", "cluster", "bench"),
            (),
            " This cluster bench already exists.  Not adding.\n",
            1,
            id="cluster exists",
        ),
        pytest.param(
            ("modify", "user", "bob", "set", "MaxJobs=3", "DefaultAccount=physics"),
            (row(User="bob"), row(Cluster="bench", Account="physics", User="bob")),
            " Modified users...\n  bob\n Modified user associations...\n"
            "  C = bench      A = physics              U = bob      \n",
            0,
            id="modify user",
        ),
        pytest.param(
            ("modify", "account", "physics", "set", "parent=science"),
            (row(Cluster="bench", Account="physics", ParentName="science"),),
            " Modified account associations...\n  C = bench      A = physics of science\n",
            0,
            id="modify account association",
        ),
        pytest.param(
            ("modify", "account", "physics", "set", "description=x", "maxjobs=2"),
            (row(Account="physics"),),
            " Modified accounts...\n  physics\n Nothing modified\n",
            1,
            id="half modified",
        ),
        pytest.param(
            ("modify", "qos", "normal", "set", "priority=5"),
            (row(Name="normal"),),
            " Modified qos...\n  normal\n",
            0,
            id="modify qos",
        ),
        pytest.param(
            ("modify", "cluster", "bench", "set", "qos=normal"),
            (row(Cluster="bench", Account="root"),),
            " Setting\n  Default Limits:\n  QOS           = normal\n"
            " Modified cluster defaults for associations...\n  C = bench      A = root\n",
            0,
            id="modify cluster",
        ),
        pytest.param(
            ("modify", "qos", "nothing", "set", "priority=5"),
            (),
            " Nothing modified\n",
            1,
            id="nothing modified",
        ),
        pytest.param(
            ("delete", "user", "bob", "account=physics"),
            (row(Cluster="bench", Account="physics", User="bob"),),
            " Deleting user associations...\n  C = bench      A = physics    U = bob      \n",
            0,
            id="delete user association",
        ),
        pytest.param(
            ("delete", "account", "theory"),
            (row(Account="theory"),),
            " Deleting accounts...\n  theory\n",
            0,
            id="delete account",
        ),
        pytest.param(
            ("delete", "account", "theory", "cluster=bench"),
            (row(Cluster="bench", Account="theory", ParentName="physics"),),
            " Deleting account associations...\n  C = bench      A = theory of physics\n",
            0,
            id="delete account association",
        ),
        pytest.param(
            ("remove", "qos", "high"),
            (row(Name="high"),),
            " Deleting QOS(s)...\n  high\n",
            0,
            id="delete qos",
        ),
        pytest.param(
            ("delete", "cluster", "other"),
            (row(Cluster="other"),),
            " Deleting clusters...\n  other\n",
            0,
            id="delete cluster",
        ),
        pytest.param(
            ("delete", "user", "nobody"), (), " Nothing deleted\n", 1, id="nothing deleted"
        ),
    ],
)
def test_change_descriptions(
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    rows: tuple[dict[str, Any], ...],
    expected: str,
    status: int,
) -> None:
    call = Changes(*rows)
    assert run(capsys, call, "-i", *argv) == (status, expected, "")
    assert len(call.requests) == 1


def test_nothing_to_commit_asks_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    call = Changes()
    assert run(capsys, call, "delete", "user", "nobody") == (1, " Nothing deleted\n", "")
    assert [r["commit"] for r in call.requests] == [False]


def test_modify_without_where_asks_first(capsys: pytest.CaptureFixture[str]) -> None:
    call = Changes(row(Name="normal"))
    status, out, _ = run(capsys, call, "modify", "qos", "set", "priority=1", keys="n")
    assert (status, call.requests) == (0, [])
    assert out == (
        "You didn't set any conditions with 'WHERE'.\n"
        "Are you sure you want to continue? (You have 30 seconds to decide)\n(N/y): \nAborted\n"
    )


def test_prompt_waits_thirty_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    terminal = Script("n")
    session.sacctmgr(list(ADD_ARGV), Changes(*PHYSICS), terminal)
    capsys.readouterr()
    assert terminal.waited == [30.0]


# ----------------------------------------------------------------- interactive
def test_interactive_mode(capsys: pytest.CaptureFixture[str]) -> None:
    lines = ("# comment", "show cluster", "bogus", "!!", "show qos format=name", "exit", "bogus")
    terminal = Script(lines=lines)
    status = session.sacctmgr([], Golden(), terminal)
    out, err = capsys.readouterr()
    assert status == 1
    assert out.startswith("sacctmgr: sacctmgr: " + GOLDEN_CLUSTER + "sacctmgr: ")
    assert out.endswith("sacctmgr:       Name \n---------- \n    normal \nsacctmgr: ")
    assert err == "invalid keyword: bogus\ninvalid keyword: bogus\n"


def test_interactive_mode_ends_with_input(capsys: pytest.CaptureFixture[str]) -> None:
    status = session.sacctmgr([], Golden(), Script(lines=("show qos",)))
    out, _ = capsys.readouterr()
    assert status == 0
    assert out.endswith("\nsacctmgr: \n")


# ----------------------------------------------------------------- dump and load
_LIMIT_HEADERS = {
    "fairshare": "Share",
    "grpjobs": "GrpJobs",
    "grpsubmitjobs": "GrpSubmit",
    "grptres": "GrpTRES",
    "maxjobs": "MaxJobs",
    "maxsubmitjobs": "MaxSubmit",
    "maxtres": "MaxTRES",
    "maxwall": "MaxWall",
    "grpwall": "GrpWall",
    "priority": "Priority",
    "qos": "QOS",
    "defaultqos": "Def QOS",
}


class Database:
    """An accounting daemon in a few dicts: enough of ``list`` and ``add`` for dump and load."""

    def __init__(self) -> None:
        self.clusters: dict[str, dict[str, str]] = {}
        self.accounts: dict[str, dict[str, str]] = {}
        self.users: dict[str, dict[str, str]] = {}
        self.assocs: list[dict[str, str]] = []

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        verb, kind = request["verb"], request["kind"]
        where = request.get("where", {})
        if verb == "list":
            return {"rows": [{"fields": dict(r)} for r in self._list(kind, where)]}
        assert verb == "add"
        names = where["name"].split(",")
        new = getattr(self, f"_add_{kind}")(names, request["set"])
        if request["commit"]:
            for table, record in new:
                if table is self.assocs:
                    self.assocs.append(record)
                else:
                    table[record["name"]] = record["row"]
        return {"rows": [{"fields": r.get("row", r)} for _, r in new]}

    def _list(self, kind: str, where: dict[str, str]) -> list[dict[str, str]]:
        if kind == "cluster":
            return [r for name, r in self.clusters.items() if name in where["name"].split(",")]
        if kind == "association":
            return [r for r in self.assocs if r["Cluster"] == where["cluster"]]
        return list({"user": self.users, "account": self.accounts}[kind].values())

    def _assoc(self, settings: dict[str, str], **names: str) -> dict[str, str]:
        record = {"User": "", "Partition": "", "ParentName": "", "Share": "1", **names}
        for key, header in _LIMIT_HEADERS.items():
            if key in settings:
                value = settings[key]
                if key in ("maxwall", "grpwall"):
                    value = format_hms(parse_duration(value) * 60)
                record[header] = value
        record.setdefault("QOS", "normal")
        return record

    def _exists(self, cluster: str, account: str, user: str = "", part: str = "") -> bool:
        key = (cluster, account, user, part)
        return any(
            (r["Cluster"], r["Account"], r["User"], r["Partition"]) == key for r in self.assocs
        )

    def _add_cluster(self, names: list[str], settings: dict[str, str]) -> list[Any]:
        new: list[Any] = []
        for name in names:
            if name not in self.clusters:
                new.append((self.clusters, {"name": name, "row": {"Cluster": name}}))
                new.append((self.assocs, self._assoc(settings, Cluster=name, Account="root")))
                root = self._assoc({}, Cluster=name, Account="root", User="root")
                new.append((self.assocs, root))
                admin = {"User": "root", "Def Acct": "root", "Admin": "Administrator"}
                new.append((self.users, {"name": "root", "row": admin}))
                account = {"Account": "root", "Descr": "default root account", "Org": "root"}
                new.append((self.accounts, {"name": "root", "row": account}))
        return new

    def _add_account(self, names: list[str], settings: dict[str, str]) -> list[Any]:
        new: list[Any] = []
        parent = settings.get("parent", "root")
        for name in names:
            if name not in self.accounts:
                org = settings.get("organization", parent if parent != "root" else name)
                record = {"Account": name, "Descr": settings.get("description", name), "Org": org}
                new.append((self.accounts, {"name": name, "row": record}))
            for cluster in settings.get("cluster", ",".join(self.clusters)).split(","):
                if not self._exists(cluster, name):
                    assoc = self._assoc(settings, Cluster=cluster, Account=name, ParentName=parent)
                    new.append((self.assocs, assoc))
        return new

    def _add_user(self, names: list[str], settings: dict[str, str]) -> list[Any]:
        new: list[Any] = []
        accounts = settings["account"].split(",")
        part = settings.get("partition", "")
        for name in names:
            if name not in self.users:
                record = {
                    "User": name,
                    "Def Acct": settings.get("defaultaccount", accounts[0]),
                    "Admin": admin_level(settings.get("adminlevel", "none")),
                }
                new.append((self.users, {"name": name, "row": record}))
            for cluster in settings.get("cluster", ",".join(self.clusters)).split(","):
                for account in accounts:
                    if not self._exists(cluster, account, name, part):
                        assoc = self._assoc(
                            settings, Cluster=cluster, Account=account, User=name, Partition=part
                        )
                        new.append((self.assocs, assoc))
        return new


def build(database: Database, capsys: pytest.CaptureFixture[str]) -> None:
    for words in (
        "add cluster bench",
        "add account physics cluster=bench Description=Physics Organization=Science share=10",
        "add account theory parent=physics cluster=bench",
        "add user alice account=physics cluster=bench GrpJobs=4 MaxWall=1-0",
        "add user bob account=theory cluster=bench AdminLevel=Operator",
        "add user alice account=theory cluster=bench partition=debug",
    ):
        assert session.sacctmgr(["-i", *words.split()], database, Script()) == 0
    capsys.readouterr()


DUMPED = """\
Cluster - 'bench':Fairshare=1:QOS='normal'
Parent - 'root'
User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1:QOS='normal'
Account - 'physics':Description='physics':Organization='science':Fairshare=10:QOS='normal'
Parent - 'physics'
User - 'alice':DefaultAccount='physics':Fairshare=1:GrpJobs=4:MaxWallDurationPerJob=1440:QOS='normal'
Account - 'theory':Description='theory':Organization='physics':Fairshare=1:QOS='normal'
Parent - 'theory'
User - 'alice':Partition='debug':DefaultAccount='physics':Fairshare=1:QOS='normal'
User - 'bob':DefaultAccount='theory':AdminLevel='Operator':Fairshare=1:QOS='normal'
"""  # noqa: E501


def _body(path: pathlib.Path) -> str:
    return "".join(line for line in path.read_text().splitlines(True) if not line.startswith("#"))


def test_dump_writes_slurm_flat_file(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = Database()
    build(database, capsys)
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, database, "dump", "bench")
    assert (status, out) == (0, " No filename given, using ./bench.cfg.\n")
    assert _body(tmp_path / "bench.cfg") == DUMPED
    assert err == "".join(f"sacctmgr: {line}\n" for line in DUMPED.splitlines())


def test_dump_and_load_round_trip(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    first = Database()
    build(first, capsys)
    saved, again = tmp_path / "first.cfg", tmp_path / "again.cfg"
    assert run(capsys, first, "-Q", "dump", "bench", f"file={saved}")[0] == 0
    second = Database()
    status, out, err = run(capsys, second, "load", str(saved), keys="y")
    assert (status, err) == (0, "")
    assert out.startswith("For cluster bench\n")
    assert "Accounts\n" in out and "User Associations\n" in out
    assert out.endswith(
        "Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): \n"
    )
    assert run(capsys, second, "-Q", "dump", "cluster=bench", f"file={again}")[0] == 0
    assert _body(again) == _body(saved) == DUMPED
    assert run(capsys, second, "-i", "load", f"file={saved}") == (
        0,
        "For cluster bench\n Nothing new added.\n",
        "",
    )


def test_load_shows_what_it_adds(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    database = Database()
    build(database, capsys)
    path = tmp_path / "more.cfg"
    path.write_text(
        "Cluster - 'bench'\n"
        "Parent - 'physics'\n"
        "Account - 'optics':Description='Optics':Fairshare=5 # new\n"
        "Parent - 'optics'\n"
        "User - 'carol':DefaultAccount='optics':MaxJobs=2\n"
    )
    status, out, _ = run(capsys, database, "load", str(path), keys="n")
    assert status == 0
    sections = out.split("\n\n")
    assert [part.splitlines()[0] for part in sections] == [
        "For cluster bench",
        "Account Associations",
        "Users",
        "User Associations",
        "Would you like to commit changes? (You have 30 seconds to decide)",
    ]
    assert sections[0].splitlines()[1:] == [
        "Accounts",
        "      Name                Descr                  Org                  QOS ",
        "---------- -------------------- -------------------- -------------------- ",
        "    optics               optics              physics                      ",
        "-" * 51,
    ]
    assert table(sections[1]) == [{"Account": "optics", "ParentName": "physics", "Share": "5"}]
    assert table(sections[2]) == [{"Name": "carol", "Def Acct": "optics", "Admin": "None"}]
    assert table(sections[3]) == [{"User": "carol", "Account": "optics", "MaxJobs": "2"}]
    assert sections[3].splitlines()[-1] == "-" * 62
    assert sections[4].endswith("(N/y): \n Changes Discarded\n")
    assert not any(r["Account"] == "optics" for r in database.assocs)


def table(section: str) -> list[dict[str, str]]:
    """A section's table read back by the columns its dashes mark: the non-blank cells."""
    lines = section.splitlines()[1:-1]
    assert all(len(line) == len(lines[1]) for line in lines)
    names, cells = headers("\n".join(lines)), []
    for line in lines[2:]:
        values = headers(f"{line}\n{lines[1]}")
        cells.append({name: value for name, value in zip(names, values, strict=True) if value})
    return cells


@pytest.mark.parametrize(
    ("content", "err"),
    [
        pytest.param("Account - 'x'\n", " You need to specify a cluster name first", id="order"),
        pytest.param("Cluster - 'c'\nWidget - 'x'\n", " Misformatted line(2): Widget", id="obj"),
        pytest.param("Cluster - 'c'\nUser - 'x':Bogus=1\n", " Unknown option: Bogus=1", id="key"),
        pytest.param("Cluster - 'c'\nUser - :Fairshare=1\n", " No name given", id="no name"),
    ],
)
def test_load_refuses_bad_files(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, content: str, err: str
) -> None:
    path = tmp_path / "bad.cfg"
    path.write_text(content)
    status, out, got = run(capsys, Database(), "load", str(path))
    assert (status, out) == (1, "")
    assert got.startswith(err)


def test_load_and_dump_need_their_arguments(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    assert run(capsys, Database(), "load") == (
        1,
        "",
        " No filename given, specify one with file=''\n",
    )
    missing = tmp_path / "missing.cfg"
    assert run(capsys, Database(), "load", str(missing)) == (
        1,
        "",
        f' Unable to read "{missing}": No such file or directory\n',
    )
    assert run(capsys, Database(), "dump") == (1, "", " We need a cluster to dump.\n")
    assert run(capsys, Database(), "dump", "nowhere") == (
        1,
        "",
        " Cluster nowhere doesn't exist.\n",
    )
