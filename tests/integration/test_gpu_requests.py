"""Slurm's GPU requests on a live cluster: a job-wide total spread over the nodes, the
job's record and environment, per-task binding in steps, salloc and srun alike.

Two emulated nodes of four GPUs, gres.conf putting GPUs 0-1 near CPU 0 and 2-3 near
CPU 1 (files absent: no isolation), as tests/unit/test_gpu_semantics.py's cluster
on real Slurm 22.05, whose results these are (``--gpus=5``: 3 + 2, the first round
giving each node the GPUs near its first CPU).
"""

from __future__ import annotations

from collections.abc import Callable

from tests.integration.cluster import Cluster

SETTINGS = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:4", "KillWait=1")
SHOW = "echo $SLURM_PROCID $SLURM_GPUS_ON_NODE $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS"


def _cluster(make_cluster: Callable[..., Cluster]) -> Cluster:
    cluster = make_cluster(nodes=2, settings=SETTINGS, start=False)
    (cluster.dir / "gres.conf").write_text(
        f"Name=gpu File={cluster.dir}/gpu[0-1] Cores=0\n"
        f"Name=gpu File={cluster.dir}/gpu[2-3] Cores=1\n"
    )
    return cluster.start()


def _lines(cluster: Cluster, name: str) -> list[str]:
    return (cluster.dir / name).read_text().splitlines()


def _submit(cluster: Cluster, name: str, script: str, *options: str) -> int:
    """``script`` submitted as ``name.sh`` with ``options``, its output to ``name.out``."""
    path = cluster.dir / f"{name}.sh"
    path.write_text("#!/bin/sh\n" + script)
    return cluster.sbatch(*options, "-o", f"{name}.out", str(path))


def test_a_job_wide_total_is_spread_over_its_nodes(make_cluster: Callable[..., Cluster]) -> None:
    cluster = _cluster(make_cluster)
    script = (
        "echo $SLURM_GPUS $SLURM_GPUS_ON_NODE $CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS $SLURM_NTASKS\n"
        f"srun -l sh -c '{SHOW}' | sort\n"
        "srun -n1 true || echo step refused\n"
    )
    job = _submit(cluster, "total", script, "--gpus=5", "--mem-per-gpu=100")
    record = cluster.wait_done(job)
    assert record["state"] == "COMPLETED"
    out = _lines(cluster, "total.out")
    assert out[0] == "5 3 0,1,2 0,1,2 2"
    assert out[1:3] == ["0: 0 3 0,1,2 0,1,2", "1: 1 2 0,1 0,1"]
    # srun reads SLURM_GPUS=5 back, as Slurm's does: one node cannot give five.
    assert "Invalid generic resource (gres) specification" in out[3]
    assert out[4] == "step refused"
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "   TresPerJob=gres/gpu:5\n" in shown
    assert "   MemPerTres=gres/gpu:100\n" in shown
    assert ",gres/gpu=5" in shown.split("TRES=")[1].split("\n")[0]
    assert "mem=500M" in shown.split("TRES=")[1].split("\n")[0]


def test_steps_bind_each_task_to_its_gpus(make_cluster: Callable[..., Cluster]) -> None:
    cluster = _cluster(make_cluster)
    script = (
        f"srun sh -c '{SHOW}' | sort\n"
        f"srun --gpu-bind=map_gpu:3,1 sh -c '{SHOW}' | sort\n"
        f"srun --gpu-bind=single:1 sh -c '{SHOW}' | sort\n"
        f"srun --gpu-bind=mask_gpu:0x9,0x6 sh -c '{SHOW}' | sort\n"
        f"srun --gpu-bind=none sh -c '{SHOW}' | sort\n"
        f"srun -n1 sh -c '{SHOW}'\n"
    )
    job = _submit(cluster, "bind", script, "--gpus-per-task=2", "-n2", "-N1")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    assert _lines(cluster, "bind.out") == [
        "0 4 0,1 0,1",  # SLURM_GPUS_PER_TASK=2: srun binds per_task:2, as Slurm's does
        "1 4 2,3 2,3",
        "0 4 3 3",
        "1 4 1 1",
        "0 4 0 0",
        "1 4 1 1",
        "0 4 0,3 0,3",
        "1 4 1,2 1,2",
        "0 4 0,1,2,3 0,1,2,3",
        "1 4 0,1,2,3 0,1,2,3",
        "0 2 0,1 0,1",  # one task on the node: no binding, its two GPUs
    ]
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "   TresPerTask=gres/gpu:2\n" in shown


def test_salloc_and_srun_take_every_gpu_option(make_cluster: Callable[..., Cluster]) -> None:
    cluster = _cluster(make_cluster)
    salloc = cluster.run(
        "salloc",
        "-Q",
        "--gpus=3",
        "-N2",
        "--cpus-per-gpu=1",
        "--gpu-bind=closest",
        "sh",
        "-c",
        f"echo $SLURM_GPUS $SLURM_CPUS_PER_GPU $SLURM_GPU_BIND; srun -l sh -c '{SHOW}' | sort",
    ).stdout.splitlines()
    assert salloc == ["3 1 closest", "0: 0 2 0,1 0,1", "1: 1 1 0 0"]
    srun = cluster.run(
        "srun", "-Q", "--gpus=2", "-n2", "--ntasks-per-gpu=1", "sh", "-c", SHOW
    ).stdout.splitlines()
    assert sorted(srun) == ["0 2 0 0", "1 2 1 1"]  # --ntasks-per-gpu binds as single:1
    refused = cluster.run("salloc", "--mem-per-gpu=100", "true", check=False)
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "salloc: error: Requested mem_per_tres=gres:gpu:100 but did not request any GPU.",
        "salloc: error: Invalid generic resource (gres) specification",
    ]
    never = cluster.run("sbatch", "--gpus=9", "--wrap", "true", check=False)
    assert never.stderr == (
        "sbatch: error: Batch job submission failed: "
        "Requested node configuration is not available\n"
    )


def test_a_gpu_list_is_counted_once_and_shown_as_given(
    make_cluster: Callable[..., Cluster],
) -> None:
    """``--gpus=1,2`` asks two GPUs (a type named again keeps its last count) and
    ``scontrol show job`` shows the list as given, as Slurm 22.05's
    ``TresPerJob=gres:gpu:1,gres:gpu:2`` (tests/unit/test_gpu_lists.py); a job with no
    memory limit counts the node's whole memory in TRES, as there."""
    cluster = _cluster(make_cluster)
    job = cluster.sbatch("--gpus=1,2", "-o", "list.out", "--wrap", "echo $SLURM_GPUS_ON_NODE")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    assert _lines(cluster, "list.out") == ["2"]
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "   TresPerJob=gres/gpu:1,gres/gpu:2\n" in shown
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    memory = node.split("RealMemory=")[1].split()[0]
    assert f",mem={memory}M," in shown.split("TRES=")[1].split("\n")[0]


def test_a_total_below_the_node_count_its_tasks_take(
    make_cluster: Callable[..., Cluster],
) -> None:
    """``--gpus=1 -n3`` on nodes of two CPUs: two nodes, the GPU on the second, as Slurm
    22.05 ran ``--gpus=1 -n10`` on 8-CPU nodes (tests/unit/test_gpu_semantics.py). The
    script's node holds no GPU and is told none; its plain srun, which reads
    SLURM_GPUS=1 back, is refused with Slurm's two lines."""
    cluster = _cluster(make_cluster)
    script = (
        "echo $SLURM_GPUS ${CUDA_VISIBLE_DEVICES-unset} ${SLURM_JOB_GPUS-unset}"
        " ${SLURM_GPUS_ON_NODE-unset} $SLURM_TASKS_PER_NODE\n"
        "srun true 2>&1 || echo step refused\n"
    )
    job = _submit(cluster, "few", script, "--gpus=1", "-n3")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    assert _lines(cluster, "few.out") == [
        "1 unset unset unset 2,1",
        "srun: error: Step requested gres=gpu:1 is less than the requested min nodes=2",
        f"srun: error: Unable to create step for job {job}: "
        "Invalid generic resource (gres) specification",
        "step refused",
    ]
    shown = cluster.run("scontrol", "show", "job", "-d", str(job)).stdout
    held = [line.split("GRES=")[1] for line in shown.splitlines() if "CPU_IDs=" in line]
    assert held == ["gpu:0(IDX:)", "gpu:1(IDX:0)"]
    assert "   JOB_GRES=gpu:1\n" in shown
