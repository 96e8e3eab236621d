"""slurm.conf's preemption keys and sacctmgr's QOS preemption fields: what each says,
which wins for a job, and bad values refused with file and line."""

from __future__ import annotations

import pytest

from controller import assocrows, preemptrules, views
from controller.associations import AssocSet, QosLimits
from controller.jobstate import JobState
from corral.config import SlurmConfig, parse, show_config
from corral.confsyntax import ConfigError
from corral.errors import SlurmError
from dbd.entities import preempt_mode
from tests.unit.scenario import NOW, job

HEAD = "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=4\n"


def conf(body: str) -> SlurmConfig:
    return parse(HEAD + body, "/etc/slurm/slurm.conf")


@pytest.mark.parametrize(
    ("body", "line", "message"),
    [
        pytest.param("PreemptMode=PAUSE\n", 4, "bad PreemptMode value 'PAUSE'", id="mode"),
        pytest.param("PreemptExemptTime=soon\n", 4, "bad PreemptExemptTime", id="exempt"),
        pytest.param("PreemptParameters=sendsignal\n", 4, "bad PreemptParameters", id="typo"),
        pytest.param(
            "PreemptParameters=suspend_grace_time=soon\n", 4, "suspend_grace_time=<n", id="sgt"
        ),
        pytest.param(
            "PreemptParameters=suspend_grace_time\n", 4, "suspend_grace_time=<n", id="sgt bare"
        ),
        pytest.param(
            "PreemptParameters=min_exempt_priority=-1\n", 4, "min_exempt_priority=<", id="mep"
        ),
        pytest.param("PartitionName=p Nodes=n1 GraceTime=-5\n", 4, "bad GraceTime", id="grace"),
        pytest.param(
            "PartitionName=p Nodes=n1 PreemptMode=REQUEUE,WITHIN\n", 4, "not a partition", id="w"
        ),
        pytest.param("PartitionName=p Nodes=n1 PreemptMode=x\n", 4, "bad PreemptMode", id="pm"),
        pytest.param("PreemptType=preempt/job\n", 4, "bad PreemptType", id="type"),
        pytest.param("PreemptMode=SUSPEND\n", 4, "PreemptMode=SUSPEND needs GANG", id="suspend"),
        pytest.param(
            "PreemptMode=REQUEUE\nPartitionName=p Nodes=n1 PreemptMode=SUSPEND\n",
            5,
            "PreemptMode=SUSPEND needs GANG",
            id="partition suspend",
        ),
        pytest.param(
            "PartitionName=p Nodes=n1 PreemptMode=GANG\n", 4, "GANG needs GANG in", id="p gang"
        ),
        pytest.param("SchedulerTimeSlice=0\n", 4, "bad SchedulerTimeSlice", id="slice"),
        pytest.param("SchedulerTimeSlice=soon\n", 4, "bad SchedulerTimeSlice", id="slice word"),
    ],
)
def test_bad_values_are_refused_with_file_and_line(body: str, line: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        conf(body)
    assert (caught.value.path, caught.value.line) == ("/etc/slurm/slurm.conf", line)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        pytest.param("PreemptParameters=youngest_first", "would undo the checkpoints", id="yf"),
        pytest.param("PreemptParameters=strict_order", "no reordering passes", id="so"),
        pytest.param("PreemptParameters=reorder_count=3", "no reordering passes", id="rc"),
        pytest.param("PreemptParameters=strict_suspend", "its meaning is unknown", id="ss"),
        # Slurm 22.05's spellings, which 24.11 still reads: refused alike.
        pytest.param("SchedulerParameters=bf_interval=5,preempt_strict_order", "reorder", id="so'"),
        pytest.param("SchedulerParameters=preempt_youngest_first", "would undo", id="yf'"),
    ],
)
def test_preempt_parameters_corral_does_not_honour_are_refused_with_the_reason(
    body: str, why: str
) -> None:
    with pytest.raises(ConfigError, match=why) as caught:
        conf(body + "\n")
    assert caught.value.line == 4
    word = body.partition("=")[2].rsplit(",", 1)[-1]
    assert f"PreemptParameters={word.removeprefix('preempt_')} is refused" in str(caught.value)


def test_preempt_parameters_that_are_honoured() -> None:
    plain = conf("").preemption
    assert (plain.send_user_signal, plain.suspend_grace, plain.min_exempt_priority) == (
        False,
        2,  # Slurm's default grace between SIGTSTP and SIGSTOP
        None,
    )
    c = conf("PreemptParameters=Suspend_Grace_Time=7,min_exempt_priority=1000\n").preemption
    assert (c.suspend_grace, c.min_exempt_priority, c.send_user_signal) == (7, 1000, False)
    assert conf("PreemptParameters=suspend_grace_time=0\n").preemption.suspend_grace == 0
    old = conf("SchedulerParameters=bf_interval=5,preempt_send_user_signal\n").preemption
    assert old.send_user_signal
    both = "PreemptType=preempt/qos\nPreemptMode=CANCEL\nPreemptParameters=min_exempt_priority=9\n"
    policy = preemptrules.policy(conf(both), assocs(QosLimits("normal", preempt_mode="within")))
    assert policy is not None and policy.min_exempt_priority == 9
    assert not policy.reclaim_licenses and not plain.reclaim_licenses
    reclaim = both.replace("min_exempt_priority=9", "Reclaim_Licenses")
    policy = preemptrules.policy(conf(reclaim), assocs(QosLimits("normal", preempt_mode="within")))
    assert policy is not None and policy.reclaim_licenses
    with pytest.raises(ConfigError, match="bad PreemptParameters value 'reclaim_licenses=1'"):
        conf("PreemptParameters=reclaim_licenses=1\n")


def test_the_keys_are_read() -> None:
    c = conf(
        "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE,WITHIN\n"
        "PreemptExemptTime=00:01:30\nPreemptParameters=send_user_signal\n"
        "PartitionName=low Nodes=n1 PreemptMode=CANCEL GraceTime=45\n"
        "PartitionName=high Nodes=n1 PriorityTier=2\n"
    )
    assert (c.preempt_type, c.preempt_mode) == ("PREEMPT/PARTITION_PRIO", "REQUEUE")
    assert (c.preemption.within, c.preemption.exempt_time) == (True, 90)
    assert c.preemption.send_user_signal
    low, high = c.partitions
    assert (low.preempt_mode, low.grace_time) == ("CANCEL", 45)
    assert (high.preempt_mode, high.grace_time) == ("", 0)


def test_suspend_and_gang_are_read() -> None:
    c = conf(
        "PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG\nSchedulerTimeSlice=2\n"
        "PartitionName=low Nodes=n1 PreemptMode=REQUEUE\n"
        "PartitionName=mid Nodes=n1 PreemptMode=SUSPEND\n"
    )
    assert (c.preempt_mode, c.preemption.gang, c.preemption.time_slice) == ("SUSPEND", True, 2)
    assert [p.preempt_mode for p in c.partitions] == ["REQUEUE", "SUSPEND"]
    # scontrol show partition and show config, as Slurm prints them.
    assert [views.preempt_mode_shown(p, c) for p in c.partitions] == [
        "REQUEUE,GANG",
        "SUSPEND,GANG",
    ]
    assert dict(show_config(c))["SchedulerTimeSlice"] == "2 sec"
    assert not conf("PreemptMode=REQUEUE\n").preemption.gang
    assert conf("PreemptMode=GANG\n").preempt_mode == "OFF"
    assert conf("PreemptMode=GANG\n").preemption.time_slice == 30


def test_a_suspend_victim_has_no_grace_time() -> None:
    c = conf(
        "PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG\n"
        "PartitionName=low Nodes=n1 GraceTime=30\n"
    )
    own = preemptrules.Rules(c, None).of(RUNNING)
    assert (own.mode, own.grace) == ("SUSPEND", 0)


def assocs(*qos: QosLimits) -> AssocSet:
    return AssocSet(qos={q.name: q for q in qos})


RUNNING = job(5, qos="scav", partition="low", state=JobState.RUNNING, start_time=NOW - 100)
PARTS = "PartitionName=low Nodes=n1 PreemptMode=CANCEL GraceTime=20\n"


@pytest.mark.parametrize(
    ("kind", "qos", "expected"),
    [
        pytest.param("qos", QosLimits("scav"), ("CANCEL", 20, 60), id="partition under qos"),
        pytest.param(
            "qos",
            QosLimits("scav", preempt_mode="requeue", grace_time=5, preempt_exempt_time=0),
            ("REQUEUE", 5, 0),
            id="the QOS wins under preempt/qos",
        ),
        pytest.param(
            "qos", QosLimits("scav", preempt_mode="cluster"), ("CANCEL", 20, 60), id="cluster"
        ),
        pytest.param("qos", QosLimits("scav", preempt_mode="off"), ("CANCEL", 20, 60), id="off"),
        pytest.param(
            "partition_prio",
            QosLimits("scav", preempt_mode="requeue", grace_time=5),
            ("CANCEL", 20, 60),
            id="the partition under partition_prio",
        ),
    ],
)
def test_which_setting_wins_for_a_job(
    kind: str, qos: QosLimits, expected: tuple[str, int, int]
) -> None:
    c = conf(f"PreemptType=preempt/{kind}\nPreemptMode=REQUEUE\nPreemptExemptTime=1\n{PARTS}")
    rules = preemptrules.Rules(c, assocs(qos))
    own = rules.of(RUNNING)
    assert (own.mode, own.grace, own.exempt) == expected
    assert rules.eligible_time(RUNNING) == RUNNING.start_time + expected[2]


def test_no_policy_without_a_preempt_type_or_any_mode() -> None:
    assert preemptrules.policy(conf("PreemptMode=REQUEUE\n"), None) is None
    assert preemptrules.policy(conf("PreemptType=preempt/qos\n"), None) is None
    only_partition = conf("PreemptType=preempt/partition_prio\n" + PARTS)
    assert preemptrules.policy(only_partition, None) is not None
    within = preemptrules.policy(
        conf("PreemptType=preempt/qos\nPreemptMode=CANCEL\n"),
        assocs(QosLimits("team", preempt_mode="within")),
    )
    assert within is not None and within.within == {"team"} and not within.within_all


def test_sacctmgr_preempt_mode_words() -> None:
    assert preempt_mode("Requeue,Within") == "requeue,within"
    assert preempt_mode("") == "cluster"
    assert preempt_mode("Suspend") == "suspend"
    with pytest.raises(SlurmError, match="PreemptMode=GANG is set in slurm"):
        preempt_mode("gang")
    with pytest.raises(SlurmError, match="Invalid PreemptMode"):
        preempt_mode("kill")


def test_sacctmgr_rows_carry_a_qos_preemption_settings() -> None:
    row = {"Name": "scav", "GraceTime": "00:00:45", "PreemptExemptTime": "00:02:00"}
    qos = QosLimits.from_message(assocrows.qos({**row, "PreemptMode": "requeue"}))
    assert (qos.grace_time, qos.preempt_exempt_time, qos.preempt_mode) == (45, 120, "requeue")
    unset = QosLimits.from_message(assocrows.qos({"Name": "normal", "PreemptMode": "cluster"}))
    assert (unset.grace_time, unset.preempt_exempt_time) == (0, None)
