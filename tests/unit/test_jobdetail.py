"""``scontrol show job -d``'s detail lines: JOB_GRES and each node's CPU ids, memory
and GRES, in the formats Slurm 22.05 printed for the jobs of test_gpu_semantics.py's
TYPED_ROWS (``JOB_GRES=gpu:v100:2,gpu:a100:2`` / ``Nodes=n[1,3] CPU_IDs=0 Mem=16000
GRES=gpu:v100:1(IDX:2),gpu:a100:1(IDX:0)``, and ``JOB_GRES=(null)`` / ``GRES=`` for a
job without any), and ``Mem=`` as it printed it for the memory options of MEMORY_ROWS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli.jobs import record
from controller import jobdetail, views
from controller.jobdetail import JobDetail
from corral import config
from tests.unit import test_gpu_semantics as gpu_semantics
from tests.unit.scenario import NOW, running, slurm_conf
from tests.unit.test_scontrol_format import job as job_dict

NUMBERING = [("a100", 0), ("a100", 1), ("v100", 2), ("v100", 3)]
BOTH = (("gpu", "a100", 1), ("gpu", "v100", 1))  # as placement gives them: node order


def _shown(detail: JobDetail, nodes: str) -> list[str]:
    fields: dict[str, Any] = {
        "state": "RUNNING",
        "nodes": nodes,
        "job_gres": detail.job_gres,
        "node_cpu_ids": detail.node_cpu_ids,
        "node_mem": detail.node_mem,
        "node_gres": detail.node_gres,
    }
    text = record.record(job_dict(**fields), NOW, details=True)
    return [line for line in text.splitlines() if "GRES" in line]


def test_a_total_of_one_type_beside_gpus_per_node_of_another() -> None:
    """``--gres=gpu:a100:1 --gpus=v100:2 -N2``: the request of --gpus is listed first."""
    job = running(
        1,
        ("n3", "n1"),
        gres="gpu:a100:1",
        gpus_per_job=2,
        gpu_type="v100",
        gres_alloc=(BOTH, BOTH),
        gpus=((0, 2), (0, 2)),
        cpu_ids=((0,), (0,)),
        alloc_mem=(16000, 16000),
    )
    detail = jobdetail.of_job(job, {"n1": NUMBERING, "n3": NUMBERING}, {})
    assert detail.job_gres == "gpu:v100:2,gpu:a100:2"
    assert _shown(detail, "n[1,3]") == [
        "   JOB_GRES=gpu:v100:2,gpu:a100:2",
        "     Nodes=n[1,3] CPU_IDs=0 Mem=16000 GRES=gpu:v100:1(IDX:2),gpu:a100:1(IDX:0)",
    ]


def test_nodes_that_differ_have_lines_of_their_own() -> None:
    """``--gpus-per-node=a100:1,v100:2``: the types in the order asked; a node's line
    in NodeList's order, whatever order the job holds its nodes in."""
    three = (("gpu", "a100", 1), ("gpu", "v100", 2))
    job = running(
        2,
        ("n2", "n1"),
        gres="gpu:a100:1,gpu:v100:2",
        gres_alloc=(three, three),
        gpus=((1, 2, 3), (0, 2, 3)),
        cpu_ids=((4, 5), (0, 1, 2)),
        alloc_mem=(100, 100),
    )
    detail = jobdetail.of_job(job, {"n1": NUMBERING, "n2": NUMBERING}, {})
    assert _shown(detail, "n[1-2]") == [
        "   JOB_GRES=gpu:a100:2,gpu:v100:4",
        "     Nodes=n1 CPU_IDs=0-2 Mem=100 GRES=gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)",
        "     Nodes=n2 CPU_IDs=4-5 Mem=100 GRES=gpu:a100:1(IDX:1),gpu:v100:2(IDX:2-3)",
    ]


UNTYPED = [("", 0), ("", 1), ("", 2), ("", 3)]


@pytest.mark.parametrize(
    ("numbering", "cores_known", "first", "second"),
    [
        (UNTYPED, frozenset({"n1", "n2"}), "gpu:0(IDX:)", "gpu:1(IDX:0)"),
        (UNTYPED, frozenset(), "(null)", "gpu:1(IDX:0)"),
        ([("a100", i) for i in range(4)], frozenset(), "gpu:a100:0(IDX:)", "gpu:a100:1(IDX:0)"),
    ],
    ids=["cores-known", "untyped-no-cores", "typed-no-cores"],
)
def test_a_node_dealt_none_of_the_total(
    numbering: list[tuple[str, int]], cores_known: frozenset[str], first: str, second: str
) -> None:
    """``--gpus=1 -n10`` on two 8-core nodes (Slurm 22.05, gres.conf with Cores=, then
    without, then typed): n1 holds none of the GPU, and says so as Slurm did."""
    kind = numbering[0][0]
    job = running(
        5,
        ("n1", "n2"),
        gpus_per_job=1,
        gres_alloc=((), (("gpu", kind, 1),)),
        gpus=((), (0,)),
        cpu_ids=(tuple(range(8)), (0, 4)),
        alloc_mem=(16000, 16000),
    )
    names = {"n1": numbering, "n2": numbering}
    detail = jobdetail.of_job(job, names, {}, cores_known)
    assert _shown(detail, "n[1-2]") == [
        f"   JOB_GRES={second.partition('(')[0]}",
        f"     Nodes=n1 CPU_IDs=0-7 Mem=16000 GRES={first}",
        f"     Nodes=n2 CPU_IDs=0,4 Mem=16000 GRES={second}",
    ]


def test_a_job_without_gres_and_a_pending_one() -> None:
    plain = running(3, ("n2",), cpu_ids=((0, 4),), alloc_mem=(16000,))
    assert _shown(jobdetail.of_job(plain, {}, {}), "n2") == [
        "   JOB_GRES=(null)",
        "     Nodes=n2 CPU_IDs=0,4 Mem=16000 GRES=",
    ]
    pending = jobdetail.of_job(running(4, (), cpus=(), alloc_mem=()), {}, {})
    assert pending == JobDetail("", [], [], [])
    assert _shown(pending, "") == []


# test_gpu_semantics.py's cluster (nodes of 8 CPUs and 16000 MiB, CR_Core_Memory) with
# two partitions more, as Slurm 22.05 ran it.
MEMORY_PARTITIONS = """\
PartitionName=dmc Nodes=n[1-4] DefMemPerCPU=100
PartitionName=dmn Nodes=n[1-4] DefMemPerNode=500
"""

# (id, JobSpec fields as sbatch sends them, each node's Mem= in Slurm's detail lines)
MEMORY_ROWS: list[tuple[str, dict[str, Any], list[int]]] = [
    ("no-memory-asked", {}, [16000]),
    ("mem-0", {"mem_per_node": 0}, [16000]),
    ("exclusive", {"exclusive": True}, [16000]),
    ("no-memory-N2", {"num_tasks": 3, "min_nodes": 2}, [16000, 16000]),
    ("mem-100", {"mem_per_node": 100}, [100]),
    ("exclusive-mem-100", {"exclusive": True, "mem_per_node": 100}, [100]),
    ("mem-per-cpu-n2", {"mem_per_cpu": 10, "num_tasks": 2}, [20]),
    ("mem-per-cpu-n3-N2", {"mem_per_cpu": 10, "num_tasks": 3, "min_nodes": 2}, [20, 10]),
    ("exclusive-mem-per-cpu", {"exclusive": True, "mem_per_cpu": 10}, [80]),
    ("def-mem-per-cpu", {"partitions": ("dmc",), "num_tasks": 2}, [200]),
    ("def-mem-per-cpu-N2", {"partitions": ("dmc",), "num_tasks": 3, "min_nodes": 2},
     [200, 100]),
    ("def-mem-per-cpu-exclusive", {"partitions": ("dmc",), "exclusive": True}, [800]),
    ("def-mem-per-node", {"partitions": ("dmn",), "num_tasks": 2}, [500]),
    ("def-mem-per-node-exclusive", {"partitions": ("dmn",), "exclusive": True}, [500]),
    ("def-mem-per-gpu", {"partitions": ("defs",), "gpus": 2}, [2000]),
    ("mem-per-gpu", {"mem_per_gpu": 100, "gpus": 2}, [200]),
]  # fmt: skip


@pytest.fixture(scope="module")
def memory_conf(tmp_path_factory: pytest.TempPathFactory) -> config.SlurmConfig:
    where: Path = tmp_path_factory.mktemp("mem")
    (where / "slurm.conf").write_text(gpu_semantics.SLURM_CONF + MEMORY_PARTITIONS)
    (where / "gres.conf").write_text(gpu_semantics.GRES_CONF)
    return config.load(str(where / "slurm.conf"))


@pytest.mark.parametrize(
    ("fields", "shown"), [row[1:] for row in MEMORY_ROWS], ids=[row[0] for row in MEMORY_ROWS]
)
def test_memory_a_job_holds_on_each_node(
    memory_conf: config.SlurmConfig, fields: dict[str, Any], shown: list[int]
) -> None:
    """Mem= is what the job holds there: asked, or its partition's default, else the
    node's whole RealMemory."""
    job = gpu_semantics.started(memory_conf, **fields)
    whole = {node.name: node.real_memory for node in memory_conf.nodes}
    detail = jobdetail.of_job(job, {}, whole)
    assert detail.node_mem == shown


def test_memory_is_zero_where_it_is_no_consumable_resource() -> None:
    """SelectTypeParameters=CR_Core: Slurm 22.05 prints Mem=0 for ``--mem=100`` as for a
    job without a memory request (measured on the cluster above, CR_Core)."""
    asked = running(5, ("n1",), cpu_ids=((0,),), alloc_mem=(100,))
    cores = slurm_conf("SelectTypeParameters=CR_Core", "NodeName=n1 CPUs=8 RealMemory=16000")
    assert views.real_memory(cores, asked.nodes) is None
    assert jobdetail.of_job(asked, {}, views.real_memory(cores, asked.nodes)).node_mem == [0]
    counted = slurm_conf("NodeName=n1 CPUs=8 RealMemory=16000")  # CR_Core_Memory, the default
    assert views.real_memory(counted, ("n1", "gone")) == {"n1": 16000}
