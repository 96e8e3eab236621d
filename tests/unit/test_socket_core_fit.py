"""Jobs asking sockets per node and cores per socket (``--cores-per-socket``, ``-B``)
in the controller: refused at submission when no node has them, placed on sockets
with that many free cores, CPU ids as cons_tres picks them (controller/admission.py
``_check_shape``, core/request.py ``socket_room``, core/cpupick.py ``socket_room``).

Measured on Slurm 22.05: slurmctld and two ``slurmd -N`` of Sockets=2 CoresPerSocket=4
ThreadsPerCore=1 (SelectType=select/cons_tres, CR_Core), ``sbatch -w n1 OPTIONS`` one
job at a time, ``scontrol show job -d``'s CPU_IDs; the busy rows after ``sbatch -w n1
-n6`` (CPU_IDs=0-2,4-6), ``-n5`` (0-2,4-5) or ``-n7`` (0-6) kept running."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.jobs import record
from controller import views
from controller.jobspec import from_fields
from controller.journal import Journal
from controller.store import JobStore, Registration
from corral import errors
from corral.config import parse
from corral.errors import SlurmError
from corral.wire import codec
from tests.unit.test_elastic_store import USER, cycle
from tests.unit.test_sbatch_gpus import spec

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-2] Sockets=2 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=4000
PartitionName=p Nodes=ALL Default=YES
"""
W1 = ("nodelist", "n1")


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))
    for name in ("n1", "n2"):
        store.node_registered(Registration(name, 8, 4000), monotonic=1.0, now=10)
    return store


def submit(store: JobStore, *options: tuple[str, str]) -> int:
    """The id of a job of sbatch's ``options`` (time limit set: a backfill plan)."""
    return store.submit(from_fields(spec(("time", "10"), *options)), USER, 100).job.job_id


def cpu_ids(store: JobStore, job_id: int) -> tuple[tuple[int, ...], ...]:
    """The CPU ids the job holds on each of its nodes after one pass; () while it waits."""
    cycle(store, 100)
    return store.jobs[job_id].cpu_ids


# (id, sbatch options, CPU_IDs on each node) on idle nodes
IDLE: list[tuple[str, tuple[tuple[str, str], ...], tuple[tuple[int, ...], ...]]] = [
    ("cores-per-socket-2", (W1, ("cores-per-socket", "2")), ((0, 4),)),
    ("B-1:3", (W1, ("extra-node-info", "1:3")), ((0, 1, 4),)),
    ("B-2", (W1, ("extra-node-info", "2")), ((0, 4),)),
    ("B-2:2", (W1, ("extra-node-info", "2:2")), ((0, 1, 4, 5),)),
    ("B-2:4", (W1, ("extra-node-info", "2:4")), (tuple(range(8)),)),
    ("B-1-2:2", (W1, ("extra-node-info", "1-2:2")), ((0, 4),)),
    ("B-1:2:1", (W1, ("extra-node-info", "1:2:1")), ((0, 4),)),
    ("B-with-n1", (W1, ("extra-node-info", "2:2"), ("ntasks", "1")), ((0,),)),
    ("N2-B-1:2", (W1, ("nodes", "2"), ("extra-node-info", "1:2")), ((0, 1, 4), (0,))),
]  # fmt: skip


@pytest.mark.parametrize(("options", "ids"), [r[1:] for r in IDLE], ids=[r[0] for r in IDLE])
def test_cpu_ids_on_an_idle_node_are_slurms(
    store: JobStore, options: tuple[tuple[str, str], ...], ids: tuple[tuple[int, ...], ...]
) -> None:
    assert cpu_ids(store, submit(store, *options)) == ids


# (id, the CPUs held first, sbatch options, CPU_IDs or () where the job waited)
BUSY: list[tuple[str, str, tuple[tuple[str, str], ...], tuple[tuple[int, ...], ...]]] = [
    ("one-free-core-each", "6", (W1, ("cores-per-socket", "2")), ()),
    ("one-free-core-B-1:1", "6", (W1, ("extra-node-info", "1:1")), ((3,),)),
    ("the-socket-with-two", "5", (W1, ("extra-node-info", "1:2")), ((6, 7),)),
    ("one-task-a-free-core-each", "6", (W1, ("ntasks", "1"), ("extra-node-info", "2:1")), ((3,),)),
    ("one-task-one-socket-full", "7", (W1, ("ntasks", "1"), ("extra-node-info", "2")), ()),
    ("one-task-no-two-free", "6", (W1, ("ntasks", "1"), ("extra-node-info", "1:2")), ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("held", "options", "ids"), [r[1:] for r in BUSY], ids=[r[0] for r in BUSY]
)
def test_only_sockets_with_the_cores_free_are_used(
    store: JobStore,
    held: str,
    options: tuple[tuple[str, str], ...],
    ids: tuple[tuple[int, ...], ...],
) -> None:
    holder = submit(store, W1, ("ntasks", held))
    assert len(cpu_ids(store, holder)[0]) == int(held)
    assert cpu_ids(store, submit(store, *options)) == ids


def test_two_sockets_wait_when_one_socket_has_free_cores(store: JobStore) -> None:
    """After ``-n5`` (0-2,4-5) and ``-B 1:2`` (6-7), ``-B 2:1`` waited (Resources)."""
    cpu_ids(store, submit(store, W1, ("ntasks", "5")))
    assert cpu_ids(store, submit(store, W1, ("extra-node-info", "1:2"))) == ((6, 7),)
    assert cpu_ids(store, submit(store, W1, ("extra-node-info", "2:1"))) == ()


@pytest.mark.parametrize(
    "options",
    [
        (("extra-node-info", "3"),),
        (("extra-node-info", "3-4"),),
        (("extra-node-info", "2:5"),),
        (("extra-node-info", "1:5-6"),),
        (("extra-node-info", "1:2:2"),),
        (("extra-node-info", "1::2"),),
        (("cores-per-socket", "5"),),
        (("sockets-per-node", "3"),),
    ],
    ids=["B-3", "B-3-4", "B-2:5", "B-1:5-6", "B-1:2:2", "B-1::2", "cores-5", "sockets-3"],
)
def test_what_no_node_has_is_refused_in_slurms_words(
    store: JobStore, options: tuple[tuple[str, str], ...]
) -> None:
    """``sbatch -w n1 -B 3``: ``sbatch: error: Socket, core and/or thread specification
    can not be satisfied`` then ``sbatch: error: Batch job submission failed: Requested
    node configuration is not available``, exit 1 (srun: the same first line, then
    ``Unable to allocate resources: ...``)."""
    with pytest.raises(SlurmError) as caught:
        submit(store, W1, *options)
    assert caught.value.code == errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
    assert caught.value.detail == "Socket, core and/or thread specification can not be satisfied"


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ((("extra-node-info", "1:3"),), ("ReqB:S:C:T=0:0:3:*", "Socks/Node=1")),
        ((("extra-node-info", "2:*:1"),), ("ReqB:S:C:T=0:0:*:1", "Socks/Node=2")),
        ((("cores-per-socket", "2"),), ("ReqB:S:C:T=0:0:2:*", "Socks/Node=*")),
        ((("extra-node-info", "1-2:2"),), ("ReqB:S:C:T=0:0:2:*", "Socks/Node=1")),
    ],
    ids=["B-1:3", "B-2:*:1", "cores-per-socket-2", "B-1-2:2"],
)
def test_scontrol_shows_what_slurm_shows(
    store: JobStore, options: tuple[tuple[str, str], ...], shown: tuple[str, str]
) -> None:
    """``scontrol show job``'s ReqB:S:C:T and Socks/Node for the job's counts."""
    job_id = submit(store, W1, *options)
    data = views.job_info(store.jobs[job_id], store).SerializeToString()
    fields = " ".join(record.lines(codec.decode("JobInfo", data), 100)).split()
    assert set(shown) <= set(fields)
