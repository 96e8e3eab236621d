"""The ``-n`` sbatch and salloc imply from sockets or threads per node on a fixed node
count (``cli/sbatch/sockettasks.py``), as Slurm 22.05's did on nodes of two 4-core
sockets (``scontrol show job -d``'s NumTasks, the job's SLURM_NTASKS; the commands
and outputs are in the module's docstring and docs/design.md)."""

from __future__ import annotations

import pytest

from cli import allocation
from tests.unit.test_sbatch_gpus import spec

PER_SOCKET = (("gpus-per-socket", "a100:1"), ("sockets-per-node", "2"))


# (id, sbatch options, the -n sent or None where none is)
ROWS: list[tuple[str, tuple[tuple[str, str], ...], int | None]] = [
    ("per-socket-w-n1", (*PER_SOCKET, ("nodelist", "n1")), 2),
    ("per-socket-untyped-w-n1", (("gpus-per-socket", "1"), ("sockets-per-node", "2"),
                                 ("nodelist", "n1")), 2),
    ("per-socket-N2", (*PER_SOCKET, ("nodes", "2")), 4),
    ("per-socket-one-socket", (("gpus-per-socket", "a100:1"), ("sockets-per-node", "1"),
                               ("nodelist", "n1")), 1),
    ("sockets-N1", (("sockets-per-node", "2"), ("nodes", "1")), 2),
    ("sockets-N2-2", (("sockets-per-node", "2"), ("nodes", "2-2")), 4),
    ("sockets-two-listed", (("sockets-per-node", "2"), ("nodelist", "n1,n2")), 4),
    ("sockets-c3", (("sockets-per-node", "2"), ("nodes", "1"), ("cpus-per-task", "3")), 2),
    ("sockets-threads", (("sockets-per-node", "2"), ("threads-per-core", "1"),
                         ("nodelist", "n1")), 2),
    ("threads-per-core", (("threads-per-core", "1"), ("nodes", "2")), 2),
    ("nomultithread", (("hint", "nomultithread"), ("nodelist", "n1")), 1),
    ("compute-bound-N2", (("hint", "compute_bound"), ("nodes", "2")), 2),
    ("memory-bound", (("hint", "memory_bound"), ("nodelist", "n1")), 1),
    # Slurm leaves -n unset: no count asked, no fixed node count, or -n's own.
    ("nodelist-alone", (("nodelist", "n1"),), None),
    ("multithread", (("hint", "multithread"), ("nodelist", "n1")), None),
    ("sockets-without-nodes", (("sockets-per-node", "2"),), None),
    ("sockets-node-range", (("sockets-per-node", "2"), ("nodes", "1-2")), None),
    ("per-socket-with-n", (*PER_SOCKET, ("nodelist", "n1"), ("ntasks", "3")), 3),
    ("sockets-ntasks-per-node", (("sockets-per-node", "2"), ("nodes", "1"),
                                 ("ntasks-per-node", "3")), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "tasks"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_sbatch_sends_slurms_task_count(
    options: tuple[tuple[str, str], ...], tasks: int | None
) -> None:
    assert spec(*options).get("num_tasks") == tasks


def test_salloc_implies_it_and_srun_does_not() -> None:
    """``salloc --sockets-per-node=2 -w n1`` gave SLURM_NTASKS=2 on Slurm 22.05, and
    ``srun --sockets-per-node=2 -w n1`` ran one task."""
    options: dict[str, str | None] = {"sockets-per-node": "2", "nodelist": "n1"}
    salloc = allocation._spec("salloc", options, "bash", [])
    srun = allocation._spec("srun", options, "hostname", [])
    assert (salloc.get("num_tasks"), srun.get("num_tasks")) == (2, None)
