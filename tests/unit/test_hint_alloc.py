"""``--hint`` and ``--threads-per-core`` beyond sbatch (issue 19, point 2): salloc's and
srun's new job asks what sbatch's asks (``cli/allocation.py``), memory_bound's one core
a socket (ReqB:S:C:T's C), and an elastic job keeps using one thread of each core as it
grows and gives nodes back (``core/threads.joined``). Measured on Slurm 22.05 (slurmctld
and two ``slurmd -N`` of Sockets=2 CoresPerSocket=2 ThreadsPerCore=2): ``salloc -n2
--hint=nomultithread`` and ``srun -n2 --hint=nomultithread`` hold CPU_IDs=0-1,4-5 and
show ReqB:S:C:T=0:0:*:1 (memory_bound: 0:0:1:1); salloc's command sees SLURM_HINT and
SLURM_THREADS_PER_CORE=1, srun's tasks SLURM_THREADS_PER_CORE=1 alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cli import allocation
from cli.halt import Halt
from controller import elastic, framed
from controller.core import threads
from controller.jobspec import from_fields
from controller.jobstate import Finish, JobState
from controller.journal import Journal
from controller.store import JobStore, Registration
from corral import errors
from corral.config import parse
from corral.errors import SlurmError
from tests.unit.test_elastic_store import USER, cycle, update


@pytest.mark.parametrize("prog", ["salloc", "srun"])
@pytest.mark.parametrize(
    ("options", "fields", "told"),
    [
        (
            {"hint": "nomultithread"},
            {"threads_per_core": 1},
            {"SLURM_HINT": "nomultithread", "SLURM_THREADS_PER_CORE": "1"},
        ),
        (
            {"hint": "memory_bound"},
            {"threads_per_core": 1, "cores_per_socket": 1},
            {"SLURM_HINT": "memory_bound", "SLURM_THREADS_PER_CORE": "1"},
        ),
        ({"hint": "multithread"}, {}, {"SLURM_HINT": "multithread"}),
        ({"threads-per-core": "2"}, {"threads_per_core": 2}, {"SLURM_THREADS_PER_CORE": "2"}),
        (  # the hint dropped: no memory_bound core count, no SLURM_HINT
            {"hint": "memory_bound", "threads-per-core": "1"},
            {"threads_per_core": 1},
            {"SLURM_THREADS_PER_CORE": "1"},
        ),
    ],
    ids=["nomultithread", "memory-bound", "multithread", "threads-per-core", "dropped"],
)
def test_a_new_allocation_asks_what_sbatch_asks(
    prog: str, options: dict[str, str | None], fields: dict[str, int], told: dict[str, str]
) -> None:
    spec = allocation._spec(prog, {"ntasks": "2", **options}, "true", [])
    assert spec["interactive"]
    asked = {k: spec[k] for k in ("threads_per_core", "cores_per_socket") if k in spec}
    assert asked == fields
    assert allocation.hint_environment(options) == told


def test_a_new_allocation_refuses_as_sbatch_does_in_its_own_name() -> None:
    with pytest.raises(Halt) as caught:
        allocation._spec("salloc", {"hint": "bogus"}, "true", [])
    assert caught.value.lines == (
        'salloc: error: unrecognized --hint argument "bogus", see --hint=help',
    )
    with pytest.raises(Halt) as caught:
        allocation._spec("srun", {"threads-per-core": "0"}, "true", [])
    assert caught.value.lines == ('srun: error: Invalid numeric value "0" for --threads-per-core.',)


HALF = ((4,), (2,))  # a node of 4 CPUs held, 2 of them used
#: (parts joined, the usable CPUs recorded)
JOINED = [
    ([HALF, ((4, 4), (2, 2))], (2, 2, 2)),
    ([HALF, ((4,), ())], (2, 4)),  # a part using all it holds
    ([((4, 4), ()), ((4,), ())], ()),  # all usable: nothing recorded
    ([((4, 4), (2, 2))], (2, 2)),
]


@pytest.mark.parametrize(("parts", "used"), JOINED)
def test_joined_allocations_keep_each_nodes_usable_count(
    parts: list[tuple[tuple[int, ...], tuple[int, ...]]], used: tuple[int, ...]
) -> None:
    assert threads.joined(parts) == used


CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-3] Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=4000
PartitionName=p Nodes=ALL Default=YES
"""


def test_an_elastic_nomultithread_job_uses_a_thread_a_core_as_it_grows_and_shrinks(
    tmp_path: Path,
) -> None:
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))
    for name in ("n1", "n2", "n3"):
        store.node_registered(Registration(name, 4, 4000), monotonic=1.0, now=10)
    base = {"script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp", "exclusive": True}
    blocker = store.submit(
        from_fields({**base, "name": "w", "req_nodes": "n2,n3", "min_nodes": 2}), USER, 100
    )
    cycle(store, 110)
    spec = {**base, "name": "e", "min_nodes": 1, "max_nodes": 3, "elastic_signal": 28}
    job_id = store.submit(from_fields({**spec, "threads_per_core": 1}), USER, 120).job.job_id
    cycle(store, 130)
    job = store.jobs[job_id]
    assert (job.nodes, job.cpus, job.usable_cpus) == (("n1",), (4,), (2,))
    store.post(blocker.job.job_id, Finish(140, 0, "done"))
    assert [j.job_id for j in cycle(store, 141)] == [job_id]
    job = store.jobs[job_id]
    assert job.state is JobState.RUNNING
    assert (job.nodes, job.cpus, job.usable_cpus) == (("n1", "n2", "n3"), (4, 4, 4), (2, 2, 2))
    assert update(store, job_id, NumNodes="2") is None
    job = store.jobs[job_id]
    assert (job.nodes, job.cpus, job.usable_cpus) == (("n1", "n2"), (4, 4), (2, 2))
    updated = replace(job, nodes=("n1",), cpus=(4,), cpus_used=())  # an update made meanwhile
    assert elastic.with_allocation(updated, job).usable_cpus == (2, 2)


@pytest.mark.parametrize(("wanted", "refused"), [(2, False), (3, True), (5, True)])
def test_more_threads_of_a_core_than_any_node_has_is_refused_as_slurm_refuses_it(
    tmp_path: Path, wanted: int, refused: bool
) -> None:
    """Slurm 22.05, nodes of 2 threads a core: ``sbatch -n2 --threads-per-core=3``
    prints ``error: Socket, core and/or thread specification can not be satisfied``,
    then ``error: Batch job submission failed: Requested node configuration is not
    available``; the first line is the controller's, carried in the reply's detail."""
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))
    spec = from_fields({"script": "#!/bin/sh\n", "work_dir": "/tmp", "threads_per_core": wanted})
    if not refused:
        assert store.submit(spec, USER, 100).job.threads_per_core == wanted
        return
    with pytest.raises(SlurmError) as caught:
        store.submit(spec, USER, 100)
    assert caught.value.code == errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
    assert caught.value.detail == "Socket, core and/or thread specification can not be satisfied"
    frame = framed._error(caught.value)
    assert (frame.error, frame.detail) == (
        "Requested node configuration is not available",
        caught.value.detail,
    )
