"""``--ntasks-per-socket`` for jobs (sbatch, salloc, restd's ``tasks_per_socket``):
the cap on each node's tasks, the CPUs its tasks get, what scontrol and the job's
environment show (core/taskspersocket.py).

Measured on Slurm 22.05: slurmctld and two ``slurmd -N`` of Sockets=2 CoresPerSocket=4
ThreadsPerCore=1 (select/cons_tres, CR_Core; GPUs 0-1 with ``Cores=0-3``, 2-3 with
``Cores=4-7``), ``sbatch OPTIONS`` one job at a time, ``scontrol show job -d``'s
CPU_IDs; the busy rows beside ``sbatch -w n1 -n3`` (CPUs 0-1,4) kept running.
``-w n1 -n4 --ntasks-per-socket=1`` spread over n1 and n2 there; Corral refuses it, as
it refuses ``-w n1 -n10`` (sbatch's -w fixes the node count: docs/design.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.failure import Failure
from cli.jobs import record
from cli.sbatch.settings import Settings
from controller import views
from controller.jobenv import batch_environment
from controller.jobspec import from_fields
from controller.model import Payload
from controller.store import JobStore
from corral import config, errors
from corral.errors import SlurmError
from corral.wire import codec
from restd.jobs import spec_from_description
from tests.unit.test_gpu_semantics import GRES_CONF, SLURM_CONF, SPREAD, per_node, place_in_turn
from tests.unit.test_socket_core_fit import W1, cpu_ids, store, submit

__all__ = ["store"]  # the fixture, shared

Options = tuple[tuple[str, str], ...]

# (id, the CPUs held on n1 first by ``-w n1 -n HELD``, sbatch options, CPU_IDs on each node)
ROWS: list[tuple[str, str, Options, tuple[tuple[int, ...], ...]]] = [
    ("n2-2-w-n1", "", (W1, ("ntasks", "2"), ("ntasks-per-socket", "2")), ((4, 5),)),
    ("n3-1", "", (("ntasks", "3"), ("ntasks-per-socket", "1")), ((0, 4), (4,))),
    ("n2-1", "", (("ntasks", "2"), ("ntasks-per-socket", "1")), ((0, 4),)),
    ("n4-1", "", (("ntasks", "4"), ("ntasks-per-socket", "1")), ((0, 4), (0, 4))),
    ("N2-n4-2", "", (("nodes", "2"), ("ntasks", "4"), ("ntasks-per-socket", "2")),
     ((0, 1, 4), (4,))),
    ("N2-n5-2", "", (("nodes", "2"), ("ntasks", "5"), ("ntasks-per-socket", "2")),
     ((0, 1, 4, 5), (4,))),
    ("N1-1", "", (W1, ("nodes", "1"), ("ntasks-per-socket", "1")), ((4,),)),
    ("n2-c2-2", "", (W1, ("ntasks", "2"), ("cpus-per-task", "2"), ("ntasks-per-socket", "2")),
     ((4, 5, 6, 7),)),
    ("n2-1-per-node-2", "", (W1, ("ntasks", "2"), ("ntasks-per-node", "2"),
                             ("ntasks-per-socket", "1")), ((0, 4),)),
    ("n1-c5-1", "", (W1, ("nodes", "1"), ("cpus-per-task", "5"), ("ntasks-per-socket", "1")),
     ((0, 1, 2, 4, 5),)),
    ("n2-c3-1", "", (W1, ("nodes", "1"), ("ntasks", "2"), ("cpus-per-task", "3"),
                     ("ntasks-per-socket", "1")), ((0, 1, 2, 4, 5, 6),)),
    ("n4-4", "", (W1, ("ntasks", "4"), ("ntasks-per-socket", "4")), ((4, 5, 6, 7),)),
    ("busy-n2-2", "3", (W1, ("ntasks", "2"), ("ntasks-per-socket", "2")), ((5, 6),)),
    ("busy-n4-2", "3", (W1, ("ntasks", "4"), ("ntasks-per-socket", "2")), ((2, 3, 5, 6),)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("held", "options", "ids"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_cpu_ids_are_slurms(
    store: JobStore, held: str, options: Options, ids: tuple[tuple[int, ...], ...]
) -> None:
    if held:
        assert cpu_ids(store, submit(store, W1, ("ntasks", held))) == ((0, 1, 4),)
    assert cpu_ids(store, submit(store, *options)) == ids


def test_a_socket_wholly_held_gives_no_task(store: JobStore) -> None:
    """After ``-n4 --ntasks-per-socket=4 -w n1`` (CPUs 4-7), ``-N1 -n2
    --ntasks-per-socket=1 -w n1`` waited (Resources)."""
    holder = submit(store, W1, ("ntasks", "4"), ("ntasks-per-socket", "4"))
    assert cpu_ids(store, holder) == ((4, 5, 6, 7),)
    waiting = submit(store, W1, ("nodes", "1"), ("ntasks", "2"), ("ntasks-per-socket", "1"))
    assert cpu_ids(store, waiting) == ()


@pytest.mark.parametrize(
    "options",
    [
        (("nodes", "1"), ("ntasks", "3"), ("ntasks-per-socket", "1")),
        (W1, ("nodes", "1"), ("ntasks", "3"), ("ntasks-per-socket", "1")),
        (W1, ("ntasks", "3"), ("ntasks-per-node", "3"), ("ntasks-per-socket", "1")),
    ],
    ids=["N1-n3-1", "w-n1-N1-n3-1", "per-node-3-1"],
)
def test_more_tasks_than_its_sockets_hold_are_refused(store: JobStore, options: Options) -> None:
    """``sbatch: error: Batch job submission failed: Requested node configuration is
    not available``."""
    with pytest.raises(SlurmError) as caught:
        submit(store, *options)
    assert caught.value.code == errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE


@pytest.mark.parametrize("text", ["0", "-1", "abc", "2x", ""])
def test_a_bad_count_is_refused_in_sbatchs_words(text: str) -> None:
    with pytest.raises(Failure) as caught:
        Settings().apply("ntasks-per-socket", text, "command line")
    assert str(caught.value) == f'Invalid numeric value "{text}" for --ntasks-per-socket.'


def test_scontrol_and_the_environment_show_it(store: JobStore) -> None:
    """``-n2 --ntasks-per-socket=2 --ntasks-per-node=2``: NtasksPerN:B:S:C=2:0:2:*
    (``*`` for S without it) and SLURM_NTASKS_PER_SOCKET=2 in the batch job."""
    job_id = submit(store, W1, ("ntasks", "2"), ("ntasks-per-socket", "2"))
    plain = submit(store, W1, ("ntasks", "2"))
    cpu_ids(store, job_id)
    shown = []
    for one in (job_id, plain):
        data = views.job_info(store.jobs[one], store).SerializeToString()
        shown.append(" ".join(record.lines(codec.decode("JobInfo", data), 100)).split())
    assert "NtasksPerN:B:S:C=0:0:2:*" in shown[0]
    assert "NtasksPerN:B:S:C=0:0:*:*" in shown[1]
    env = batch_environment(store.jobs[job_id], Payload(script=""), "test")
    assert env["SLURM_NTASKS_PER_SOCKET"] == "2"
    assert env["SLURM_TASKS_PER_NODE"] == "2"
    assert "SLURM_NTASKS_PER_SOCKET" not in batch_environment(
        store.jobs[plain], Payload(script=""), "test"
    )


def test_gpus_per_socket_follow_the_capped_sockets(tmp_path: Path) -> None:
    """``-n2 --ntasks-per-socket=2 --gpus-per-socket=1 --sockets-per-node=1 -w n1``:
    CPU_IDs=4-5 and GPU 2 alone; with ``--ntasks-per-socket=1 --sockets-per-node=2``:
    0,4 and GPUs 0,2."""
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "gres.conf").write_text(GRES_CONF)
    conf = config.load(str(tmp_path / "slurm.conf"))
    one = place_in_turn(conf, {**SPREAD, "num_tasks": 2, "ntasks_per_socket": 2})[-1]
    assert (one.cpu_ids, per_node(one)) == (((4, 5),), {"n1": (2,)})
    two = {**SPREAD, "num_tasks": 2, "ntasks_per_socket": 1, "sockets_per_node": 2}
    start = place_in_turn(conf, two)[-1]
    assert (start.cpu_ids, per_node(start)) == (((0, 4),), {"n1": (0, 2)})


def test_rest_takes_tasks_per_socket() -> None:
    """v0.0.42's job description ``tasks_per_socket`` is sbatch's --ntasks-per-socket."""
    desc = {
        "environment": ["PATH=/bin"],
        "tasks_per_socket": {"set": True, "infinite": False, "number": 2},
    }
    spec = spec_from_description(desc, "#!/bin/sh\n", "/home/alice", "restd", [])
    assert from_fields(spec).ntasks_per_socket == 2
