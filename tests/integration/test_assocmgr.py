"""scontrol show assoc_mgr end to end: dbd's associations as the controller caches
them, with the use of a running job, and PrivateData=usage,users for a plain user.

The clients of the plain users run as those users, so the cluster lives in a
directory every uid can reach (tests/security/asuser.py).
"""

from __future__ import annotations

import pwd
from collections.abc import Iterator

import pytest

from tests.integration.cluster import TEST_USERS, Cluster
from tests.security.asuser import run_as, shared_top

SETTINGS = ("PrivateData=usage,users", "KillWait=2", "SlurmdTimeout=6")


def _admin(cluster: Cluster, verb: str, kind: str, where: dict[str, str], **values: str) -> None:
    request = {"verb": verb, "kind": kind, "where": where, "set": values, "commit": True}
    cluster.client.call("AcctAdmin", request)


@pytest.fixture(scope="module")
def accounted(users: tuple[str, ...]) -> Iterator[Cluster]:
    """One node and corral-dbd on SQLite; account lab (GrpJobs=5) holds root and the
    first test user, and root runs a job in it."""
    for top in shared_top():
        cluster = Cluster(top / "c", 1, SETTINGS, accounting=True)
        cluster.dir.chmod(0o755)
        (top / "work").mkdir(mode=0o777)
        (top / "work").chmod(0o777)
        cluster.start()
        try:
            _admin(cluster, "add", "account", {"name": "lab"}, grpjobs="5")
            for user in ("root", users[0]):
                _admin(cluster, "add", "user", {"name": user}, account="lab")
            _wait_for_lab(cluster)
            job = cluster.sbatch("-A", "lab", "--wrap", "sleep 120")
            cluster.wait_state(job, {"RUNNING"})
            yield cluster
        finally:
            cluster.stop()


def _wait_for_lab(cluster: Cluster) -> None:
    cluster.wait_for(
        lambda: "Account=lab UserName=root(0)" in _show(cluster, "accounts=lab"),
        20,
        "lab's associations did not reach the controller",
    )


def _show(cluster: Cluster, *args: str) -> str:
    return cluster.run("scontrol", "show", "assoc_mgr", *args).stdout


def test_an_operator_sees_the_tree_with_its_use(accounted: Cluster) -> None:
    text = _show(accounted, "accounts=lab", "flags=assoc")
    records = text.split("\nClusterName=")[1:]
    lab = next(r for r in records if r.startswith("corral Account=lab UserName= "))
    assert "GrpJobs=5(1) GrpJobsAccrue=N(0)" in lab
    assert "ParentAccount=root(" in lab and "DefAssoc=No" in lab
    assert "GrpTRES=cpu=N(1),mem=N(" in lab
    mine = next(r for r in records if "UserName=root(0)" in r)
    assert "GrpJobs=N(1)" in mine and "ParentAccount= Lft=" in mine
    assert "User Records" not in text and "QOS Records" not in text


def test_a_plain_user_sees_their_own_under_private_data(
    accounted: Cluster, users: tuple[str, ...]
) -> None:
    member, stranger = (pwd.getpwnam(name) for name in TEST_USERS)
    shown = run_as(accounted, member.pw_uid, member.pw_gid, "scontrol", "show", "assoc_mgr")
    assert shown.returncode == 0, shown.stderr
    assert f"UserName={users[0]}({member.pw_uid}) DefAccount=lab" in shown.stdout
    assert shown.stdout.count("ClusterName=") == 1  # their association alone
    assert "UserName=root" not in shown.stdout
    assert "QOS=normal(1)" in shown.stdout  # QOS: for all
    other = run_as(accounted, stranger.pw_uid, stranger.pw_gid, "scontrol", "show", "assoc_mgr")
    assert "No associations currently cached in Slurm." in other.stdout
    assert "No users currently cached in Slurm." in other.stdout


def test_a_wrong_option_fails_as_slurms_does(accounted: Cluster) -> None:
    bad = accounted.run("scontrol", "show", "assoc_mgr", "colour=red", check=False)
    assert (bad.returncode, bad.stderr) == (
        1,
        "invalid entity: colour=red for keyword:show assoc_mgr\n",
    )


def test_a_change_only_assoc_mgr_shows_reaches_the_controller(accounted: Cluster) -> None:
    """GrpTRESRunMins is not enforced, yet its new value is shown within seconds."""
    _admin(accounted, "modify", "account", {"name": "lab"}, grptresrunmins="cpu=600")
    accounted.wait_for(
        lambda: "GrpTRESRunMins=cpu=600(" in _show(accounted, "accounts=lab", "flags=assoc"),
        20,
        "the new GrpTRESRunMins did not reach the controller",
    )


def test_a_user_shows_the_limits_it_inherits_from_its_account(accounted: Cluster) -> None:
    """MaxJobs and MaxWall set on lab show on its users as their own (Slurm 22.05's
    assoc_mgr holds them so); lab's GrpJobs stays lab's alone."""
    _admin(accounted, "modify", "account", {"name": "lab"}, maxjobs="3", maxwall="60")
    try:
        accounted.wait_for(
            lambda: "MaxWallPJ=60" in _show(accounted, "accounts=lab", "flags=assoc"),
            20,
            "lab's new limits did not reach the controller",
        )
        records = _show(accounted, "accounts=lab", "flags=assoc").split("\nClusterName=")[1:]
        mine = next(r for r in records if "UserName=root(0)" in r)
        assert "MaxJobs=3(1) MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=60\n" in mine
        assert "GrpJobs=N(1)" in mine
    finally:
        _admin(accounted, "modify", "account", {"name": "lab"}, maxjobs="-1", maxwall="-1")
