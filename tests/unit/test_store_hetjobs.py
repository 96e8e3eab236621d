"""A heterogeneous job in the store: every component checked before any is recorded,
consecutive ids, started whole by a pass, ended with its leader, kept over a restart;
queries select ``J`` (every component) and ``J+N`` (one)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_store_arrays import ROOT, SPEC, _store, ready  # two 2-CPU nodes, ids from 100

from controller import hetjobs, hetsteps, mpmdsteps, queries
from controller.core import schedule
from controller.effects import Effect, Signal
from controller.hetsteps import StepPart
from controller.jobcontrol import JobControl
from controller.jobspec import from_fields
from controller.jobstate import COMPLETING, Cancel, JobState
from controller.principal import principal_for
from controller.steps import StepRequest, step_environment
from controller.store import JobStore
from corral.errors import (
    ESLURM_ACCESS_DENIED,
    ESLURM_INVALID_JOB_ID,
    ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
    SlurmError,
)
from corral.wire import corral_pb2 as pb


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return ready(tmp_path)


def _submit(store: JobStore, *extra: dict[str, object]) -> list[int]:
    specs = [from_fields(SPEC), *(from_fields({**SPEC, **more}) for more in extra)]
    return [a.job.job_id for a in store.submit_het(specs, ROOT, now=100)]


def test_a_component_no_partition_can_hold_leaves_nothing(store: JobStore) -> None:
    with pytest.raises(SlurmError) as refused:
        _submit(store, {"min_nodes": 3})
    assert refused.value.code == ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
    assert store.jobs == {} and store.next_job_id == 100


def test_components_start_whole_and_end_with_the_leader(store: JobStore) -> None:
    assert _submit(store, {"num_tasks": 2}) == [100, 101]
    leader, other = store.jobs[100], store.jobs[101]
    assert (other.het_job_id, other.het_job_offset, other.het_job_id_set) == (100, 1, "100-101")
    assert other.interactive and not leader.interactive
    payload = store.payload(other)
    assert payload is not None and payload.script == ""  # the leader's alone runs
    started = store.commit(schedule(store.snapshot(), 110))
    assert sorted(j.job_id for j in started) == [100, 101]
    store.post(100, Cancel(120, 0))
    hetjobs.end_with_leader(store, store.jobs[100], 120, 0)
    ended = store.jobs[101]  # told to end: its nodes kill what runs there
    assert ended.state.finished or COMPLETING in ended.flags


def test_a_pending_group_is_cancelled_whole_and_survives_a_restart(
    store: JobStore, tmp_path: Path
) -> None:
    _submit(store, {"hold": True})
    asyncio.run(store.flush())
    store.journal.close()
    again = _store(tmp_path)
    assert [j.display_id for j in again.jobs.values()] == ["100+0", "100+1"]
    assert again.next_job_id == 102
    assert [j.job_id for j in queries.select(again.jobs, {"job_ids": ["100"]})] == [100, 101]
    assert [j.job_id for j in queries.select(again.jobs, {"job_ids": ["100+1"]})] == [101]
    again.post(100, Cancel(120, 0))
    hetjobs.end_with_leader(again, again.jobs[100], 120, 0)
    assert again.jobs[101].state is JobState.CANCELLED


def _part(job_id: int, ntasks: int = 1) -> StepPart:
    return StepPart(job_id, StepRequest(ntasks=ntasks), "prog", -1, "srun prog : prog")


def test_a_step_spanning_components_has_one_id_in_each(store: JobStore) -> None:
    _submit(store, {"num_tasks": 2})
    store.commit(schedule(store.snapshot(), 110))
    store.create_step(
        101, StepRequest(ntasks=1, overlap=True), "alone", -1, "srun --het-group=1", ROOT
    )
    made = store.create_het_step([_part(100), _part(101, 2)], ROOT)
    # The highest next id of the components: 101 had a step 0 of its own.
    assert [(job.job_id, step.step_id, step.ntasks) for job, step in made] == [
        (100, 1, 1),
        (101, 1, 2),
    ]
    assert [s.step_id for s in store.jobs[100].steps] == [1]
    # A later step of 100 alone goes past the id its part took.
    _, after = store.create_step(100, StepRequest(ntasks=1, overlap=True), "next", -1, "srun", ROOT)
    assert after.step_id == 2
    parts = hetsteps.parts(made, [step_environment(job, step, {}) for job, step in made])
    assert [(p.node_offset, p.task_offset, p.ntasks) for p in parts] == [(0, 0, 3), (1, 1, 3)]
    shared = parts[0].environment
    # As a real 22.05's het step: the leader's id, the whole step's counts, each part's own.
    assert (shared["SLURM_JOB_ID"], shared["SLURM_NTASKS"], shared["SLURM_HET_SIZE"]) == (
        "100",
        "3",
        "2",
    )
    assert shared["SLURM_JOB_ID_HET_GROUP_1"] == shared["SLURM_JOBID_PACK_GROUP_1"] == "101"
    assert shared["SLURM_NTASKS_HET_GROUP_1"] == "2" and shared["SLURM_TASKS_PER_NODE"] == "1(x3)"
    assert "SLURM_STEP_ID_HET_GROUP_0" not in shared
    # srun's own heterogeneous job (srun a : b outside a job): four names, 22.05's old ones.
    envs = [step_environment(job, step, {}) for job, step in made]
    own = hetsteps.parts(made, envs, own=True)[0].environment
    assert own["SLURM_JOB_ID_PACK_GROUP_1"] == "101" and own["SLURM_HET_SIZE"] == "2"
    assert not {"SLURM_JOB_ID_HET_GROUP_1", "SLURM_NTASKS_PACK_GROUP_1"} & set(own)


def _signals(store: JobStore, text: str, signal: int = 0) -> list[tuple[int, int, int | None]]:
    """The step signals ``scancel [-s signal] text`` sends, as (job, signal, step)."""
    req = pb.SignalRequest(filter=pb.JobFilter(job_ids=[text]), signal=signal)
    assert [r.code for r in JobControl(store).signal(req, ROOT, 130).results] == [0]
    sent: list[Effect] = []
    store.dispatch_to(sent.extend)
    asyncio.run(store.flush())
    return [(e.job.job_id, e.signal, e.step_id) for e in sent if isinstance(e, Signal)]


def test_a_cancel_of_the_leaders_part_reaches_every_part_as_in_slurm_22_05(
    store: JobStore, tmp_path: Path
) -> None:
    _submit(store, {"num_tasks": 2})
    store.commit(schedule(store.snapshot(), 110))
    store.create_step(100, StepRequest(ntasks=1, overlap=True), "own", -1, "srun", ROOT)
    store.create_step(101, StepRequest(ntasks=1, overlap=True), "own", -1, "srun", ROOT)
    (leader, lead_part), (other, later_part) = store.create_het_step([_part(100), _part(101)], ROOT)
    assert lead_part.het_jobs == later_part.het_jobs == (100, 101)
    assert (lead_part.het_offset, later_part.het_offset) == ((0, 0), (1, 1))
    asyncio.run(store.flush())
    store.journal.close()
    store = _store(tmp_path)  # what a cancel needs is kept over a restart
    assert store.jobs[101].steps[-1] == later_part
    # Measured on a real 22.05 (srun stopped, so that it could not end the rest):
    # scancel 100.1 ends both parts, 101.1 its own alone; a signal, SIGKILL given
    # with -s included, reaches only the part named; a step of one component is its own.
    assert _signals(store, "100.1") == [(100, 9, 1), (101, 9, 1)]
    assert _signals(store, "101.1") == [(101, 9, 1)]
    assert _signals(store, "100.1", 9) == [(100, 9, 1)]
    assert _signals(store, "100.1", 10) == [(100, 10, 1)]
    assert _signals(store, "100.0") == [(100, 9, 0)]
    assert hetsteps.cancelled_with(store.jobs, other, later_part) == []
    assert [j.job_id for j in hetsteps.cancelled_with(store.jobs, leader, lead_part)] == [101]


def test_a_spanning_step_is_all_or_nothing_and_only_its_owners(store: JobStore) -> None:
    _submit(store, {"num_tasks": 2})
    store.commit(schedule(store.snapshot(), 110))
    with pytest.raises(SlurmError):  # 3 tasks on 101's 2 CPUs: neither part recorded
        store.create_het_step([_part(100), _part(101, 3)], ROOT)
    assert store.jobs[100].steps == () and store.jobs[101].steps == ()
    with pytest.raises(SlurmError) as refused:
        store.create_het_step([_part(100), _part(101)], principal_for(4242, 4242))
    assert refused.value.code == ESLURM_ACCESS_DENIED
    with pytest.raises(SlurmError) as refused:  # the same component twice is not a het step
        store.create_het_step([_part(100), _part(100)], ROOT)
    assert refused.value.code == ESLURM_INVALID_JOB_ID


def test_each_cycle_ends_the_components_of_an_ended_leader_also_after_a_restart(
    store: JobStore, tmp_path: Path
) -> None:
    """``orphans`` (the loop's) looks only at the heterogeneous leaders the store
    keeps, from submission or, after a restart, from the journal's jobs."""
    _submit(store, {"hold": True})
    assert hetjobs.orphans(store, 110) == []  # the leader has not ended
    asyncio.run(store.flush())
    store.journal.close()
    again = _store(tmp_path)
    assert again.het_leaders == {100}
    again.post(100, Cancel(120, 0))
    assert [j.job_id for j in hetjobs.orphans(again, 120)] == [100]
    assert again.jobs[101].state is JobState.CANCELLED
    assert hetjobs.orphans(again, 121) == []  # nothing left to end


def test_colon_parts_in_an_ordinary_job_are_one_step_on_their_own_nodes(store: JobStore) -> None:
    (job_id,) = [a.job.job_id for a in store.submit_het([from_fields({**SPEC, "min_nodes": 2,
                 "num_tasks": 4})], ROOT, now=100)]  # fmt: skip
    store.commit(schedule(store.snapshot(), 110))
    first, second = store.jobs[job_id].nodes

    def part(node: str, ntasks: int) -> StepPart:
        return StepPart(job_id, StepRequest(ntasks=ntasks, nodelist=(node,)), "p", -1, "srun")

    with pytest.raises(SlurmError) as refused:  # two parts on one node: srun never asks it
        store.create_mpmd_step([part(first, 1), part(first, 1)], ROOT)
    assert refused.value.code == ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
    assert store.jobs[job_id].steps == ()
    with pytest.raises(SlurmError) as refused:  # only the job's owner (or an admin)
        store.create_mpmd_step([part(first, 1), part(second, 2)], principal_for(4242, 4242))
    assert refused.value.code == ESLURM_ACCESS_DENIED
    job, whole, made = store.create_mpmd_step([part(first, 1), part(second, 2)], ROOT)
    # One step as srun sees it: the parts' nodes in order, task ids across them ...
    assert (whole.step_id, whole.nodes, whole.tasks) == (0, (first, second), (1, 2))
    assert whole.ids == ((0,), (1, 2)) and job.steps == tuple(made)
    # ... recorded as Slurm records it: a step 0+N per part, on its own nodes.
    assert [(s.step_id, s.het_comp, s.nodes, s.tasks) for s in made] == [
        (0, 0, (first,), (1,)), (0, 1, (second,), (2,))
    ]  # fmt: skip
    store.step_node_done(job_id, 0, second, [0, 0])  # a part ends alone, the other runs
    assert [s.state for s in store.jobs[job_id].steps] == ["RUNNING", "COMPLETED"]
    launches = mpmdsteps.parts(whole, made, step_environment(job, whole, {}))
    assert [(p.node_offset, p.task_offset, p.ntasks) for _, p in launches] == [(0, 0, 3), (1, 1, 3)]
    shared = launches[1][1].environment
    assert (shared["SLURM_NTASKS"], shared["SLURM_STEP_NODELIST"]) == ("3", "n[1-2]")
    assert "SLURM_HET_SIZE" not in shared and {s.step_id for s, _ in launches} == {0}
