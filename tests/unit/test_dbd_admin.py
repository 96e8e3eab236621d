"""sacctmgr's operations in corral-dbd, on SQLite and MariaDB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.associations import AssocSet
from corral.errors import SlurmError
from dbd import schema
from dbd.admin import Admin
from dbd.enforced import enforced
from dbd.storage import Storage, engine_for
from tests.databases import BACKENDS, fresh_database


@pytest.fixture(params=BACKENDS)
def admin(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Admin]:
    with fresh_database(request.param, tmp_path) as url:
        engine = engine_for(url)
        schema.upgrade(engine)
        Storage(engine).register_cluster("bench", "127.0.0.1", 6817, 100)
        try:
            yield Admin(engine)
        finally:
            engine.dispose()


def run(
    admin: Admin, verb: str, kind: str, where: dict[str, str] | None = None, **values: str
) -> list[dict[str, str]]:
    return admin.run(verb, kind, where or {}, values, True, "root", True).rows


def table(admin: Admin, kind: str, *columns: str, **where: str) -> list[tuple[str, ...]]:
    return [tuple(row[c] for c in columns) for row in run(admin, "list", kind, where)]


def test_a_registered_cluster_has_slurms_defaults(admin: Admin) -> None:
    assert table(admin, "association", "Cluster", "Account", "User", "Share", "QOS") == [
        ("bench", "root", "", "1", "normal"),
        ("bench", "root", "root", "1", "normal"),
    ]
    (normal,) = run(admin, "list", "qos")
    assert (normal["Name"], normal["Priority"], normal["GraceTime"]) == ("normal", "0", "00:00:00")
    assert (normal["PreemptMode"], normal["UsageFactor"], normal["MaxWall"]) == (
        "cluster",
        "1.000000",
        "",
    )
    (cluster,) = run(admin, "list", "cluster")
    assert (cluster["Cluster"], cluster["ControlHost"], cluster["ControlPort"]) == (
        "bench",
        "127.0.0.1",
        "6817",
    )
    assert table(admin, "user", "User", "Def Acct", "Admin") == [("root", "root", "Administrator")]


def test_accounts_and_users_form_the_association_tree(admin: Admin) -> None:
    run(admin, "add", "account", {"name": "bench"}, description="Bench", organization="lab")
    run(admin, "add", "account", {"name": "sub"}, parent="bench")
    run(admin, "add", "user", {"name": "root"}, account="bench")
    run(admin, "add", "user", {"name": "Alice"}, account="sub", fairshare="10")
    assert table(admin, "association", "Account", "User", "Share", "ParentName") == [
        ("root", "", "1", ""),
        ("root", "root", "1", "root"),
        ("bench", "", "1", "root"),
        ("bench", "root", "1", "bench"),
        ("sub", "", "1", "bench"),
        ("sub", "alice", "10", "sub"),
    ]
    assert table(admin, "account", "Account", "Descr", "Org", name="bench") == [
        ("bench", "Bench", "lab")
    ]
    assert table(admin, "user", "User", "Def Acct", name="alice") == [("alice", "sub")]


def test_nothing_changes_without_commit(admin: Admin) -> None:
    rows = admin.run("add", "account", {"name": "ghost"}, {}, False, "root", True).rows
    assert rows[0]["Account"] == "ghost"  # what would be added
    assert table(admin, "account", "Account") == [("root",)]


def test_limits_are_set_shown_and_cleared(admin: Admin) -> None:
    run(admin, "add", "account", {"name": "phys"})
    run(admin, "add", "user", {"name": "bob"}, account="phys")
    run(
        admin, "modify", "user", {"name": "bob"}, maxjobs="5", maxwall="1-00:00:00", grptres="cpu=8"
    )
    assert table(admin, "association", "MaxJobs", "MaxWall", "GrpTRES", user="bob") == [
        ("5", "1-00:00:00", "cpu=8")
    ]
    run(admin, "modify", "user", {"name": "bob"}, maxjobs="-1")
    assert table(admin, "association", "MaxJobs", user="bob") == [("",)]
    run(admin, "modify", "qos", {"name": "normal"}, maxwall="60", priority="10")
    assert table(admin, "qos", "Priority", "MaxWall") == [("10", "01:00:00")]
    run(admin, "modify", "user", {"name": "bob"}, defaultaccount="phys", adminlevel="operator")
    assert table(admin, "user", "Admin", name="bob") == [("Operator",)]


@pytest.mark.parametrize(
    ("verb", "kind", "where", "values", "message"),
    [
        ("add", "user", {"name": "carol"}, {"account": "nope"}, "The account 'nope' doesn't exist"),
        ("add", "account", {"name": "x"}, {"parent": "nope"}, "parent account 'nope'"),
        ("add", "account", {"name": "y"}, {"maxwall": "soon"}, "Invalid time specification"),
        ("add", "account", {"name": "z"}, {"bogus": "1"}, "Unknown option: bogus"),
        ("modify", "user", {"name": "root"}, {"qos": "gold"}, "Invalid qos specification"),
        ("delete", "account", {"name": "root"}, {}, "can't remove the root account"),
        ("list", "widget", {}, {}, "Unknown entity"),
    ],
)
def test_bad_requests_get_slurms_errors(
    admin: Admin,
    verb: str,
    kind: str,
    where: dict[str, str],
    values: dict[str, str],
    message: str,
) -> None:
    with pytest.raises(SlurmError, match=message):
        admin.run(verb, kind, where, values, True, "root", True)


def test_a_change_that_matches_nothing_is_an_empty_answer(admin: Admin) -> None:
    assert run(admin, "add", "account", {"name": "root"}) == []  # sacctmgr: " Nothing new added."
    assert run(admin, "modify", "qos", {"name": "gold"}, priority="1") == []
    assert run(admin, "delete", "user", {"name": "nobody"}) == []


def test_users_with_their_associations(admin: Admin) -> None:
    """What Snakemake asks: sacctmgr -n -s list user U format=account."""
    run(admin, "add", "account", {"name": "lab"})
    run(admin, "add", "user", {"name": "eve"}, account="lab")
    rows = run(admin, "list", "user", {"name": "eve", "withassoc": "yes"})
    assert [(r["User"], r["Def Acct"], r["Account"], r["Cluster"]) for r in rows] == [
        ("eve", "lab", "lab", "bench")
    ]
    accounts = run(admin, "list", "account", {"name": "lab", "withassoc": "yes"})
    assert [(r["Account"], r["User"]) for r in accounts] == [("lab", ""), ("lab", "eve")]


def test_a_new_clusters_settings_go_on_its_root_association(admin: Admin) -> None:
    run(admin, "add", "cluster", {"name": "second"}, fairshare="5", maxjobs="100")
    rows = table(admin, "association", "User", "Share", "MaxJobs", cluster="second")
    assert rows == [("", "5", "100"), ("root", "1", "")]


def test_only_administrators_change_anything(admin: Admin) -> None:
    with pytest.raises(SlurmError, match="Access/permission denied"):
        admin.run("add", "account", {"name": "mine"}, {}, True, "mallory", False)
    assert admin.run("list", "account", {}, {}, False, "mallory", False).rows  # reading is fine
    run(admin, "add", "account", {"name": "ops"})
    run(admin, "add", "user", {"name": "olga"}, account="ops", adminlevel="Operator")
    admin.run("add", "account", {"name": "mine"}, {}, True, "olga", False)  # an operator may


def test_deleting_users_accounts_and_qos(admin: Admin) -> None:
    run(admin, "add", "account", {"name": "top"})
    run(admin, "add", "account", {"name": "leaf"}, parent="top")
    run(admin, "add", "user", {"name": "dan"}, account="leaf")
    run(admin, "add", "qos", {"name": "gold"}, priority="100")
    with pytest.raises(SlurmError, match="sub-accounts"):
        run(admin, "delete", "account", {"name": "top"})
    run(admin, "delete", "user", {"name": "dan"})
    assert table(admin, "user", "User", name="dan") == []
    run(admin, "delete", "account", {"name": "leaf"})
    run(admin, "delete", "account", {"name": "top"})
    run(admin, "delete", "qos", {"name": "gold"})
    assert table(admin, "account", "Account") == [("root",)]
    assert table(admin, "qos", "Name") == [("normal",)]
    assert [r[0] for r in table(admin, "tres", "Type")][:4] == ["cpu", "mem", "energy", "node"]


@pytest.mark.parametrize("name", ["a" * 65, "bad'name", "tab\tname"])
def test_names_the_database_cannot_keep_are_refused(admin: Admin, name: str) -> None:
    with pytest.raises(SlurmError, match=r"(?i)name"):
        run(admin, "add", "account", {"name": name})


def test_coordinators_manage_their_accounts_and_below_only(admin: Admin) -> None:
    """Slurm's account coordinators: users and sub-accounts of their accounts, nothing else."""
    run(admin, "add", "account", {"name": "lab"})
    run(admin, "add", "account", {"name": "team"}, parent="lab")
    run(admin, "add", "account", {"name": "other"})
    run(admin, "add", "user", {"name": "cora"}, account="lab")
    assert run(admin, "add", "coordinator", {"name": "cora"}, account="lab") == [
        {"User": "cora", "Account": "lab"}
    ]

    def as_cora(verb: str, kind: str, where: dict[str, str], **values: str) -> list[Any]:
        return admin.run(verb, kind, where, values, True, "cora", False).rows

    as_cora("add", "user", {"name": "dan"}, account="team")  # below lab
    as_cora("modify", "user", {"name": "dan", "account": "team"}, maxjobs="4")
    as_cora("add", "account", {"name": "sub"}, parent="lab")
    for verb, kind, where, values in (
        ("add", "user", {"name": "eve"}, {"account": "other"}),  # not hers
        ("add", "user", {"name": "eve"}, {}),  # no account named
        ("modify", "qos", {"name": "normal"}, {"priority": "9"}),
        ("add", "account", {"name": "top"}, {}),  # under root
    ):
        with pytest.raises(SlurmError, match="Access/permission denied"):
            as_cora(verb, kind, where, **values)
    users = run(admin, "list", "user", {"name": "cora", "withcoord": "yes"})
    assert users[0]["Coord Accounts"] == "lab"
    assert run(admin, "delete", "coordinator", {"name": "cora"}) == [
        {"User": "cora", "Account": "lab"}
    ]
    with pytest.raises(SlurmError, match="Access/permission denied"):
        as_cora("add", "user", {"name": "fay"}, account="lab")


def test_what_a_controller_enforces_comes_typed_and_as_sacctmgr_shows_it(admin: Admin) -> None:
    """``Associations`` carries what sacctmgr shows, as numbers: the set a controller
    builds from it equals the one it built from sacctmgr's rows."""
    run(admin, "add", "account", {"name": "lab"}, grpjobs="20", grptres="cpu=64,mem=1G")
    run(admin, "add", "account", {"name": "team"}, parent="lab", fairshare="parent")
    run(admin, "add", "qos", {"name": "gold"}, priority="100", maxwall="2-00:00:00")
    run(
        admin,
        "modify",
        "qos",
        {"name": "gold"},
        preempt="normal",
        usagefactor="2.5",
        maxtresperuser="gres/gpu=4",
        maxjobsperaccount="7",
        maxsubmitjobsperuser="9",
        grpwall="600",
    )
    run(admin, "add", "user", {"name": "ann"}, account="team", qos="normal,gold")
    run(
        admin,
        "modify",
        "user",
        {"name": "ann"},
        maxjobs="3",
        maxsubmitjobs="5",
        maxwall="90",
        maxtres="cpu=8,gres/gpu:a100=2",
        maxtrespernode="mem=2G",
        maxtresmins="cpu=600",
        grptresmins="cpu=6000",
        defaultqos="gold",
        adminlevel="operator",
    )
    run(admin, "add", "coordinator", {"name": "ann"}, account="team")
    reply = enforced(admin.engine, "bench")
    typed = AssocSet.from_reply(reply)
    shown = AssocSet.from_rows(
        run(admin, "list", "association", {"cluster": "bench"}),
        run(admin, "list", "user"),
        run(admin, "list", "qos"),
        run(admin, "list", "coordinator"),
    )
    assert sorted(typed.assocs, key=lambda a: a.key) == sorted(shown.assocs, key=lambda a: a.key)
    assert (typed.users, typed.qos) == (shown.users, shown.qos)
    assert (typed.admin_levels, typed.coordinators) == (shown.admin_levels, shown.coordinators)
    ann = typed.find("ann", "team", "")
    assert ann is not None
    assert (ann.max_jobs, ann.max_submit, ann.max_wall, ann.grp_jobs) == (3, 5, 90, None)
    assert ann.max_tres == {"cpu": 8, "gres/gpu:a100": 2}
    assert ann.max_tres_node == {"mem": 2048}
    assert (ann.qos, ann.def_qos) == (("normal", "gold"), "gold")
    lab = next(a for a in typed.assocs if a.account == "lab" and not a.user)
    assert (lab.grp_jobs, lab.grp_tres) == (20, {"cpu": 64, "mem": 1024})
    assert next(a for a in typed.assocs if a.account == "team" and not a.user).shares == -1
    gold = typed.qos["gold"]
    assert (gold.priority, gold.max_wall, gold.grp_wall, gold.usage_factor) == (100, 2880, 600, 2.5)
    assert (gold.max_tres_pu, gold.max_jobs_pa, gold.max_submit_pu) == ({"gres/gpu": 4}, 7, 9)
    assert gold.preempt == frozenset({"normal"})
    assert typed.admin_levels == {"ann": "Operator", "root": "Administrator"}
    assert typed.coordinated("ann") == frozenset({"team"})
    # The journal keeps the reply; an older controller's rows still read.
    assert AssocSet.from_json(typed.to_json()) == typed
    assert AssocSet.from_json(typed.to_json()).reply == typed.reply
    assert AssocSet.from_json(json.dumps({"rows": [[], [], []]})) == AssocSet()
    assert enforced(admin.engine, "elsewhere").associations == []


def test_a_qos_preemption_settings_reach_the_controller(admin: Admin) -> None:
    run(admin, "add", "qos", {"name": "scav"})
    run(
        admin,
        "modify",
        "qos",
        {"name": "scav"},
        gracetime="45",
        preemptexempttime="2",
        preemptmode="Requeue,Within",
    )
    (row,) = run(admin, "list", "qos", {"name": "scav"})
    assert (row["GraceTime"], row["PreemptExemptTime"], row["PreemptMode"]) == (
        "00:00:45",
        "00:02:00",
        "requeue,within",
    )
    scav = AssocSet.from_reply(enforced(admin.engine, "bench")).qos["scav"]
    assert (scav.grace_time, scav.preempt_exempt_time, scav.preempt_mode) == (
        45,
        120,
        "requeue,within",
    )
    with pytest.raises(SlurmError, match="PreemptMode=GANG is set in slurm"):
        run(admin, "modify", "qos", {"name": "scav"}, preemptmode="gang")
