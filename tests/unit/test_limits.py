"""Accounting limits: associations as the controller keeps them, and gates in the core."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller import associations
from controller.associations import NOTHING_SPENT, AssocSet, Spent
from controller.core import BackfillParams, schedule
from controller.core.limits import Gate, Usage
from controller.jobstate import Reason
from controller.priorities import PriorityKeeper
from corral.config import parse
from corral.errors import SlurmError
from tests.unit.scenario import NOW, cluster, job, node, partition, running

ROW = {"Cluster": "c", "Partition": "", "QOS": "normal", "Def QOS": ""}
ASSOCS = AssocSet.from_rows(
    [
        {**ROW, "Account": "root", "User": "", "ParentName": ""},
        {**ROW, "Account": "lab", "User": "", "ParentName": "root", "GrpTRES": "cpu=6"},
        {
            **ROW,
            "Account": "lab",
            "User": "alice",
            "ParentName": "lab",
            "MaxJobs": "2",
            "MaxWall": "01:00:00",
            "MaxSubmit": "3",
        },
        {**ROW, "Account": "lab", "User": "bob", "Partition": "gpu", "QOS": "normal,gold"},
    ],
    [{"User": "alice", "Def Acct": "lab"}, {"User": "bob", "Def Acct": "lab"}],
    [{"Name": "normal", "MaxJobsPU": "", "MaxWall": ""}, {"Name": "gold", "MaxJobsPU": "1"}],
)
ALL = associations.enforcing(["associations", "limits", "qos"])


def test_enforce_words_imply_associations() -> None:
    assert associations.enforcing(["limits"]) == {"limits", "associations"}
    assert associations.enforcing(["safe"]) == {"safe", "limits", "associations"}
    assert associations.enforcing([]) == frozenset()


def test_the_set_survives_its_journal_form() -> None:
    assert AssocSet.from_json(ASSOCS.to_json()) == ASSOCS


def test_submission_takes_the_default_account_and_checks_the_association() -> None:
    admitted = associations.admit(job(1), ASSOCS, ALL, [])
    assert (admitted.account, admitted.qos) == ("lab", "normal")
    with pytest.raises(SlurmError, match="Invalid account"):
        associations.admit(job(1, account="physics"), ASSOCS, ALL, [])
    with pytest.raises(SlurmError, match="Invalid account"):
        associations.admit(job(1, user="carol"), ASSOCS, ALL, [])
    with pytest.raises(SlurmError, match="Invalid account"):  # bob only has partition gpu
        associations.admit(job(1, user="bob"), ASSOCS, ALL, [])
    bob = associations.admit(job(1, user="bob", partitions=("gpu",), qos="gold"), ASSOCS, ALL, [])
    assert bob.qos == "gold"
    with pytest.raises(SlurmError, match="Invalid qos"):
        associations.admit(job(1, qos="gold"), ASSOCS, ALL, [])


def test_max_submit_refuses_the_job_over_it() -> None:
    queued = [job(i, account="lab") for i in range(3)]
    with pytest.raises(SlurmError, match="Job violates accounting/QOS policy"):
        associations.admit(job(9), ASSOCS, ALL, queued)
    associations.admit(job(9), ASSOCS, ALL, queued[:2])


def test_gates_carry_slurms_reasons() -> None:
    alice = replace(job(1, account="lab", time_limit=30), cpus_per_task=2)
    reasons = [g.reason for g in associations.gates(alice, ASSOCS)]
    assert reasons == [Reason.ASSOC_MAX_JOBS, Reason.ASSOC_GRP_CPU]
    too_long = associations.gates(replace(alice, time_limit=90), ASSOCS)
    assert Usage({}).blocked(too_long) is Reason.ASSOC_MAX_WALL


def test_usage_counts_against_caps() -> None:
    gates = (Gate("k", 2, 1, Reason.ASSOC_MAX_JOBS),)
    usage = Usage({"k": 1})
    assert usage.blocked(gates) is None
    usage.take(gates)
    assert usage.blocked(gates) is Reason.ASSOC_MAX_JOBS


@pytest.mark.parametrize("backfill", [None, BackfillParams()], ids=["main", "backfill"])
def test_a_job_over_a_limit_waits_without_blocking_the_rest(
    backfill: BackfillParams | None,
) -> None:
    one = Gate("a:lab/alice/:jobs", 2, 1, Reason.ASSOC_MAX_JOBS)
    snap = cluster([node("n1", cpus=8)], [partition("batch", "n1")]).snapshot(
        [job(1), job(2), job(3)], running=[running(99)]
    )
    snap = replace(snap, gates={1: (one,), 2: (one,)}, usage={one.key: 1})
    plan = schedule(snap, NOW, backfill)
    assert [s.job_id for s in plan.starts] == [1, 3]
    assert plan.reasons[2] is Reason.ASSOC_MAX_JOBS


def test_the_share_tree_follows_dbds_associations(tmp_path: Path) -> None:
    """sshare's tree and fair share come from the associations' Fairshare once dbd is known."""
    conf = parse(
        "ClusterName=c\nSlurmctldHost=h(127.0.0.1)\nPriorityType=priority/multifactor\n"
        "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1 Default=YES\n",
        str(tmp_path / "slurm.conf"),
    )
    keeper = PriorityKeeper(conf)
    keeper.associations = AssocSet.from_rows(
        [
            {**ROW, "Account": "root", "User": "", "ParentName": "", "Share": "1"},
            {**ROW, "Account": "lab", "User": "", "ParentName": "root", "Share": "10"},
            {**ROW, "Account": "lab", "User": "alice", "ParentName": "lab", "Share": "3"},
            {**ROW, "Account": "lab", "User": "bob", "ParentName": "lab", "Share": "parent"},
        ],
        [],
        [],
    )
    keeper.recalculate(NOW, [], [], 1)
    shares = {(r.account, r.user): r.raw_shares for r in keeper.tree.rows}
    assert shares[("lab", "")] == 10
    assert shares[("lab", "alice")] == 3
    assert shares[("lab", "bob")] == 1


def test_grp_tres_mins_holds_jobs_once_the_accounts_usage_reaches_it() -> None:
    assocs = AssocSet.from_rows(
        [
            {**ROW, "Account": "root", "User": "", "ParentName": ""},
            {**ROW, "Account": "lab", "User": "", "ParentName": "root", "GrpTRESMins": "cpu=100"},
            {**ROW, "Account": "lab", "User": "alice", "ParentName": "lab"},
        ],
        [{"User": "alice", "Def Acct": "lab"}],
        [],
    )
    small = job(1, account="lab", time_limit=10)  # 1 CPU for 10 minutes

    def used(minutes: float) -> Any:
        return lambda assoc: Spent(0.0, 0.0, {"cpu": minutes * 60} if not assoc.user else {})

    assert associations.gates(small, assocs, used(50)) == ()
    (gate,) = associations.gates(small, assocs, used(100))
    assert Usage({}).blocked([gate]) is Reason.ASSOC_GRP_CPU_MINUTES
    assert associations.gates(small, assocs, used(85), safe=False) == ()
    assert associations.gates(small, assocs, used(95), safe=True) != ()  # 95 + 10 > 100


def _alice(**limits: str) -> AssocSet:
    return AssocSet.from_rows(
        [
            {**ROW, "Account": "root", "User": "", "ParentName": ""},
            {**ROW, "Account": "lab", "User": "", "ParentName": "root"},
            {**ROW, "Account": "lab", "User": "alice", "ParentName": "lab", **limits},
        ],
        [{"User": "alice", "Def Acct": "lab"}],
        [{"Name": "normal", **{k[4:]: v for k, v in limits.items() if k.startswith("qos:")}}],
    )


def _held(one: Any, assocs: AssocSet, usage: dict[str, int] | None = None) -> Reason | None:
    return Usage(usage or {}).blocked(associations.gates(one, assocs))


GPU_JOB = replace(job(1, account="lab", time_limit=60), min_nodes=2, gres="gpu:a100:2")


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"MaxTRES": "mem=3G"}, Reason.ASSOC_MAX_MEM_PER_JOB),
        ({"MaxTRES": "node=1"}, Reason.ASSOC_MAX_NODE_PER_JOB),
        ({"MaxTRES": "gres/gpu=3"}, Reason.ASSOC_MAX_GRES_PER_JOB),
        ({"MaxTRES": "gres/gpu:a100=2"}, Reason.ASSOC_MAX_GRES_PER_JOB),
        ({"MaxTRESPerNode": "gres/gpu=1"}, Reason.ASSOC_MAX_GRES_PER_NODE),
        ({"MaxTRESPerNode": "mem=1G"}, Reason.ASSOC_MAX_MEM_PER_NODE),
        ({"MaxTRESMins": "cpu=100"}, Reason.ASSOC_MAX_CPU_MINUTES_PER_JOB),  # 2 x 60
        ({"GrpTRES": "gres/gpu=3"}, Reason.ASSOC_GRP_GRES),
        ({"GrpTRES": "node=1"}, Reason.ASSOC_GRP_NODE),
        ({"qos:MaxTRES": "gres/gpu=2"}, Reason.QOS_MAX_GRES_PER_JOB),
        ({"qos:MaxTRESPerNode": "cpu=0"}, Reason.QOS_MAX_CPU_PER_NODE),
        ({"qos:MaxTRESPU": "mem=2G"}, Reason.QOS_MAX_MEM_PER_USER),
        ({"qos:MaxTRESPA": "node=1"}, Reason.QOS_MAX_NODE_PER_ACCOUNT),
        ({"qos:GrpTRES": "gres/gpu=1"}, Reason.QOS_GRP_GRES),
    ],
)
def test_every_tres_limit_holds_a_job_with_slurms_reason(
    limits: dict[str, str], reason: Reason
) -> None:
    """GPU_JOB: 2 nodes, 1 CPU each, 2 GiB each, 2 a100 GPUs each (4 in all)."""
    big = replace(GPU_JOB, mem_per_node=2048)
    assert _held(big, _alice(**limits)) is reason


def test_tres_limits_that_fit_let_the_job_start_and_count_its_use() -> None:
    assocs = _alice(**{"GrpTRES": "gres/gpu=6,mem=8G", "qos:MaxTRESPU": "gres/gpu:a100=4"})
    first = replace(GPU_JOB, mem_per_node=2048)
    assert _held(first, assocs) is None
    usage = Usage({})
    usage.take(associations.gates(first, assocs))
    assert usage.blocked(associations.gates(first, assocs)) is Reason.ASSOC_GRP_GRES


def test_a_running_job_counts_what_it_was_given() -> None:
    given = replace(
        GPU_JOB,
        nodes=("n1", "n2", "n3"),
        cpus=(4, 4, 4),
        alloc_mem=(100, 100, 100),
        gres_alloc=((("gpu", "a100", 2),),) * 3,
    )
    (gate,) = associations.gates(given, _alice(GrpTRES="node=8"))
    assert gate.amount == 3
    (gate,) = associations.gates(given, _alice(GrpTRES="gres/gpu:a100=8"))
    assert gate.amount == 6


def test_grp_wall_holds_jobs_once_the_wall_clock_usage_reaches_it() -> None:
    assocs = _alice(GrpWall="10")
    small = job(1, account="lab", time_limit=5)

    def used(minutes: float) -> Any:
        return lambda assoc: Spent(0.0, minutes * 60 if assoc.user else 0.0, {})

    assert associations.gates(small, assocs, used(4)) == ()
    assert Usage({}).blocked(associations.gates(small, assocs, used(10))) is (Reason.ASSOC_GRP_WALL)
    assert associations.gates(small, assocs, used(6), safe=True) != ()


def test_an_older_journal_form_is_refused_not_misread() -> None:
    with pytest.raises(ValueError):
        AssocSet.from_json('{"assocs": [], "users": {}, "qos": []}')


def test_qos_limits_hold_jobs_with_slurms_reasons() -> None:
    gold = replace(job(1, account="lab", time_limit=30), qos="normal")
    per_user = associations.gates(gold, _alice(**{"qos:MaxJobsPU": "1"}))
    usage = Usage({})
    assert usage.blocked(per_user) is None
    usage.take(per_user)
    assert usage.blocked(per_user) is Reason.QOS_MAX_JOBS_PER_USER
    too_long = associations.gates(gold, _alice(**{"qos:MaxWall": "00:20:00"}))
    assert Usage({}).blocked(too_long) is Reason.QOS_MAX_WALL
    assert associations.gates(gold, _alice(**{"qos:MaxWall": "00:30:00"})) == ()


@pytest.mark.parametrize("cap", ["MaxSubmitPU", "MaxSubmitPA", "GrpSubmit"])
def test_a_qos_submit_cap_refuses_the_job_over_it(cap: str) -> None:
    assocs = _alice(**{f"qos:{cap}": "2"})
    queued = [job(i, account="lab", qos="normal") for i in range(2)]
    with pytest.raises(SlurmError, match="Job violates accounting/QOS policy"):
        associations.admit(job(9), assocs, ALL, queued)
    associations.admit(job(9), assocs, ALL, queued[:1])


def _keeper(tmp_path: Path, qos: list[dict[str, str]]) -> PriorityKeeper:
    conf = parse(
        "ClusterName=c\nSlurmctldHost=h(127.0.0.1)\nPriorityType=priority/multifactor\n"
        "PriorityWeightQOS=1000\nPriorityDecayHalfLife=0\nPriorityUsageResetPeriod=MONTHLY\n"
        "NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1 Default=YES\n",
        str(tmp_path / "slurm.conf"),
    )
    keeper = PriorityKeeper(conf)
    keeper.associations = AssocSet.from_rows(
        [
            {**ROW, "Account": "root", "User": "", "ParentName": ""},
            {**ROW, "Account": "lab", "User": "", "ParentName": "root"},
            {**ROW, "Account": "lab", "User": "alice", "ParentName": "lab", "QOS": "normal,gold"},
        ],
        [{"User": "alice", "Def Acct": "lab"}],
        qos,
    )
    return keeper


def test_the_qos_priority_feeds_the_qos_factor(tmp_path: Path) -> None:
    keeper = _keeper(tmp_path, [{"Name": "normal"}, {"Name": "gold", "Priority": "100"}])
    gold, plain = job(1, account="lab", qos="gold"), job(2, account="lab", qos="normal")
    new = keeper.recalculate(NOW, [], [gold, plain], 1).values
    # The whole PriorityWeightQOS; a job whose factors are all 0 gets Slurm's floor, 1.
    assert (new[gold.job_id], new[plain.job_id]) == (1000, 1)


def test_usage_factor_scales_what_fair_share_charges(tmp_path: Path) -> None:
    keeper = _keeper(
        tmp_path,
        [{"Name": "normal", "UsageFactor": "2"}, {"Name": "gold", "UsageFactor": "0"}],
    )
    ran = replace(
        job(1, account="lab", qos="normal"), start_time=NOW - 100, nodes=("n1",), cpus=(2,)
    )
    assert keeper.billing(ran) == 2
    assert keeper.charged(ran) == 4
    assert keeper.charged(replace(ran, qos="gold")) == 0
    keeper.recalculate(NOW - 1000, [], [], 1)  # the first calculation starts the clock
    keeper.ended(ran, NOW)
    keeper.recalculate(NOW, [], [], 1)
    used = {(r.account, r.user): r.raw_usage for r in keeper.tree.rows}
    assert used[("lab", "alice")] == 2 * keeper.billing(ran) * 100


def test_default_qos_applies_only_when_no_qos_is_asked_for() -> None:
    assocs = AssocSet.from_rows(
        [
            {**ROW, "Account": "root", "User": "", "ParentName": ""},
            {**ROW, "Account": "lab", "User": "", "ParentName": "root"},
            {
                **ROW,
                "Account": "lab",
                "User": "alice",
                "ParentName": "lab",
                "QOS": "gold,normal",
                "Def QOS": "gold",
            },
        ],
        [{"User": "alice", "Def Acct": "lab"}],
        [{"Name": "normal"}, {"Name": "gold"}],
    )
    assert associations.admit(job(1), assocs, ALL, [], qos_given=False).qos == "gold"
    assert associations.admit(job(1, qos="normal"), assocs, ALL, [], qos_given=True).qos == (
        "normal"
    )


def test_qos_grp_tres_mins_and_grp_wall_hold_jobs_once_the_qos_usage_reaches_them() -> None:
    assocs = _alice(**{"qos:GrpTRESMins": "cpu=100", "qos:GrpWall": "60"})
    small = job(1, account="lab", time_limit=10, qos="normal")

    def qos_used(cpu_minutes: float, wall_minutes: float) -> Any:
        spent = Spent(0.0, wall_minutes * 60, {"cpu": cpu_minutes * 60})
        return lambda name: spent if name == "normal" else NOTHING_SPENT

    assert associations.gates(small, assocs, qos_used=qos_used(50, 30)) == ()
    held = associations.gates(small, assocs, qos_used=qos_used(100, 30))
    assert Usage({}).blocked(held) is Reason.QOS_GRP_CPU_MINUTES
    held = associations.gates(small, assocs, qos_used=qos_used(10, 60))
    assert Usage({}).blocked(held) is Reason.QOS_GRP_WALL
    assert associations.gates(small, assocs, safe=True, qos_used=qos_used(95, 0)) != ()


@pytest.mark.parametrize(
    ("limit", "spent", "reason"),
    [
        ("mem=2000", {"mem": 2000 * 60}, Reason.ASSOC_GRP_MEM_MINUTES),
        ("node=10", {"node": 10 * 60}, Reason.ASSOC_GRP_NODE_MINUTES),
        ("gres/gpu=30", {"gres/gpu": 30 * 60}, Reason.ASSOC_GRP_GRES_MINUTES),
        ("billing=5", {}, Reason.ASSOC_GRP_BILLING_MINUTES),
    ],
)
def test_grp_tres_mins_covers_every_tres(
    limit: str, spent: dict[str, float], reason: Reason
) -> None:
    assocs = _alice(GrpTRESMins=limit)
    used = Spent(5 * 60, 0.0, spent)  # 5 billed minutes
    held = associations.gates(GPU_JOB, assocs, lambda assoc: used)
    assert Usage({}).blocked(held) is reason
    assert associations.gates(GPU_JOB, assocs) == ()


def test_fair_share_keeps_what_each_job_held_of_each_tres(tmp_path: Path) -> None:
    keeper = _keeper(tmp_path, [{"Name": "normal"}])
    ran = replace(
        job(1, account="lab", qos="normal"),
        start_time=NOW - 60,
        nodes=("n1",),
        cpus=(2,),
        alloc_mem=(100,),
        gres_alloc=((("gpu", "a100", 1),),),
    )
    keeper.recalculate(NOW - 1000, [], [], 1)  # the first calculation starts the clock
    keeper.ended(ran, NOW)
    keeper.recalculate(NOW, [], [], 1)
    assert keeper.usage.tres == {
        ("lab", "alice/cpu"): 120.0,
        ("lab", "alice/mem"): 6000.0,
        ("lab", "alice/node"): 60.0,
        ("lab", "alice/gres/gpu"): 60.0,
        ("lab", "alice/gres/gpu:a100"): 60.0,
    }
    assert keeper.usage.qos_tres[("", "normal/gres/gpu")] == 60.0
