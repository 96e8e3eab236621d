"""Issue 17, point 3: the gang scheduler's shadows, and where it and SUSPEND
preemption meet. Running jobs of a higher PriorityTier partition (and, under
preempt/qos, of a QOS that may preempt theirs) keep a time-sliced partition's
jobs off their CPUs: those jobs stay suspended while the shadow lasts, the
others go on taking turns, and when it goes the shadowed jobs take turns
again. A preemption's victim in such a partition goes back to the turns, and
a job waiting for its turn may itself be a victim."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from controller import gang, preemption, preemptresume
from controller.associations import AssocSet, QosLimits
from controller.core import schedule
from controller.effects import Continue, Effect, Stop
from controller.jobstate import (
    COMPLETING,
    GANG,
    REQUEUED,
    Cancel,
    Finish,
    JobState,
    Start,
    Suspend,
)
from controller.journal import Journal
from controller.model import Job
from controller.store import JobStore, Registration
from corral.config import parse
from tests.unit.scenario import running
from tests.unit.test_preempt_suspend import submit

CONF = """\
ClusterName=test
SlurmctldHost=ctl
PreemptType=preempt/{kind}
PreemptMode=SUSPEND,GANG
SchedulerTimeSlice=2
NodeName=n1 CPUs={cpus} RealMemory=1000
PartitionName=shared Nodes=ALL OverSubscribe=FORCE:2 {shared}
PartitionName=high Nodes=ALL PriorityTier=2
PartitionName=fast Nodes=ALL PriorityTier=2 OverSubscribe=FORCE:2
PartitionName=other Nodes=ALL OverSubscribe=FORCE:2
PartitionName=top Nodes=ALL PriorityTier=3
"""


def make(
    tmp_path: Path, cpus: int = 2, kind: str = "partition_prio", shared: str = ""
) -> tuple[JobStore, list[Effect]]:
    conf = parse(CONF.format(cpus=cpus, kind=kind, shared=shared), str(tmp_path / "slurm.conf"))
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    store.load(0.0)
    store.node_registered(Registration("n1", cpus, 1000), monotonic=1.0, now=10)
    sent: list[Effect] = []
    store.dispatch_to(sent.extend)
    return store, sent


def start(store: JobStore, partition: str, now: int, ids: tuple[int, ...], qos: str = "") -> int:
    """A job of ``partition`` (and ``qos``) started at ``now`` on CPU ``ids`` of n1."""
    job_id = submit(store, partition, now - 1, num_tasks=len(ids))
    if qos:
        store.update(replace(store.jobs[job_id], qos=qos))
    store.post(job_id, Start(now, partition, ("n1",), (len(ids),), (100,), 1, cpu_ids=(ids,)))
    return job_id


def states(store: JobStore, *jobs: int) -> tuple[str, ...]:
    return tuple(store.jobs[j].state.name for j in jobs)


def end(store: JobStore, job_id: int, now: int) -> None:
    store.post(job_id, Cancel(now))
    store.post(job_id, Finish(now, 9, "cancelled"))


# ---------------------------------------------------------------- the pure rule


def _job(job_id: int, ids: tuple[int, ...], qos: str = "", suspended: bool = False) -> Job:
    return running(
        job_id,
        partition="shared",
        qos=qos,
        cpus=(len(ids),),
        cpu_ids=(ids,),
        state=JobState.SUSPENDED if suspended else JobState.RUNNING,
        start_time=100 + job_id,
        suspend_time=100 + job_id if suspended else 0,
        suspended_by=GANG if suspended else 0,
    )


@pytest.mark.parametrize(
    ("shadow", "expected"),
    [
        pytest.param(None, {1, 3}, id="no shadow: the runners stay"),
        pytest.param(gang.Shadow(_job(9, (0,))), {3}, id="over CPU 0: its job waits"),
        pytest.param(gang.Shadow(_job(9, (0, 1))), set(), id="over all: none runs"),
        pytest.param(
            gang.Shadow(replace(_job(9, (0,)), cpu_ids=())), {1}, id="counted: one CPU left"
        ),
        pytest.param(
            gang.Shadow(_job(9, (0, 1)), frozenset({"normal"})),
            {3},
            id="a QOS's: over its jobs alone",
        ),
    ],
)
def test_a_shadow_seeds_the_active_set(shadow: gang.Shadow | None, expected: set[int]) -> None:
    jobs = [_job(1, (0,), "normal"), _job(2, (1,), "normal", suspended=True), _job(3, (1,), "low")]
    assert gang.active(jobs, {"n1": 2}, False, [shadow] if shadow else []) == expected


# ---------------------------------------------------------------- shadows in the store


def test_issue17_a_preempted_jobs_peer_stays_under_its_preemptors_shadow(tmp_path: Path) -> None:
    store, sent = make(tmp_path)
    a = start(store, "shared", 110, (0, 1))
    b = start(store, "shared", 111, (0, 1))
    gang.run(store, 111, rotate=False)  # b waits its turn
    assert states(store, a, b) == ("RUNNING", "SUSPENDED")
    # A job of the higher tier takes a's CPUs: a is suspended for it, lending them.
    high = submit(store, "high", 112, num_tasks=2)
    store.post(a, Suspend(113, by=high))
    store.post(high, Start(113, "high", ("n1",), (2,), (100,), 1, cpu_ids=((0, 1),)))
    for now, rotate in ((114, False), (115, True), (117, True)):
        gang.run(store, now, rotate)
        assert states(store, a, b, high) == ("SUSPENDED", "SUSPENDED", "RUNNING"), now
    assert store.jobs[b].suspended_by == GANG
    asyncio.run(store.flush())
    assert not [e for e in sent if isinstance(e, Continue)]
    # It ends: a goes back to the partition's turns, and they take turns again.
    end(store, high, 118)
    (back,) = preemptresume.due(store, store.snapshot(), 118)
    assert back.job_id == a and (back.suspended_by, back.cpus_released) == (GANG, False)
    gang.run(store, 118, rotate=False)
    assert states(store, a, b) == ("SUSPENDED", "RUNNING")  # b has waited longest
    gang.run(store, 120, rotate=True)
    assert states(store, a, b) == ("RUNNING", "SUSPENDED")


def test_a_higher_tiers_job_on_shared_cpus_suspends_the_jobs_under_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = make(tmp_path)
    low = submit(store, "shared", 100, num_tasks=2)
    store.commit(schedule(store.snapshot(), 101))
    # A job of a higher tier that shares CPUs too starts on them without preempting.
    fast = submit(store, "fast", 102, num_tasks=2)
    plan = schedule(store.snapshot(), 103)
    assert [s.job_id for s in plan.starts] == [fast] and not plan.preempted
    store.commit(plan)
    assert states(store, low, fast) == ("RUNNING", "RUNNING")
    with caplog.at_level(logging.INFO, logger="corral.controller"):
        assert gang.run(store, 103, rotate=False) == 1
    assert states(store, low, fast) == ("SUSPENDED", "RUNNING")
    assert f"job_id={low} suspended: under the shadow of job_id={fast}" in caplog.text
    gang.run(store, 105, rotate=True)
    assert states(store, low, fast) == ("SUSPENDED", "RUNNING")
    end(store, fast, 106)
    gang.run(store, 106, rotate=False)  # the shadow is gone: no slice needed
    assert states(store, low) == ("RUNNING",)


def test_turns_go_round_the_cpus_no_shadow_covers(tmp_path: Path) -> None:
    store, _ = make(tmp_path, cpus=4)
    under = [start(store, "shared", 110, (0, 1)), start(store, "shared", 111, (0, 1))]
    free = [start(store, "shared", 110, (2, 3)), start(store, "shared", 111, (2, 3))]
    gang.run(store, 111, rotate=False)
    high = start(store, "fast", 112, (0, 1))
    seen = set()
    for now in range(113, 121, 2):
        gang.run(store, now, rotate=True)
        assert states(store, *under) == ("SUSPENDED", "SUSPENDED"), now
        seen.add(states(store, *free))
    assert seen == {("RUNNING", "SUSPENDED"), ("SUSPENDED", "RUNNING")}
    end(store, high, 121)
    seen = set()
    for now in range(121, 127, 2):
        gang.run(store, now, rotate=True)
        seen.add(states(store, *under))
    assert seen == {("RUNNING", "SUSPENDED"), ("SUSPENDED", "RUNNING")}


def test_shadows_fall_from_the_running_jobs_of_higher_tiers_only(tmp_path: Path) -> None:
    store, _ = make(tmp_path, cpus=4)
    # Started first, so the lowest tier is met first unless tiers order the turns.
    low = start(store, "shared", 110, (1,))
    mid = start(store, "fast", 111, (0, 1))
    top = start(store, "top", 112, (0,))
    # A partition of the same tier casts none: slicing is per partition.
    mine = start(store, "shared", 113, (2, 3))
    theirs = start(store, "other", 113, (2, 3))
    gang.run(store, 113, rotate=False)
    # top's shadow suspends mid, whose shadow then no longer covers low's CPU.
    assert states(store, low, mid, top) == ("RUNNING", "SUSPENDED", "RUNNING")
    assert states(store, mine, theirs) == ("RUNNING", "RUNNING")


# ---------------------------------------------------------------- preempt/qos

QOS = AssocSet(
    qos={
        "urgent": QosLimits("urgent", preempt=frozenset({"normal"})),
        "normal": QosLimits("normal"),
        "other": QosLimits("other"),
    }
)


def test_under_preempt_qos_a_job_shadows_those_its_qos_may_preempt(tmp_path: Path) -> None:
    store, _ = make(tmp_path, cpus=4, kind="qos")
    store.set_associations(QOS)
    normal = start(store, "shared", 110, (0, 1), qos="normal")
    spared = start(store, "shared", 110, (2, 3), qos="other")
    urgent = start(store, "other", 111, (0, 1, 2, 3), qos="urgent")
    gang.run(store, 111, rotate=False)
    assert states(store, normal, spared, urgent) == ("SUSPENDED", "RUNNING", "RUNNING")
    # In its own partition it takes turns with them instead.
    end(store, urgent, 112)
    gang.run(store, 112, rotate=False)
    peer = start(store, "shared", 113, (0, 1), qos="urgent")
    gang.run(store, 113, rotate=False)
    assert states(store, normal, peer) == ("RUNNING", "SUSPENDED")
    gang.run(store, 115, rotate=True)
    assert states(store, normal, peer) == ("SUSPENDED", "RUNNING")


# ---------------------------------------------------------------- victims and turns


def test_a_victim_goes_back_to_its_partitions_turns_not_onto_a_peers_cpus(
    tmp_path: Path,
) -> None:
    store, sent = make(tmp_path)
    a = start(store, "shared", 110, (0, 1))
    b = start(store, "shared", 111, (0, 1))
    gang.run(store, 111, rotate=False)
    # A job of the partition (a preempting QOS) took a's turn; it ends while b runs.
    x = submit(store, "shared", 112, num_tasks=2)
    store.post(a, Suspend(112, by=x))
    store.post(x, Start(112, "shared", ("n1",), (2,), (100,), 1, cpu_ids=((0, 1),)))
    gang.run(store, 113, rotate=True)
    assert states(store, a, b, x) == ("SUSPENDED", "RUNNING", "SUSPENDED")
    end(store, x, 114)
    asyncio.run(store.flush())
    sent.clear()
    (back,) = preemptresume.due(store, store.snapshot(), 114)
    assert states(store, a, b) == ("SUSPENDED", "RUNNING")  # not both on CPUs 0-1
    assert (back.suspended_by, back.cpus_released) == (GANG, False)
    gang.run(store, 114, rotate=False)
    assert states(store, a, b) == ("SUSPENDED", "RUNNING")
    gang.run(store, 116, rotate=True)
    assert states(store, a, b) == ("RUNNING", "SUSPENDED")
    asyncio.run(store.flush())
    assert [(type(e), e.job.job_id) for e in sent if isinstance(e, Stop | Continue)] == [
        (Stop, b),
        (Continue, a),
    ]


@pytest.mark.parametrize(
    ("shared", "expected"),
    [
        pytest.param("", "suspended", id="SUSPEND: both lend their CPUs"),
        pytest.param("PreemptMode=REQUEUE GraceTime=30", "requeued", id="REQUEUE"),
    ],
)
def test_a_job_waiting_for_its_turn_is_a_victim_too(
    tmp_path: Path, shared: str, expected: str
) -> None:
    store, _ = make(tmp_path, shared=shared)
    a = submit(store, "shared", 100, num_tasks=2)
    b = submit(store, "shared", 100, num_tasks=2)
    store.commit(schedule(store.snapshot(), 101))
    gang.run(store, 101, rotate=False)
    assert states(store, a, b) == ("RUNNING", "SUSPENDED")
    high = submit(store, "high", 102, num_tasks=2, mem_per_node=100)
    plan = schedule(store.snapshot(), 103)
    assert dict(plan.preempted) == {a: high, b: high}
    preemption.begin(store, plan)
    if expected == "suspended":
        for job in (a, b):
            assert store.jobs[job].suspended_by == high and store.jobs[job].cpus_released
        store.commit(plan := schedule(store.snapshot(), 104))
        assert [s.job_id for s in plan.starts] == [high]
        gang.run(store, 104, rotate=True)
        assert states(store, a, b, high) == ("SUSPENDED", "SUSPENDED", "RUNNING")
        end(store, high, 105)
        assert len(preemptresume.due(store, store.snapshot(), 105)) == 2
        gang.run(store, 105, rotate=False)
        assert sorted(states(store, a, b)) == ["RUNNING", "SUSPENDED"]
        return
    # The frozen one is requeued at once: a GraceTime would do nothing for it.
    waiting, warned = store.jobs[b], store.jobs[a]
    assert waiting.state is JobState.RUNNING and COMPLETING in waiting.flags
    assert warned.preempt_time == 103 and warned.end_time == 133


@pytest.mark.parametrize(
    ("shared", "state", "flags"),
    [
        pytest.param("PreemptMode=REQUEUE", "RUNNING", {COMPLETING, REQUEUED}, id="requeued"),
        pytest.param("PreemptMode=CANCEL", "PREEMPTED", {COMPLETING}, id="cancelled"),
        pytest.param("PreemptMode=OFF", "SUSPENDED", set(), id="never preempted: suspended"),
    ],
)
def test_a_running_job_a_shadow_covers_is_preempted_by_its_own_mode(
    tmp_path: Path, shared: str, state: str, flags: set[str]
) -> None:
    store, _ = make(tmp_path, shared=shared)
    a = start(store, "shared", 110, (0, 1))
    b = start(store, "shared", 111, (0, 1))
    gang.run(store, 111, rotate=False)
    fast = start(store, "fast", 112, (0, 1))
    gang.run(store, 112, rotate=False)
    caught = store.jobs[a]
    assert (caught.state.name, caught.flags) == (state, flags)
    assert states(store, b, fast) == ("SUSPENDED", "RUNNING")  # it was not running
    if flags:
        assert caught.preempted_by == fast and caught.system_comment.startswith(
            f"Preempted ({'requeue' if REQUEUED in flags else 'cancel'}) for job {fast} at "
        )
        assert "under its shadow: PriorityTier 2 over 1 of partition shared" in (
            caught.system_comment
        )
