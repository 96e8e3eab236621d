"""``scontrol show job -d``'s detail lines: JOB_GRES and each node's CPU ids, memory
and GRES, in the formats Slurm 22.05 printed for the jobs of test_gpu_semantics.py's
TYPED_ROWS (``JOB_GRES=gpu:v100:2,gpu:a100:2`` / ``Nodes=n[1,3] CPU_IDs=0 Mem=16000
GRES=gpu:v100:1(IDX:2),gpu:a100:1(IDX:0)``, and ``JOB_GRES=(null)`` / ``GRES=`` for a
job without any)."""

from __future__ import annotations

from typing import Any

from cli.jobs import record
from controller import jobdetail
from controller.jobdetail import JobDetail
from tests.unit.scenario import NOW, running
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
    detail = jobdetail.of_job(job, {"n1": NUMBERING, "n3": NUMBERING})
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
    detail = jobdetail.of_job(job, {"n1": NUMBERING, "n2": NUMBERING})
    assert _shown(detail, "n[1-2]") == [
        "   JOB_GRES=gpu:a100:2,gpu:v100:4",
        "     Nodes=n1 CPU_IDs=0-2 Mem=100 GRES=gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)",
        "     Nodes=n2 CPU_IDs=4-5 Mem=100 GRES=gpu:a100:1(IDX:1),gpu:v100:2(IDX:2-3)",
    ]


def test_a_job_without_gres_and_a_pending_one() -> None:
    plain = running(3, ("n2",), cpu_ids=((0, 4),), alloc_mem=(16000,))
    assert _shown(jobdetail.of_job(plain, {}), "n2") == [
        "   JOB_GRES=(null)",
        "     Nodes=n2 CPU_IDs=0,4 Mem=16000 GRES=",
    ]
    pending = jobdetail.of_job(running(4, (), cpus=(), alloc_mem=()), {})
    assert pending == JobDetail("", [], [], [])
    assert _shown(pending, "") == []
