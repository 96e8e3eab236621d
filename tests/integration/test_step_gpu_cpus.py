"""GPU jobs and steps as Slurm 22.05 counts their CPUs and tasks: a step that asks for
GPUs without ``--exact`` runs on the job's CPUs near them (``controller/stepcpus.py``:
SLURM_CPUS_ON_NODE and the CPUs its tasks may run on), and a job with GPUs per node
and per task shows the tasks they are for (``gpuspec.tasks_held``)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from tests.integration.cluster import Cluster

SETTINGS = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:2", "KillWait=1")
WHERE = "grep Cpus_allowed_list /proc/self/status | cut -f2"


def test_a_gpu_step_runs_on_the_jobs_cpus_near_its_gpu(
    make_cluster: Callable[..., Cluster],
) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    # GPU 0 near core 1, GPU 1 near core 0 (files absent here: no isolation).
    (cluster.dir / "gres.conf").write_text(
        f"Name=gpu Type=a100 File={cluster.dir}/gpu0 Cores=1\n"
        f"Name=gpu Type=a100 File={cluster.dir}/gpu1 Cores=0\n"
    )
    cluster.start()
    script = (
        f"echo job $SLURM_CPUS_ON_NODE $({WHERE}); "
        f"srun --gpus=1 -n1 sh -c 'echo gpu $SLURM_CPUS_ON_NODE $SLURM_STEP_GPUS $({WHERE})'; "
        f"srun -n1 sh -c 'echo plain $SLURM_CPUS_ON_NODE $({WHERE})'"
    )
    job = cluster.sbatch("--gpus=a100:2", "-n2", "-o", "out", "--wrap", script)
    cluster.wait_done(job)
    lines = (cluster.dir / "out").read_text().splitlines()
    assert lines == ["job 2 0-1", "gpu 1 0 1", "plain 2 0-1"]


def test_gpus_per_node_and_task_show_the_tasks_their_gpus_hold(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Slurm 22.05: ``--gres=gpu:2 --gpus-per-task=1 -n3 -N2`` shows NumTasks=4 once it
    runs (2 + 2 CPUs), while the job's SLURM_NTASKS stays 3."""
    cluster = make_cluster(nodes=2, settings=SETTINGS)
    job = cluster.sbatch(
        "--gres=gpu:2", "--gpus-per-task=1", "-n3", "-N2", "-o", "tasks.out",
        "--wrap", "echo $SLURM_NTASKS; sleep 30",
    )  # fmt: skip
    out = cluster.dir / "tasks.out"
    cluster.wait_for(lambda: out.exists() and out.read_text().endswith("\n"), 10, "output")
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    cluster.run("scancel", str(job))
    assert "NumNodes=2 NumCPUs=4 NumTasks=4 " in shown
    assert out.read_text() == "3\n"


def test_a_job_asks_totals_of_two_gpu_types(make_cluster: Callable[..., Cluster]) -> None:
    """Slurm 22.05: ``--gpus=a100:1,v100:2`` is one node's A100 0 and V100s 2-3
    (TresPerJob lists both), and a step in it takes the three; with
    ``--gpus-per-task=v100:1 -n2`` beside ``--gpus=a100:1``, the same GPUs."""
    typed = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:2,gpu:v100:2", "KillWait=1")
    cluster = make_cluster(nodes=1, settings=typed)
    show = "echo $SLURM_JOB_GPUS $SLURM_GPUS"
    listed = cluster.sbatch(
        "--gpus=a100:1,v100:2", "-o", "list.out",
        "--wrap", f"{show}; srun sh -c 'echo $SLURM_STEP_GPUS'; sleep 30",
    )  # fmt: skip
    out = cluster.dir / "list.out"
    cluster.wait_for(lambda: out.exists() and out.read_text().count("\n") >= 2, 10, "step")
    shown = cluster.run("scontrol", "show", "job", str(listed)).stdout
    cluster.run("scancel", str(listed))
    cluster.wait_done(listed)
    assert "TresPerJob=gres/gpu:a100:1,gres/gpu:v100:2" in shown
    assert out.read_text().splitlines()[:2] == ["0,2,3 a100:1,v100:2", "0,2,3"]
    tasks = cluster.sbatch(
        "--gpus=a100:1", "--gpus-per-task=v100:1", "-n2", "-o", "tasks.out", "--wrap", show
    )
    cluster.wait_done(tasks)
    assert (cluster.dir / "tasks.out").read_text() == "0,2,3 a100:1\n"


def test_a_list_of_totals_beside_gpus_per_node(make_cluster: Callable[..., Cluster]) -> None:
    """Slurm 22.05: ``--gpus=a100:2,v100:2 --gpus-per-node=a100:1`` is two nodes, an
    A100 and a V100 on each (GRES=gpu:a100:1(IDX:0),gpu:v100:1(IDX:2)), and ``--gpus=1,2``
    two GPUs, the last count."""
    typed = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:2,gpu:v100:2", "KillWait=1")
    cluster = make_cluster(nodes=2, settings=typed)
    listed = cluster.sbatch(
        "--gpus=a100:2,v100:2", "--gpus-per-node=a100:1", "-o", "list.out",
        "--wrap", "echo $SLURM_NNODES $SLURM_JOB_GPUS $SLURM_GPUS",
    )  # fmt: skip
    cluster.wait_done(listed)
    shown = cluster.run("scontrol", "show", "job", "-d", str(listed)).stdout
    assert "JOB_GRES=gpu:a100:2,gpu:v100:2\n" in shown
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    memory = node.split("RealMemory=")[1].split()[0]  # no memory asked: the node's, as Slurm's
    line = f" Nodes=node[1-2] CPU_IDs=0 Mem={memory} GRES=gpu:a100:1(IDX:0),gpu:v100:1(IDX:2)\n"
    assert line in shown
    assert (cluster.dir / "list.out").read_text() == "2 0,2 a100:2,v100:2\n"
    again = cluster.sbatch("--gpus=1,2", "-o", "again.out", "--wrap", "echo $SLURM_JOB_GPUS")
    cluster.wait_done(again)
    assert (cluster.dir / "again.out").read_text() == "0,1\n"
