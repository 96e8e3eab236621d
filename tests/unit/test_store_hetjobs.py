"""A heterogeneous job in the store: every component checked before any is recorded,
consecutive ids, started whole by a pass, ended with its leader, kept over a restart;
queries select ``J`` (every component) and ``J+N`` (one)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_store_arrays import ROOT, SPEC, _store, ready  # two 2-CPU nodes, ids from 100

from controller import hetjobs, queries
from controller.core import schedule
from controller.jobspec import from_fields
from controller.jobstate import COMPLETING, Cancel, JobState
from controller.store import JobStore
from corral.errors import ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, SlurmError


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
