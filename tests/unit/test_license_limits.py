"""Accounting limits on licenses: sacctmgr's ``GrpTRES=license/fluent=N`` and kin,
accepted by dbd only for a license some cluster tracks (AccountingStorageTRES),
and enforced by the controller with libslurm 22.05's reasons (``AssocGrpLicense``,
``QOSMaxLicensePerJob``, ...)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller import associations, assoclimits, jobtres
from controller.associations import AssocSet
from controller.core import BackfillParams, schedule
from controller.core.fairshare import Usage as FairUsage
from controller.core.limits import Usage
from controller.jobstate import JobState, Reason
from corral.errors import SlurmError
from dbd import schema
from dbd.admin import Admin
from dbd.enforced import enforced
from dbd.storage import Storage, engine_for
from tests.databases import BACKENDS, fresh_database
from tests.unit.scenario import NOW, cluster, job, node, partition

ROW = {"Cluster": "c", "Partition": "", "QOS": "normal", "Def QOS": ""}
ALL = associations.enforcing(["associations", "limits", "qos"])


def _alice(**limits: str) -> AssocSet:
    """root > lab > alice; ``lab:`` limits go on the account, ``qos:`` on normal."""
    own = {k: v for k, v in limits.items() if ":" not in k}
    lab = {k[4:]: v for k, v in limits.items() if k.startswith("lab:")}
    return AssocSet.from_rows(
        [
            {**ROW, "Account": "root", "User": "", "ParentName": ""},
            {**ROW, "Account": "lab", "User": "", "ParentName": "root", **lab},
            {**ROW, "Account": "lab", "User": "alice", "ParentName": "lab", **own},
        ],
        [{"User": "alice", "Def Acct": "lab"}],
        [{"Name": "normal", **{k[4:]: v for k, v in limits.items() if k.startswith("qos:")}}],
    )


FLUENT = job(1, account="lab", time_limit=60, licenses="Fluent:2")


def _held(one: Any, assocs: AssocSet, used: dict[str, int] | None = None) -> Reason | None:
    return Usage(used or {}).blocked(associations.gates(one, assocs))


def test_a_jobs_licenses_are_tres_in_its_total_and_spread_over_its_nodes() -> None:
    """Slurm 22.05, measured under ``MaxTRESPerNode=license/fluent=1``: ``-N2 -L
    fluent:3`` runs (3 over 2 nodes is 1 each, rounded down), ``-N2 -L fluent:4`` pends."""
    tres = jobtres.of_job(replace(FLUENT, licenses="Fluent:2,ansys"))
    assert (tres.total["license/fluent"], tres.total["license/ansys"]) == (2, 1)
    assert (tres.per_node["license/fluent"], tres.per_node["license/ansys"]) == (2, 1)
    assert jobtres.of_job(replace(FLUENT, min_nodes=2, licenses="fluent:3")).per_node == {
        **jobtres.of_job(replace(FLUENT, min_nodes=2)).per_node,
        "license/fluent": 1,
    }
    started = replace(FLUENT, nodes=("n1", "n2"), cpus=(1, 1), state=JobState.RUNNING)
    assert jobtres.of_job(started).total["license/fluent"] == 2
    assert jobtres.of_job(started).per_node["license/fluent"] == 1


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"MaxTRES": "license/fluent=1"}, Reason.ASSOC_MAX_LICENSE_PER_JOB),
        ({"MaxTRESMins": "license/fluent=100"}, Reason.ASSOC_MAX_LICENSE_MINUTES_PER_JOB),
        ({"GrpTRES": "license/fluent=1"}, Reason.ASSOC_GRP_LICENSE),
        ({"lab:GrpTRES": "license/fluent=1"}, Reason.ASSOC_GRP_LICENSE),
        ({"qos:MaxTRES": "license/fluent=1"}, Reason.QOS_MAX_LICENSE_PER_JOB),
        ({"qos:MaxTRESMins": "license/fluent=119"}, Reason.QOS_MAX_LICENSE_MINUTES_PER_JOB),
        ({"qos:MaxTRESPU": "license/fluent=1"}, Reason.QOS_MAX_LICENSE_PER_USER),
        ({"qos:MaxTRESPA": "license/fluent=1"}, Reason.QOS_MAX_LICENSE_PER_ACCOUNT),
        ({"qos:GrpTRES": "license/fluent=1"}, Reason.QOS_GRP_LICENSE),
        ({"MaxTRESPerNode": "license/fluent=1"}, Reason.ASSOC_MAX_UNKNOWN_PER_NODE),
        ({"qos:MaxTRESPerNode": "license/fluent=1"}, Reason.QOS_MAX_UNKNOWN_PER_NODE),
    ],
)
def test_every_license_limit_holds_a_job_over_it_with_slurms_reason(
    limits: dict[str, str], reason: Reason
) -> None:
    """FLUENT asks 2 licenses for 60 minutes: 120 license-minutes."""
    assert _held(FLUENT, _alice(**limits)) is reason
    assert reason.value in {
        "AssocMaxLicensePerJob", "AssocMaxLicenseMinutesPerJob", "AssocGrpLicense",
        "QOSMaxLicensePerJob", "QOSMaxLicenseMinutesPerJob", "QOSMaxLicensePerUser",
        "MaxLicensePerAccount", "QOSGrpLicense", "AssocMaxUnknownPerNode",
        "QOSMaxUnknownPerNode",
    }  # fmt: skip


def test_limits_on_another_license_or_at_the_count_let_the_job_start() -> None:
    assert _held(FLUENT, _alice(MaxTRES="license/ansys=1", GrpTRES="license/fluent=2")) is None
    spread = replace(FLUENT, min_nodes=2, licenses="fluent:3")
    assert _held(spread, _alice(MaxTRESPerNode="license/fluent=1")) is None
    assert _held(job(1, account="lab"), _alice(GrpTRES="license/fluent=0")) is None


def test_grp_license_limits_count_what_running_jobs_hold() -> None:
    assocs = _alice(**{"lab:GrpTRES": "license/fluent=3"})
    holder = replace(
        FLUENT, job_id=9, nodes=("n1",), cpus=(1,), state=JobState.RUNNING, start_time=NOW
    )
    second = replace(FLUENT, job_id=2)
    gates, used = assoclimits.limits([holder, second], [second], assocs, ALL, FairUsage())
    assert used == {"g:lab//:license/fluent": 2}
    assert Usage(used).blocked(gates[2]) is Reason.ASSOC_GRP_LICENSE
    one = replace(second, licenses="fluent:1")
    gates, used = assoclimits.limits([holder, one], [one], assocs, ALL, FairUsage())
    assert Usage(used).blocked(gates[2]) is None


def test_grp_license_minutes_hold_jobs_once_usage_reaches_them() -> None:
    from controller.associations import Spent

    assocs = _alice(GrpTRESMins="license/fluent=100")
    gates = associations.gates(
        FLUENT, assocs, lambda a: Spent(0.0, 0.0, {"license/fluent": 6000.0} if a.user else {})
    )
    assert Usage({}).blocked(gates) is Reason.ASSOC_GRP_LICENSE_MINUTES


@pytest.mark.parametrize("backfill", [None, BackfillParams()], ids=["main", "backfill"])
def test_a_job_over_a_grp_license_limit_waits_and_the_next_one_starts(
    backfill: BackfillParams | None,
) -> None:
    assocs = _alice(GrpTRES="license/fluent=3")
    first, second, third = (
        replace(FLUENT, job_id=i, licenses=lic)
        for i, lic in ((1, "fluent:2"), (2, "fluent:2"), (3, "fluent:1"))
    )
    pending = [first, second, third]
    gates, used = assoclimits.limits(pending, pending, assocs, ALL, FairUsage())
    snap = cluster([node("n1", cpus=8)], [partition("batch", "n1")]).snapshot(pending)
    snap = replace(snap, licenses={"fluent": 10}, gates=gates, usage=used)
    plan = schedule(snap, NOW, backfill)
    assert [s.job_id for s in plan.starts] == [1, 3]
    assert plan.reasons[2] is Reason.ASSOC_GRP_LICENSE


# ------------------------------------------------------------------ dbd


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


def _run(admin: Admin, verb: str, kind: str, where: dict[str, str], **values: str) -> Any:
    return admin.run(verb, kind, where, values, True, "root", True).rows


def test_dbd_refuses_a_license_no_cluster_tracks(admin: Admin) -> None:
    _run(admin, "add", "account", {"name": "lab", "cluster": "bench"})
    with pytest.raises(SlurmError) as refused:
        _run(admin, "modify", "account", {"name": "lab"}, grptres="license/fluent=4")
    assert str(refused.value) == (  # Slurm 22.05's sacctmgr, measured
        "slurmdb_format_tres_str: no TRES known by type license/fluent\n"
        " Unknown option: GrpTRES=license/fluent=4\n"
        " Use keyword 'where' to modify condition"
    )
    with pytest.raises(
        SlurmError, match="no TRES known by type license/\n Unknown option: MaxTRESPU=license/=4"
    ):
        _run(admin, "add", "qos", {"name": "lic"}, maxtresperuser="license/=4")


def test_dbd_keeps_limits_on_a_tracked_license_for_the_controller(admin: Admin) -> None:
    Storage(admin.engine).register_cluster("bench", "127.0.0.1", 6817, 100, tres=["license/Fluent"])
    _run(admin, "add", "account", {"name": "lab", "cluster": "bench"})
    _run(admin, "modify", "account", {"name": "lab"}, grptres="license/fluent=4")
    _run(admin, "add", "qos", {"name": "lic"}, maxtresperuser="license/Fluent=1")
    _run(admin, "modify", "qos", {"name": "lic"}, maxtrespernode="license/fluent=1")
    reply = enforced(admin.engine, "bench")
    (lab,) = [a for a in reply.associations if a.account == "lab" and not a.user]
    assert dict(lab.grp_tres) == {"license/fluent": 4}
    (lic,) = [q for q in reply.qos if q.name == "lic"]
    assert dict(lic.max_tres_pu) == {"license/fluent": 1}
    assert dict(lic.max_tres_per_node) == {"license/fluent": 1}
    assocs = AssocSet.from_reply(reply)
    assert {a.account: dict(a.grp_tres) for a in assocs.assocs}["lab"] == {"license/fluent": 4}


def test_an_item_of_minus_one_lifts_that_limit_alone() -> None:
    from dbd.entities import tres_list

    assert tres_list("cpu=4,license/fluent=-1") == "cpu=4"
    assert tres_list("license/fluent=-1") is None
    with pytest.raises(SlurmError, match="Invalid TRES name: license/"):
        tres_list("license/=2")
