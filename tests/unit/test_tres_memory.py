"""The memory a started job's TRES count (scontrol's TRES=, sacct's and restd's
AllocTRES), as Slurm 22.05 counts it. Measured (Debian's slurm-wlm 22.05.8, four
``slurmd -N`` nodes of 8 CPUs and RealMemory=16000, select/cons_tres):

* CR_Core_Memory, no memory asked: ``sbatch --gpus=2 -n6 -N2`` shows
  ``TRES=cpu=6,mem=32000M,node=2,billing=6`` (each node's whole memory);
* CR_Core: ``sbatch -n1`` and ``sbatch --mem=100`` both show
  ``TRES=cpu=1,node=1,billing=1``, no memory at all, and ``Mem=0`` per node.
"""

from __future__ import annotations

from controller.views import real_memory, tres, tres_memory
from tests.unit import scenario

NODES = "NodeName=n[1-2] CPUs=8 RealMemory=16000"


def memory_of(params: str, alloc_mem: tuple[int, ...]) -> int:
    conf = scenario.slurm_conf(f"SelectTypeParameters={params}", NODES, "PartitionName=p Nodes=ALL")
    job = scenario.job(1, nodes=("n1", "n2"), cpus=(4, 2), alloc_mem=alloc_mem)
    return tres_memory(job, real_memory(conf, job.nodes))


def test_no_limit_counts_each_nodes_memory_where_memory_is_consumable() -> None:
    assert memory_of("CR_Core_Memory", ()) == 32000
    assert memory_of("CR_Core_Memory", (0, 0)) == 32000
    assert tres(6, 32000, 2) == "cpu=6,mem=32000M,node=2,billing=6"


def test_a_limit_counts_as_held() -> None:
    assert memory_of("CR_Core_Memory", (100, 100)) == 200
    assert memory_of("CR_CPU_Memory", (100, 0)) == 16100


def test_no_memory_where_memory_is_not_consumable() -> None:
    assert memory_of("CR_Core", ()) == 0
    assert memory_of("CR_Core", (100, 100)) == 0
    assert tres(1, 0, 1) == "cpu=1,node=1,billing=1"
