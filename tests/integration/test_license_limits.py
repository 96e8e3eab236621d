"""Accounting limits on licenses with real daemons: slurm.conf tracks ``license/fluent``
(AccountingStorageTRES), so sacctmgr sets ``GrpTRES=license/fluent=2`` on an account
while a limit on the untracked ``ansys`` is refused; a second job that would pass the
limit waits with AssocGrpLicense, ``scontrol show assoc_mgr`` shows the limit with its
use, and lifting the limit lets the job start without a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.2; done"
SETTINGS = (
    "KillWait=2",
    "AccountingStorageEnforce=associations,limits",
    "AccountingStorageTRES=license/fluent",
    "Licenses=fluent:10,ansys:4",
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    top = tmp_path_factory.mktemp("liclimits")
    started = Cluster(top / "c", 1, SETTINGS, accounting=True).start()
    try:
        yield started
    finally:
        started.stop()


def _sacctmgr(c: Cluster, *args: str, check: bool = True) -> str:
    done = c.run("sacctmgr", "-i", *args, check=check)
    return done.stdout + done.stderr


def test_a_grp_license_limit_holds_the_job_over_it(cluster: Cluster) -> None:
    c = cluster
    _sacctmgr(c, "add", "account", "lab")
    _sacctmgr(c, "add", "user", "root", "account=lab")
    refused = c.run(
        "sacctmgr", "-i", "modify", "account", "lab", "set", "GrpTRES=license/ansys=1",
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert refused.stderr.startswith(
        "sacctmgr: error: slurmdb_format_tres_str: no TRES known by type license/ansys\n"
        " Unknown option: GrpTRES=license/ansys=1\n"
    ), refused.stderr
    _sacctmgr(c, "modify", "account", "lab", "set", "GrpTRES=license/fluent=2")
    shown = c.run("sacctmgr", "-P", "-n", "show", "assoc", "account=lab", "user=",
                  "format=Account,GrpTRES").stdout  # fmt: skip
    assert "lab|license/fluent=2" in shown, shown

    def limited() -> bool:
        text = c.run("scontrol", "show", "assoc_mgr", "accounts=lab", "flags=assoc").stdout
        return "license/fluent=2(" in text

    c.wait_for(limited, 20, "the license limit did not reach the controller")
    work: Path = c.dir
    first = c.sbatch("-A", "lab", "-L", "fluent:2", "-D", str(work), "-o", "/dev/null",
                     "--wrap", WAIT_FOR_GO)  # fmt: skip
    c.wait_state(first, {"RUNNING"})
    second = c.sbatch("-A", "lab", "-L", "fluent:1", "-D", str(work), "-o", "/dev/null",
                      "--wrap", "true")  # fmt: skip
    c.wait_for(lambda: c.job(second)["reason"] == "AssocGrpLicense", 15, "no AssocGrpLicense")
    assert c.job(second)["state"] == "PENDING"
    text = c.run("scontrol", "show", "assoc_mgr", "accounts=lab", "flags=assoc").stdout
    assert "license/fluent=2(2)" in text, text
    # Other licenses are not limited: a job on ansys starts beside the first.
    other = c.sbatch("-A", "lab", "-L", "ansys:4", "-D", str(work), "-o", "/dev/null",
                     "--wrap", "true")  # fmt: skip
    assert c.wait_done(other)["state"] == "COMPLETED"
    _sacctmgr(c, "modify", "account", "lab", "set", "GrpTRES=license/fluent=-1")
    c.wait_state(second, {"RUNNING", "COMPLETING", "COMPLETED"}, 30)
    (work / "go").touch()
    assert c.wait_done(first)["state"] == "COMPLETED"


def test_max_tres_per_node_on_a_license_holds_the_job_as_slurm_does(cluster: Cluster) -> None:
    """Slurm 22.05, measured: sacctmgr keeps ``MaxTRESPerNode=license/fluent=1`` on a
    user's association or a QOS; ``-L fluent:2`` on one node pends with
    AssocMaxUnknownPerNode (QOSMaxUnknownPerNode for the QOS's), in squeue and in
    ``scontrol show job``; ``-N1 -L fluent:1`` runs beside it."""
    c = cluster
    _sacctmgr(c, "add", "account", "pn")
    _sacctmgr(c, "add", "user", "root", "account=pn")
    _sacctmgr(c, "modify", "user", "root", "where", "account=pn", "set",
              "MaxTRESPerNode=license/fluent=1")  # fmt: skip
    shown = c.run("sacctmgr", "-P", "-n", "show", "assoc", "account=pn", "user=root",
                  "format=Account,User,MaxTRESPerNode").stdout  # fmt: skip
    assert "pn|root|license/fluent=1" in shown, shown

    def limited() -> bool:
        text = c.run("scontrol", "show", "assoc_mgr", "accounts=pn", "flags=assoc").stdout
        return "MaxTRESPN=license/fluent=1\n" in text  # as Slurm 22.05 prints it

    c.wait_for(limited, 20, "the per-node limit did not reach the controller")
    work: Path = c.dir
    over = c.sbatch("-A", "pn", "-L", "fluent:2", "-D", str(work), "-o", "/dev/null",
                    "--wrap", "true")  # fmt: skip
    reason = "AssocMaxUnknownPerNode"
    c.wait_for(lambda: c.job(over)["reason"] == reason, 15, f"no {reason}")
    shown = c.run("scontrol", "show", "job", str(over)).stdout
    assert f"JobState=PENDING Reason={reason} " in shown, shown
    listed = c.run("squeue", "-h", "-j", str(over), "-o", "%T %r").stdout
    assert listed.strip() == f"PENDING {reason}", listed
    within = c.sbatch("-A", "pn", "-L", "fluent:1", "-D", str(work), "-o", "/dev/null",
                      "--wrap", "true")  # fmt: skip
    assert c.wait_done(within)["state"] == "COMPLETED"
    c.run("scancel", str(over))
    _sacctmgr(c, "add", "qos", "pernode", "MaxTRESPerNode=license/fluent=1")
    _sacctmgr(c, "modify", "user", "root", "where", "account=pn", "set",
              "MaxTRESPerNode=license/fluent=-1", "qos+=pernode")  # fmt: skip
    c.wait_for(lambda: not limited(), 20, "the lifted limit did not reach the controller")
    held = c.sbatch("-A", "pn", "-q", "pernode", "-L", "fluent:2", "-D", str(work),
                    "-o", "/dev/null", "--wrap", "true")  # fmt: skip
    c.wait_for(lambda: c.job(held)["reason"] == "QOSMaxUnknownPerNode", 15, "no QOS reason")
    c.run("scancel", str(held))
