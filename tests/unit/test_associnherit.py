"""Limits an association inherits from the accounts above it, as Slurm 22.05 shows and
enforces them. The tree is the one measured there (slurmdbd on MariaDB, then
``scontrol show assoc_mgr flags=assoc``): account ``phys`` under root with
``GrpTRES=cpu=8 GrpJobs=5 GrpSubmit=9 GrpWall=100 GrpTRESMins=cpu=1000
GrpTRESRunMins=cpu=500 MaxJobs=3 MaxSubmit=10 MaxWall=60 MaxTRES=cpu=2
MaxTRESPerNode=cpu=1 MaxTRESMins=cpu=50 Priority=7``, its sub-account ``sub`` with
``MaxJobs=2``, user ``daemon`` in phys, ``root`` in phys with ``MaxWall=30
MaxTRES=mem=100``, ``nobody`` in sub."""

from __future__ import annotations

from typing import Any

from cli import scontrolassoc
from controller import associnherit, assocmgr
from controller.associations import AssocSet, gates
from controller.core.fairshare import ShareTree, Usage
from controller.jobstate import JobState, Reason
from controller.model import Job
from controller.principal import Principal
from corral.wire import codec
from corral.wire import corral_pb2 as pb

NOW = 1_700_000_000


def _assoc(account: str, user: str, parent: str, ident: int, lft: int, **kw: Any) -> Any:
    return pb.AssociationLimits(
        account=account, user=user, parent=parent, shares=1, qos=["normal"], id=ident, lft=lft,
        **kw,
    )  # fmt: skip


PHYS = {
    "grp_tres": {"cpu": 8}, "grp_jobs": 5, "grp_submit": 9, "grp_wall": 100,
    "grp_tres_mins": {"cpu": 1000}, "grp_tres_run_mins": {"cpu": 500}, "max_jobs": 3,
    "max_submit": 10, "max_wall": 60, "max_tres": {"cpu": 2}, "max_tres_per_node": {"cpu": 1},
    "max_tres_mins": {"cpu": 50}, "priority": 7,
}  # fmt: skip
TREE = [
    _assoc("root", "", "", 1, 1),
    _assoc("root", "root", "", 2, 12),
    _assoc("phys", "", "root", 3, 2, parent_id=1, **PHYS),
    _assoc("phys", "daemon", "", 5, 5, parent_id=3),
    _assoc("phys", "root", "", 7, 3, parent_id=3, max_wall=30, max_tres={"mem": 100}),
    _assoc("sub", "", "phys", 4, 7, parent_id=3, max_jobs=2),
    _assoc("sub", "nobody", "", 6, 8, parent_id=4),
]


def _limit_lines(record: str) -> list[str]:
    """A record's lines from GrpJobs= on (its limits), without the indentation."""
    lines = [line.strip() for line in record.splitlines()]
    return lines[lines.index(next(x for x in lines if x.startswith("GrpJobs="))) :]


# The limit lines Slurm 22.05 printed, nothing running.
GRP_UNSET = [
    "GrpJobs=N(0) GrpJobsAccrue=N(0)",
    "GrpSubmitJobs=N(0) GrpWall=N(0.00)",
    "GrpTRES=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vmem=N(0),pages=N(0)",
    "GrpTRESMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vmem=N(0),pages=N(0)",
    "GrpTRESRunMins=cpu=N(0),mem=N(0),energy=N(0),node=N(0),billing=N(0),fs/disk=N(0),vmem=N(0),pages=N(0)",
]
SLURM = {
    ("phys", "daemon"): [
        *GRP_UNSET,
        "MaxJobs=3(0) MaxJobsAccrue= MaxSubmitJobs=10(0) MaxWallPJ=60",
        "MaxTRESPJ=cpu=2", "MaxTRESPN=cpu=1", "MaxTRESMinsPJ=cpu=50", "MinPrioThresh=",
    ],
    ("phys", "root"): [
        *GRP_UNSET,
        "MaxJobs=3(0) MaxJobsAccrue= MaxSubmitJobs=10(0) MaxWallPJ=30",
        "MaxTRESPJ=cpu=2,mem=100", "MaxTRESPN=cpu=1", "MaxTRESMinsPJ=cpu=50", "MinPrioThresh=",
    ],
    ("sub", ""): [
        *GRP_UNSET,
        "MaxJobs=2(0) MaxJobsAccrue= MaxSubmitJobs=10(0) MaxWallPJ=60",
        "MaxTRESPJ=cpu=2", "MaxTRESPN=cpu=1", "MaxTRESMinsPJ=cpu=50", "MinPrioThresh=",
    ],
    ("sub", "nobody"): [
        *GRP_UNSET,
        "MaxJobs=2(0) MaxJobsAccrue= MaxSubmitJobs=10(0) MaxWallPJ=60",
        "MaxTRESPJ=cpu=2", "MaxTRESPN=cpu=1", "MaxTRESMinsPJ=cpu=50", "MinPrioThresh=",
    ],
    ("root", "root"): [
        *GRP_UNSET,
        "MaxJobs= MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=",
        "MaxTRESPJ=", "MaxTRESPN=", "MaxTRESMinsPJ=", "MinPrioThresh=",
    ],
}  # fmt: skip


def test_assoc_mgr_shows_inherited_limits_as_slurm_does() -> None:
    cache = AssocSet.from_reply(pb.AssociationsReply(associations=TREE))
    who = Principal(0, 0, "root", frozenset())
    wanted = assocmgr.Wanted.of(pb.AssocMgrRequest(flags=assocmgr.ASSOC), who, frozenset())
    reply = assocmgr.reply("gsacct", cache, [], ShareTree((), {}, False), Usage(), wanted, who, NOW)
    decoded = codec.decode("AssocMgrReply", reply.SerializeToString())
    for record in decoded["associations"]:
        text = scontrolassoc.render({**decoded, "associations": [record]}, assocmgr.ASSOC)
        key = (record["limits"]["account"], record["limits"]["user"])
        if key in SLURM:
            assert _limit_lines(text) == SLURM[key], key
        if key[0] in ("phys", "sub"):  # Priority=7 on every record below phys
            assert " Priority=7 " in text, key


def test_own_limits_and_group_limits_stay_as_set() -> None:
    by = {(m.account, m.user): m for m in associnherit.filled(TREE)}
    assert by["phys", ""] == TREE[2]  # its own, under a root that sets none
    daemon = by["phys", "daemon"]
    assert not daemon.HasField("grp_jobs") and not daemon.grp_tres
    assert (daemon.max_jobs, daemon.max_wall, daemon.priority) == (3, 60, 7)
    assert dict(by["phys", "root"].max_tres) == {"cpu": 2, "mem": 100}
    assert [m.id for m in associnherit.filled(TREE)] == [m.id for m in TREE]  # their order
    assert not TREE[3].HasField("max_jobs")  # the given messages are left as they were


def test_an_account_tree_with_a_cycle_ends() -> None:
    loop = [_assoc("a", "", "b", 1, 1, max_jobs=1), _assoc("b", "", "a", 2, 2)]
    assert [m.max_jobs for m in associnherit.filled(loop)] == [1, 1]


def _job(user: str, account: str, time_limit: int) -> Job:
    return Job(
        job_id=1, name="j", uid=1, gid=1, user=user, group="g", state=JobState.PENDING,
        reason=Reason.NONE, submit_time=NOW, partitions=("debug",), account=account,
        min_cpus=1, time_limit=time_limit,
    )  # fmt: skip


def test_inherited_limits_are_enforced() -> None:
    """A user of ``sub`` waits under sub's MaxJobs=2 and phys' MaxWall=60, as slurmctld
    enforces the values it holds."""
    assocs = AssocSet.from_reply(pb.AssociationsReply(associations=TREE))
    found = gates(_job("nobody", "sub", 90), assocs)
    assert Reason.ASSOC_MAX_WALL in [g.reason for g in found]
    jobs = [g for g in found if g.reason is Reason.ASSOC_MAX_JOBS]
    assert [g.cap for g in jobs] == [2]
    within = gates(_job("root", "phys", 30), assocs)  # root's own MaxWall=30
    assert Reason.ASSOC_MAX_WALL not in [g.reason for g in within]
    assert Reason.ASSOC_MAX_WALL in [g.reason for g in gates(_job("root", "phys", 31), assocs)]
