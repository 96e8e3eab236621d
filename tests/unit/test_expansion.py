"""Slurm's job expansion (issue 18): ``--dependency=expand:N`` admitted as Slurm admits
it, then ``NumNodes=0`` hands the new job's nodes to N in one step, and Slurm's
refusals in its words (``controller/expansion.py``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from controller.core import dependency
from controller.depspec import expanding, resolve
from controller.effects import Resized
from controller.jobstate import JobState, Suspend
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral import errors
from corral.config import parse
from corral.errors import SlurmError
from tests.unit.test_elastic_store import CONF, USER, WHOLE, cycle, effects, update

EXPANSION = "SchedulerParameters=permit_job_expansion\n"
#: An allocation as salloc asks for it: no script.
ALLOCATION = replace(WHOLE, script="", interactive=True, exclusive=True)


def _store(tmp_path: Path, extra: str = EXPANSION) -> JobStore:
    store = JobStore(
        parse(CONF + extra, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s"))
    )
    for name in ("n1", "n2", "n3"):
        store.node_registered(Registration(name, 4, 4000), monotonic=1.0, now=10)
    return store


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return _store(tmp_path)


def _running(store: JobStore, nodes: int = 1, limit: int = 60) -> int:
    job = store.submit(replace(WHOLE, min_nodes=nodes, exclusive=True, time_limit=limit), USER, 100)
    cycle(store, 110)
    assert store.jobs[job.job.job_id].state is JobState.RUNNING
    return job.job.job_id


def test_the_grammar_names_one_plain_job() -> None:
    assert expanding(resolve("expand:12")) == 12
    assert expanding(resolve("afterok:3,expand:12")) == 12
    for bad in ("expand:12:13", "expand:12_1", "expand:12+5", "expand:1,expand:2", "expand"):
        assert not resolve(bad).valid, bad


def test_an_expansion_starts_while_its_job_runs_with_the_time_it_has_left(
    store: JobStore,
) -> None:
    target = _running(store, limit=60)
    new = store.submit(replace(ALLOCATION, dependency=f"expand:{target}"), USER, 120).job
    assert new.time_limit == (store.jobs[target].end_time - 120) // 60 == 59
    cycle(store, 130)
    assert store.jobs[new.job_id].state is JobState.RUNNING
    assert store.jobs[new.job_id].nodes == ("n2",)


def test_numnodes_0_gives_every_node_to_the_job_it_expands(store: JobStore) -> None:
    target = _running(store)
    new = store.submit(replace(ALLOCATION, min_nodes=2, dependency=f"expand:{target}"), USER, 120)
    cycle(store, 130)
    effects(store)
    assert update(store, new.job.job_id, NumNodes="0", now=140) is None
    grown, left = store.jobs[target], store.jobs[new.job.job_id]
    assert (grown.nodes, grown.cpus, grown.resize_time) == (("n1", "n2", "n3"), (4, 4, 4), 140)
    assert (left.state, left.nodes, left.min_nodes) == (JobState.COMPLETED, (), 0)  # Slurm's
    assert store.used("n2") == (4, 0)  # counted once: the job it expands holds it now
    told = [
        (e.old.job_id, e.old.nodes, e.job.nodes) for e in effects(store) if isinstance(e, Resized)
    ]
    assert told == [
        (new.job.job_id, ("n2", "n3"), ()),
        (target, ("n1",), ("n1", "n2", "n3")),
    ]
    store.end_interactive(left, 150, 0, "exited")  # salloc's release afterwards: nothing
    assert store.jobs[new.job.job_id].end_time == 140
    # NumNodes=ALL asks nothing of the controller (scontrol then writes its scripts).
    assert update(store, target, NumNodes="ALL", now=160) is None
    assert store.jobs[target].nodes == ("n1", "n2", "n3")


def _refusal(store: JobStore, dependency: str, uid: int = 1000) -> int:
    spec = replace(ALLOCATION, dependency=dependency)
    with pytest.raises(SlurmError) as refused:
        store.submit(spec, principal_for(uid, uid), 120)
    return refused.value.code


def test_slurms_refusals_at_submission(store: JobStore, tmp_path: Path) -> None:
    target = _running(store)
    waiting = store.submit(replace(WHOLE, min_nodes=3), USER, 115).job.job_id
    assert _refusal(store, f"expand:{target}", uid=2000) == errors.ESLURM_DEPENDENCY  # not his
    assert _refusal(store, f"expand:{waiting}") == errors.ESLURM_DEPENDENCY  # not running
    assert _refusal(store, "expand:999") == errors.ESLURM_DEPENDENCY  # no such job
    other = replace(ALLOCATION, dependency=f"expand:{target}", partitions=("q",))
    with pytest.raises(SlurmError) as refused:
        _store(tmp_path / "q", EXPANSION + "PartitionName=q Nodes=ALL\n").submit(other, USER, 1)
    assert refused.value.code == errors.ESLURM_DEPENDENCY
    plain = _store(tmp_path / "plain", "")
    first = _running(plain)
    assert _refusal(plain, f"expand:{first}") == errors.ESLURM_NOT_SUPPORTED
    assert str(SlurmError(errors.ESLURM_DEPENDENCY)) == "Job dependency problem"


def test_slurms_refusals_of_numnodes_0(store: JobStore) -> None:
    target = _running(store)
    batch = store.submit(replace(WHOLE, dependency=f"expand:{target}"), USER, 120).job.job_id
    cycle(store, 130)
    refused = update(store, batch, NumNodes="0")  # its script is a step, as Slurm's batch step
    assert refused is not None and refused.code == errors.ESLURMD_STEP_EXISTS
    assert refused.message == "Job step already exists"
    new = store.submit(replace(ALLOCATION, dependency=f"expand:{target}"), USER, 140).job.job_id
    cycle(store, 150)
    refused = update(store, new, uid=2000, NumNodes="0")
    assert refused is not None and refused.code == errors.ESLURM_ACCESS_DENIED
    store.post(target, Suspend(160))
    refused = update(store, new, NumNodes="0")
    assert refused is not None and refused.code == errors.ESLURM_JOB_SUSPENDED
    assert store.jobs[new].nodes == ("n3",) and store.jobs[target].nodes == ("n1",)


def test_the_pass_waits_while_the_job_is_pending_and_never_after_it_ended() -> None:
    deps = resolve("expand:5")
    index = dependency.Index({})
    assert dependency.check(deps, 6, "x", 0, index, 0) is dependency.Outcome.NEVER
