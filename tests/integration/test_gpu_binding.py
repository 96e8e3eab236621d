"""GPUs as Slurm hands them to jobs and steps: indices, binding variables, GresUsed."""

from __future__ import annotations

import os
from collections.abc import Callable

from corral import arrayspec
from tests.integration.cluster import Cluster

SETTINGS = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:2,gpu:v100:2", "KillWait=1")
SHOW = "echo $SLURM_JOB_GPUS/$CUDA_VISIBLE_DEVICES/$GPU_DEVICE_ORDINAL/$SLURM_GPUS_ON_NODE"


def _wait_output(cluster: Cluster, name: str) -> None:
    """Wait for a job's first line: RUNNING comes before the script has run."""
    path = cluster.dir / name
    cluster.wait_for(lambda: path.exists() and path.read_text().endswith("\n"), 10, name)


def test_jobs_get_distinct_gpus_and_see_only_theirs(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    first = cluster.sbatch("--gpus=a100:1", "-o", "first.out", "--wrap", f"{SHOW}; sleep 30")
    cluster.wait_state(first, {"RUNNING"})
    second = cluster.sbatch("--gpus-per-node=2", "-o", "second.out", "--wrap", f"{SHOW}; sleep 30")
    cluster.wait_state(second, {"RUNNING"})
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    assert "   Gres=gpu:a100:2,gpu:v100:2\n" in node
    assert "   GresUsed=gpu:a100:2(IDX:0-1),gpu:v100:1(IDX:2)\n" in node
    for out in ("first.out", "second.out"):
        _wait_output(cluster, out)
    cluster.run("scancel", str(first))  # a CPU for the next job (the node may have two)
    steps = cluster.dir / "step.out"
    third = cluster.sbatch(
        "--gres=gpu:v100:1", "-o", str(steps), "--wrap", f"srun sh -c '{SHOW}'"
    )  # fmt: skip
    cluster.wait_done(third)
    cluster.run("scancel", str(second))
    assert (cluster.dir / "first.out").read_text() == "0/0/0/1\n"
    assert (cluster.dir / "second.out").read_text() == "1,2/1,2/1,2/2\n"
    assert steps.read_text() == "3/3/3/1\n"  # a step binds the job's GPUs on its node


def test_steps_ask_for_some_of_the_jobs_gpus(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    script = (
        "srun --exact --gpus=2 -n1 sh -c 'echo A $CUDA_VISIBLE_DEVICES; sleep 2' &\n"
        "sleep 0.5\n"
        "srun --exact --gpus-per-node=2 -n1 sh -c 'echo B $CUDA_VISIBLE_DEVICES'\n"
        "wait\n"
        "srun --gpus=5 true\n"
    )
    path = cluster.dir / "steps.sh"
    path.write_text("#!/bin/bash\n" + script)
    # --gres, not --gpus-per-node: srun reads SLURM_GPUS_PER_NODE back as Slurm's does,
    # and every step would then ask all four.
    job_id = cluster.sbatch("--gres=gpu:4", "-n2", "-o", "steps.out", str(path))
    cluster.wait_done(job_id)
    out = (cluster.dir / "steps.out").read_text().splitlines()
    assert "A 0,1" in out and "B 2,3" in out
    assert (
        f"srun: error: Unable to create step for job {job_id}: "
        "Invalid generic resource (gres) specification"
    ) in out


def test_gres_conf_files_number_the_gpus(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    (cluster.dir / "gres.conf").write_text(
        "Name=gpu Type=a100 File=/dev/nvidia[4-5]\nName=gpu Type=v100 File=/dev/nvidia[0-1]\n"
    )
    cluster.start()
    v100 = cluster.sbatch("--gpus=v100:1", "-o", "v.out", "--wrap", f"{SHOW}; sleep 30")
    a100 = cluster.sbatch("--gpus=a100:1", "-o", "a.out", "--wrap", f"{SHOW}; sleep 30")
    cluster.wait_state(v100, {"RUNNING"})
    cluster.wait_state(a100, {"RUNNING"})
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    assert "   GresUsed=gpu:a100:1(IDX:4),gpu:v100:1(IDX:0)\n" in node
    for out in ("v.out", "a.out"):
        _wait_output(cluster, out)
    cluster.run("scancel", str(v100), str(a100))
    assert (cluster.dir / "v.out").read_text() == "0/0/0/1\n"
    assert (cluster.dir / "a.out").read_text() == "4/4/4/1\n"


def test_neuron_jobs_see_the_cores_of_their_devices(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    # Neuron devices named in gres.conf (absent here: no sysfs, so 2 cores each).
    (cluster.dir / "gres.conf").write_text(
        f"Name=gpu Type=a100 File={cluster.dir}/neuron[0-1]\n"
        f"Name=gpu Type=v100 File={cluster.dir}/neuron[2-3]\n"
    )
    cluster.start()
    show = "echo $SLURM_JOB_GPUS $NEURON_RT_VISIBLE_CORES"
    script = f"{show}; srun --gpus=1 sh -c 'echo $SLURM_STEP_GPUS $NEURON_RT_VISIBLE_CORES'"
    job = cluster.sbatch("--gpus=v100:2", "-o", "n.out", "--wrap", script)
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    assert (cluster.dir / "n.out").read_text().splitlines() == ["2,3 4-7", "2 4-5"]


def test_jobs_run_on_the_cpus_near_their_gpus(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    # GPU 0 is near core 1, GPU 1 near core 0 (files absent here: no isolation).
    (cluster.dir / "gres.conf").write_text(
        f"Name=gpu Type=a100 File={cluster.dir}/gpu0 Cores=1\n"
        f"Name=gpu Type=a100 File={cluster.dir}/gpu1 Cores=0\n"
        f"Name=gpu Type=v100 File={cluster.dir}/gpu[2-3]\n"
    )
    cluster.start()
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    per_socket = int(node.split("CoresPerSocket=")[1].split()[0])  # the host's topology
    sockets = arrayspec.compress(sorted({0 // per_socket, 1 // per_socket}))
    assert f"   Gres=gpu:a100:2(S:{sockets}),gpu:v100:2\n" in node  # the a100s' cores 0, 1
    assert ",gres/gpu=2,gres/gpu=2\n" in node  # CfgTRES reads past the sockets
    where = "grep Cpus_allowed_list /proc/self/status | cut -f2"
    script = (
        f"echo $SLURM_JOB_GPUS $({where}); srun sh -c 'echo step $({where})'; "
        f"srun --cpu-bind=none sh -c 'echo unbound $({where})'; sleep 30"
    )
    first = cluster.sbatch("--gpus=a100:1", "-o", "first.out", "--wrap", script)
    _wait_output(cluster, "first.out")
    first_out = cluster.dir / "first.out"
    cluster.wait_for(lambda: "unbound" in first_out.read_text(), 10, "unbound step")
    second = cluster.sbatch("--gpus=a100:1", "-o", "second.out", "--wrap", script)
    _wait_output(cluster, "second.out")
    cluster.wait_for(lambda: "step" in (cluster.dir / "second.out").read_text(), 10, "step")
    cluster.run("scancel", str(first), str(second))
    cluster.wait_done(first)  # off their CPUs before the next job is given the lowest
    cluster.wait_done(second)
    everywhere = arrayspec.compress(sorted(os.sched_getaffinity(0)))
    # --cpu-bind=none: a step of the pinned job runs on every CPU the agent has.
    assert first_out.read_text().splitlines()[:3] == ["0 1", "step 1", f"unbound {everywhere}"]
    assert (cluster.dir / "second.out").read_text().splitlines()[:2] == ["1 0", "step 0"]
    # A job whose GPUs have no known cores gets the lowest free CPU, as any job.
    third = cluster.sbatch("--gpus=v100:1", "-o", "third.out", "--wrap", f"{where}")
    cluster.wait_done(third)
    assert (cluster.dir / "third.out").read_text().strip() == "0"


def test_gpus_count_in_billing_where_the_partition_weighs_them(
    make_cluster: Callable[..., Cluster],
) -> None:
    weighed = "PartitionName=gpuw Nodes=ALL TRESBillingWeights=CPU=1.0,GRES/gpu=4.0"
    cluster = make_cluster(nodes=1, settings=(*SETTINGS, weighed))
    job = cluster.sbatch("-p", "gpuw", "--gpus=2", "--wrap", "sleep 30")
    cluster.wait_state(job, {"RUNNING"})
    alloc = cluster.run("squeue", "-h", "-j", str(job), "-O", "tres-alloc:100").stdout
    items = dict(item.split("=") for item in alloc.strip().split(","))
    assert items["gres/gpu"] == "2"
    assert int(items["billing"]) == int(items["cpu"]) + 8
    cluster.run("scancel", str(job))


def test_a_job_asks_gpus_of_two_types(make_cluster: Callable[..., Cluster]) -> None:
    """``--gres=gpu:a100:1 --gpus=v100:2``: an A100 and two V100s, each from its own
    type's devices, shown and counted per type as Slurm 22.05 does
    (tests/unit/test_gpu_semantics.py's TYPED_ROWS)."""
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    both = cluster.sbatch(
        "--gres=gpu:a100:1", "--gpus=v100:2", "-o", "both.out", "--wrap", f"{SHOW}; sleep 30"
    )  # fmt: skip
    cluster.wait_state(both, {"RUNNING"})
    shown = cluster.run("scontrol", "show", "job", str(both)).stdout
    assert "   TresPerJob=gres/gpu:v100:2\n" in shown
    assert "   TresPerNode=gres/gpu:a100:1\n" in shown
    tres = shown.split("TRES=")[1].split("\n")[0]
    detail = cluster.run("scontrol", "show", "job", "-d", str(both)).stdout
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    memory = node.split("RealMemory=")[1].split()[0]
    assert (  # Slurm's order: --gpus's request first; no memory asked: the whole node's
        "   JOB_GRES=gpu:v100:2,gpu:a100:1\n"
        f"     Nodes=node1 CPU_IDs=0 Mem={memory} GRES=gpu:v100:2(IDX:2-3),gpu:a100:1(IDX:0)\n"
    ) in detail
    assert ",gres/gpu=3,gres/gpu:a100=1,gres/gpu:v100=2" in tres
    assert "   GresUsed=gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)\n" in node
    _wait_output(cluster, "both.out")
    cluster.run("scancel", str(both))
    cluster.wait_done(both)
    assert (cluster.dir / "both.out").read_text() == "0,2,3/0,2,3/0,2,3/3\n"
    # srun reads SLURM_GPUS_PER_NODE=a100:1,v100:1 back: the step asks both GPUs.
    script = f"{SHOW}; srun sh -c '{SHOW}'"
    listed = cluster.sbatch("--gpus-per-node=a100:1,v100:1", "-o", "list.out", "--wrap", script)
    cluster.wait_done(listed)
    assert (cluster.dir / "list.out").read_text() == "0,2/0,2/0,2/2\n0,2/0,2/0,2/2\n"
    shown = cluster.run("scontrol", "show", "job", str(listed)).stdout
    assert "   TresPerNode=gres/gpu:a100:1,gres/gpu:v100:1\n" in shown
    mixed = cluster.run("sbatch", "--gres=gpu:1", "--gpus=v100:2", "--wrap", "true", check=False)
    assert (mixed.returncode, mixed.stderr) == (
        1,
        "sbatch: error: Invalid GRES specification (with and without type identification)\n",
    )
    never = cluster.run(
        "sbatch", "--gres=gpu:a100:1", "--gpus=v100:3", "--wrap", "true", check=False
    )  # fmt: skip
    assert never.stderr == (
        "sbatch: error: Batch job submission failed: "
        "Requested node configuration is not available\n"
    )
