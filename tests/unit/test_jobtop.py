"""scontrol top (``controller/jobtop.py``): Slurm's job_set_top over a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller import jobstate, jobtop
from controller.jobspec import from_fields
from controller.journal import Journal
from controller.model import Job
from controller.principal import principal_for
from controller.store import JobStore
from corral import errors
from corral.config import parse

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n1 CPUs=8 RealMemory=16000
PartitionName=p Nodes=ALL Default=YES
PartitionName=q Nodes=ALL
"""
ROOT = principal_for(0, 0)
ALICE = principal_for(4242, 4242)
BOB = principal_for(4343, 4343)


def _store(tmp_path: Path, extra: str = "") -> JobStore:
    conf = parse(CONF + extra, str(tmp_path / "slurm.conf"))
    return JobStore(conf, Journal(str(tmp_path / "state")))


def _submit(store: JobStore, who: object = ALICE, **fields: object) -> Job:
    spec = from_fields({"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp", **fields})
    return store.submit(spec, who, now=100).job  # type: ignore[arg-type]


def _order(store: JobStore) -> list[int]:
    pending = [j for j in store.jobs.values() if j.state is jobstate.JobState.PENDING]
    return [j.job_id for j in sorted(pending, key=lambda j: -store.ranking.of(j))]


@pytest.mark.parametrize(
    ("top", "others", "expected"),
    [
        ([(3, 8)], [(1, 10), (2, 9)], {3: 10, 1: 9, 2: 8}),
        ([(2, 9), (3, 8)], [(1, 10)], {2: 10, 3: 9, 1: 8}),
        ([(1, 10)], [], {}),
        ([(3, 5), (1, 9)], [(2, 7)], {3: 9, 1: 7, 2: 5}),
        ([(3, 1)], [(1, 1), (2, 1)], {3: 3, 1: 2}),
    ],
    ids=[
        "last moves first",
        "two in the order named",
        "already first",
        "named order wins",
        "equal priorities made one apart",
    ],
)
def test_reorder_gives_the_named_jobs_the_highest_priorities(
    top: list[tuple[int, int]], others: list[tuple[int, int]], expected: dict[int, int]
) -> None:
    assert jobtop.reorder(top, others) == expected


def test_an_operator_moves_a_users_job_ahead_of_that_users_others_only(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first, second, third = (_submit(store) for _ in range(3))
    bob = _submit(store, BOB)
    assert _order(store) == [first.job_id, second.job_id, third.job_id, bob.job_id]
    assert jobtop.top(store, [(str(third.job_id), [third])], ROOT) is None
    assert _order(store) == [third.job_id, first.job_id, second.job_id, bob.job_id]
    moved = store.jobs[third.job_id]
    assert moved.nice == third.nice - 2  # through nice, which outlives a recalculation
    assert store.ranking.of(moved) == store.ranking.of(third) + 2
    assert store.jobs[bob.job_id] == bob


def test_a_user_moves_only_their_own_jobs_and_only_where_the_site_allows(tmp_path: Path) -> None:
    store = _store(tmp_path)
    job, other = _submit(store), _submit(store)
    refused = jobtop.top(store, [(str(other.job_id), [other])], ALICE)
    assert refused is not None and refused.code == errors.ESLURM_ACCESS_DENIED
    allowed = _store(tmp_path / "top", "SchedulerParameters=enable_user_top\n")
    job, other = _submit(allowed), _submit(allowed)
    bobs = _submit(allowed, BOB)
    refused = jobtop.top(allowed, [(str(bobs.job_id), [bobs])], ALICE)
    assert refused is not None and refused.code == errors.ESLURM_ACCESS_DENIED
    assert jobtop.top(allowed, [(str(other.job_id), [other])], ALICE) is None
    assert _order(allowed)[:2] == [other.job_id, job.job_id]


def test_jobs_that_cannot_move_are_refused_and_the_others_still_move(tmp_path: Path) -> None:
    store = _store(tmp_path)
    first, second, third = (_submit(store) for _ in range(3))
    held = store.post(second.job_id, jobstate.Hold(admin=True))
    elsewhere = _submit(store, partitions=["q"])
    for job, code in (
        (held, errors.ESLURM_JOB_HELD),
        (elsewhere, errors.EINVAL),
    ):
        refused = jobtop.top(store, [(str(third.job_id), [third]), (str(job.job_id), [job])], ROOT)
        assert refused is not None and refused.code == code
    assert _order(store)[:2] == [third.job_id, first.job_id]
    missing = jobtop.top(store, [("99", [])], ROOT)
    assert missing is not None and missing.code == errors.ESLURM_INVALID_JOB_ID
