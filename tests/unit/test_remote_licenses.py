"""Remote licenses: ``sacctmgr add|list|modify|delete resource`` in corral-dbd (SQLite and
MariaDB), each cluster's share sent with its associations, and the controller's merge
into its licenses as ``name@server``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from cli.sacctmgr.session import sacctmgr
from controller.associations import AssocSet
from controller.journal import Journal
from controller.licenseadmit import checked
from controller.licenseviews import licenses_reply
from controller.remotelicenses import merged
from controller.store import JobStore
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from dbd import schema
from dbd.admin import Admin
from dbd.enforced import enforced
from dbd.storage import Storage, engine_for
from tests.databases import BACKENDS, fresh_database
from tests.unit.scenario import slurm_conf


@pytest.fixture(params=BACKENDS)
def admin(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Admin]:
    with fresh_database(request.param, tmp_path) as url:
        engine = engine_for(url)
        schema.upgrade(engine)
        storage = Storage(engine)
        storage.register_cluster("bench", "127.0.0.1", 6817, 100)
        storage.register_cluster("other", "127.0.0.1", 6827, 100)
        try:
            yield Admin(engine)
        finally:
            engine.dispose()


def acct_admin(admin: Admin, caller: str = "root", root: bool = True) -> Any:
    """sacctmgr's AcctAdmin call, answered by dbd's Admin as the controller forwards it."""

    def call(request: dict[str, Any]) -> Mapping[str, Any]:
        answer = admin.run(
            request["verb"],
            request["kind"],
            request["where"],
            request.get("set", {}),
            request.get("commit", False),
            caller,
            root,
        )
        return {
            "rows": [{"fields": r} for r in answer.rows],
            "columns": list(answer.columns),
            "defaults": list(answer.defaults),
        }

    return call


def out(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


ADD = ["-i", "add", "resource", "fluent", "server=flex", "count=100", "type=license"]


def test_adding_a_resource_with_a_clusters_share(
    admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    call = acct_admin(admin)
    assert sacctmgr([*ADD, "cluster=bench", "percentallowed=50"], call=call) == 0
    assert out(capsys) == (
        " Adding Resource(s)\n"
        "  fluent@flex\n"
        "   Cluster - bench\t50%\n"
        " Settings\n"
        "  Name           = fluent\n"
        "  Server         = flex\n"
        "  Description    = fluent\n"
        "  Count          = 100\n"
        "  Type           = License\n"
    )
    assert sacctmgr(["-P", "show", "resource"], call=call) == 0
    assert out(capsys) == (
        "Name|Server|Type|Count|% Allocated|ServerType\nfluent|flex|License|100|50|\n"
    )
    # A second cluster's share of the same resource: only the share is new.
    words = ["-i", "add", "resource", "fluent", "server=flex", "cluster=other", "p=30"]
    assert sacctmgr(words, call=call) == 0
    assert out(capsys) == (
        " Adding Resource(s)\n  fluent@flex\n   Cluster - other\t30%\n"
        " Settings\n  Server         = flex\n  Type           = License\n"
    )
    assert sacctmgr(["-P", "list", "resource", "withclusters"], call=call) == 0
    assert out(capsys) == (
        "Name|Server|Type|Count|% Allocated|ServerType|Cluster|% Allowed\n"
        "fluent|flex|License|100|80||bench|50\n"
        "fluent|flex|License|100|80||other|30\n"
    )
    # Conditions on shares choose rows of shares only (Slurm 22.05).
    words = ["-P", "-n", "list", "resource", "cluster=other", "withclusters"]
    assert sacctmgr(words, call=call) == 0
    assert out(capsys) == "fluent|flex|License|100|80||other|30\n"
    assert sacctmgr(["-P", "-n", "list", "resource", "cluster=nowhere"], call=call) == 0
    assert out(capsys) == "fluent|flex|License|100|80|\n"
    # Adding it again adds nothing.
    assert sacctmgr([*ADD, "cluster=bench"], call=call) == 1
    assert out(capsys) == " Nothing new added.\n"


def test_count_used_is_each_clusters_share_as_slurm_22_05_shows_it(
    admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    """``# Used`` (CountUsed) is a cluster's share as a count, as ``# Allowed``, and 0 on a
    row without a cluster: what real Slurm 22.05 printed (measured with jobs holding 7 of
    cluster lic2m's 20, which it did not count)."""
    call = acct_admin(admin)
    assert sacctmgr([*ADD, "cluster=bench", "percentallowed=20"], call=call) == 0
    words = ["-i", "add", "resource", "fluent", "server=flex", "cluster=other", "p=30"]
    assert sacctmgr(words, call=call) == 0
    out(capsys)
    shown = ["-p", "show", "resource", "withclusters", "format=CountUsed,Allocated,CountAllowed"]
    assert sacctmgr(shown, call=call) == 0
    assert out(capsys) == "# Used|% Allocated|# Allowed|\n20|50|20|\n30|50|30|\n"
    assert sacctmgr(["-p", "show", "resource", "format=Name,CountUsed,Allocated"], call=call) == 0
    assert out(capsys) == "Name|# Used|% Allocated|\nfluent|0|50|\n"


def test_a_new_resource_needs_a_type_and_a_count(
    admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    """dbd's refusals reach sacctmgr as errors (printed ``sacctmgr: error: ...``)."""
    call = acct_admin(admin)
    refused = {
        "count=3": "Need to designate a resource type to initially add 'x'.",
        "type=l": "Need to designate a resource count to initially add 'x'.",
        "count=3 type=gpu": "Unknown resource type: 'gpu'  Valid resources is License.",
        "count=3 type=l cluster=no": (
            "This cluster 'no' doesn't exist.\n        Contact your admin to add it to "
            "accounting.\n Need a valid cluster name to add a cluster resource."
        ),
    }
    for words, message in refused.items():
        with pytest.raises(SlurmError) as caught:
            sacctmgr(["-i", "add", "resource", "x", *words.split()], call=call)
        assert caught.value.message == message
    # Without Server= it is slurmdb's, as in Slurm; Description defaults to the name.
    assert sacctmgr(["-i", "add", "resource", "x", "count=3", "type=l"], call=call) == 0
    assert "  x@slurmdb\n" in out(capsys)
    assert sacctmgr(["-P", "-n", "list", "resource", "format=name,server,descr"], call=call) == 0
    assert out(capsys) == "x|slurmdb|x\n"


def test_shares_may_not_pass_one_hundred_percent(admin: Admin) -> None:
    call = acct_admin(admin)
    assert sacctmgr([*ADD, "cluster=bench", "percentallowed=60"], call=call) == 0
    with pytest.raises(SlurmError) as caught:
        admin.run("add", "resource", {"name": "fluent", "server": "flex"},
                  {"cluster": "other", "percentallowed": "50"}, True, "root", True)  # fmt: skip
    assert caught.value.message == (
        "Adding this 1 clusters to resource fluent@flex at 50% each , with 60% already used,  "
        "would go over 100%.  Please redo your math and resubmit."
    )
    admin.run("add", "resource", {"name": "fluent", "server": "flex"},
              {"cluster": "other", "percentallowed": "30"}, True, "root", True)  # fmt: skip
    with pytest.raises(SlurmError) as caught:
        admin.run("modify", "resource", {"name": "fluent", "cluster": "bench"},
                  {"percentallowed": "80"}, True, "root", True)  # fmt: skip
    assert caught.value.message == (
        "You can not allocate more than 100% of a resource\n"
        " If change was accepted it would look like this...\n"
        "  fluent@flex\n   Cluster - bench\t 80%\n   Cluster - other\t 30%\n   total\t\t110%"
    )
    with pytest.raises(SlurmError, match="between 0 and 100, not 101"):
        admin.run("modify", "resource", {"name": "fluent", "cluster": "bench"},
                  {"percentallowed": "101"}, True, "root", True)  # fmt: skip


def test_modifying_counts_and_shares(admin: Admin, capsys: pytest.CaptureFixture[str]) -> None:
    call = acct_admin(admin)
    assert sacctmgr([*ADD, "cluster=bench,other", "percentallowed=40"], call=call) == 0
    out(capsys)
    words = ["-i", "modify", "resource", "name=fluent", "server=flex", "set", "count=50"]
    assert sacctmgr(words, call=call) == 0
    assert out(capsys) == (
        " Modified server resource ...\n  fluent@flex\n"
        "  Cluster - bench\t- fluent@flex\n  Cluster - other\t- fluent@flex\n"
    )
    words = [
        "-i",
        "modify",
        "resource",
        "where",
        "name=fluent",
        "cluster=bench",
        "set",
        "p=60",
    ]
    assert sacctmgr(words, call=call) == 0
    assert out(capsys) == " Modified server resource ...\n  Cluster - bench\t- fluent@flex\n"
    assert enforced(admin.engine, "bench").remote_licenses[0].count == 30  # 50 * 60%
    assert enforced(admin.engine, "other").remote_licenses[0].count == 20
    # Slurm's own refusals, before the daemon is asked.
    words = ["-i", "modify", "resource", "where", "cluster=bench", "set", "count=5"]
    assert sacctmgr(words, call=call) == 1
    assert 'Can\'t change "count" on a cluster-based resource.' in capsys.readouterr().err
    words = ["-i", "modify", "resource", "where", "name=fluent", "set", "percentallowed=5"]
    assert sacctmgr(words, call=call) == 1
    assert 'Can\'t change "percentallowed" without specifying a cluster.' in (
        capsys.readouterr().err
    )
    words = ["-i", "modify", "resource", "where", "name=nothing", "set", "count=5"]
    assert sacctmgr(words, call=call) == 1
    assert out(capsys) == " Nothing modified\n"


def test_deleting_a_clusters_share_then_the_resource(
    admin: Admin, capsys: pytest.CaptureFixture[str]
) -> None:
    call = acct_admin(admin)
    assert sacctmgr([*ADD, "cluster=bench,other", "percentallowed=40"], call=call) == 0
    out(capsys)
    assert sacctmgr(["-i", "delete", "resource", "fluent", "cluster=other"], call=call) == 0
    assert out(capsys) == " Deleting resource(s)...\n  Cluster - other\t- fluent@flex\n"
    assert [r.name for r in enforced(admin.engine, "other").remote_licenses] == []
    assert sacctmgr(["-i", "delete", "resource", "name=fluent", "server=flex"], call=call) == 0
    assert out(capsys) == (
        " Deleting resource(s)...\n  fluent@flex\n  Cluster - bench\t- fluent@flex\n"
    )
    assert sacctmgr(["-i", "delete", "resource", "name=fluent"], call=call) == 1
    assert out(capsys) == " Nothing deleted\n"
    assert enforced(admin.engine, "bench").remote_licenses == []


def test_nothing_is_kept_without_commit(admin: Admin) -> None:
    admin.run("add", "resource", {"name": "fluent"}, {"count": "4", "type": "license"},
              False, "root", True)  # fmt: skip
    assert admin.run("list", "resource", {}, {}, False, "root", True).rows == []


def test_only_administrators_change_resources_but_anyone_lists_them(admin: Admin) -> None:
    run = admin.run
    run("add", "resource", {"name": "fluent"}, {"count": "4", "type": "license"},
        True, "root", True)  # fmt: skip
    with pytest.raises(SlurmError, match="Access/permission denied"):
        run("modify", "resource", {"name": "fluent"}, {"count": "9"}, True, "alice", False)
    with pytest.raises(SlurmError, match="Access/permission denied"):
        run("delete", "resource", {"name": "fluent"}, {}, True, "alice", False)
    (row,) = run("list", "resource", {}, {}, False, "alice", False).rows
    assert row["Count"] == "4"
    # An Operator of accounting may.
    run("add", "user", {"name": "alice"}, {"account": "root", "adminlevel": "Operator"},
        True, "root", True)  # fmt: skip
    run("modify", "resource", {"name": "fluent"}, {"count": "9"}, True, "alice", False)
    (row,) = run("list", "resource", {}, {}, False, "alice", False).rows
    assert row["Count"] == "9"


def test_the_controller_gets_its_share_as_name_at_server(admin: Admin) -> None:
    call = acct_admin(admin)
    assert sacctmgr([*ADD, "cluster=bench", "percentallowed=25"], call=call) == 0
    assert sacctmgr(["-i", "add", "resource", "ansys", "count=7", "type=l"], call=call) == 0
    reply = enforced(admin.engine, "bench")
    assets = AssocSet.from_reply(reply)
    assert assets.remote_licenses == {"fluent@flex": 25}  # ansys: no share for bench
    assert AssocSet.from_json(assets.to_json()).remote_licenses == {"fluent@flex": 25}
    assert merged((("matlab", 2),), assets.remote_licenses) == (
        ("matlab", 2),
        ("fluent@flex", 25),
    )


def fetched(count: int) -> AssocSet:
    """What the controller makes of dbd's reply giving it ``count`` of fluent@flex."""
    remote = pb.RemoteLicense(name="fluent", server="flex", count=count)
    return AssocSet.from_reply(pb.AssociationsReply(remote_licenses=[remote]))


def test_the_store_merges_them_into_its_licenses_without_a_restart(tmp_path: Path) -> None:
    conf = slurm_conf("Licenses=matlab:2")
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    store.set_associations(fetched(25))
    assert store.conf.licenses == (("matlab", 2), ("fluent@flex", 25))
    assert checked("fluent@flex:25", store.conf) == "fluent@flex:25"
    with pytest.raises(SlurmError):
        checked("fluent@flex:26", store.conf)
    reply = licenses_reply(store.conf, [], None, {"fluent@flex"})
    assert [(x.name, x.total, x.remote) for x in reply.licenses] == [
        ("fluent@flex", 25, True),
        ("matlab", 2, False),
    ]
    store.apply_config(conf)  # scontrol reconfigure keeps what dbd sent
    assert store.conf.licenses == (("matlab", 2), ("fluent@flex", 25))
    store.set_associations(fetched(10))
    assert dict(store.reservation_cluster().licenses) == {"matlab": 2, "fluent@flex": 10}
    asyncio.run(store.flush())
    # After a restart the journaled set is in force before dbd answers again.
    again = JobStore(conf, Journal(str(tmp_path / "state")))
    again.load(0.0)
    assert again.conf.licenses == (("matlab", 2), ("fluent@flex", 10))
    store.set_associations(AssocSet())
    assert store.conf.licenses == (("matlab", 2),)
