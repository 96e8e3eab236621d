"""Shared GPUs end to end: fractions by memory pack onto one GPU, a whole GPU is
never one in shared use, and each job sees its GPU and its slice of it."""

from __future__ import annotations

from collections.abc import Callable

from tests.integration.cluster import Cluster

SETTINGS = (
    "GresTypes=gpu,mps,gpumem,shard",
    "NodeName=DEFAULT Gres=gpu:a100:2,mps:200,gpumem:32G,shard:8",
    # Jobs share the node's CPUs, so that several fit on a small test machine.
    "PartitionName=share Nodes=ALL OverSubscribe=FORCE:8",
    "KillWait=1",
)
SHOW = (
    "echo $CUDA_VISIBLE_DEVICES/${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-}"
    "/${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT:-}/${SLURM_SHARDS_ON_NODE:-}"
)


def _run(cluster: Cluster, name: str, *args: str) -> int:
    job = cluster.sbatch("-p", "share", "-o", f"{name}.out", *args, "--wrap", f"{SHOW}; sleep 60")
    cluster.wait_state(job, {"RUNNING"})
    return job


def _seen(cluster: Cluster, name: str) -> str:
    path = cluster.dir / f"{name}.out"
    cluster.wait_for(lambda: path.exists() and path.read_text().endswith("\n"), 10, name)
    return path.read_text().strip()


def test_fractions_pack_and_whole_gpus_stay_apart(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    jobs = [
        _run(cluster, "a", "--gres=gpumem:10G"),
        _run(cluster, "b", "--gres=gpumem:4G"),  # beside a, on the GPU already shared
        _run(cluster, "c", "--gpus=1"),  # GPU 0 is shared: it gets GPU 1 whole
        _run(cluster, "d", "--gres=mps:50"),
        _run(cluster, "e", "--gres=shard:3"),
    ]
    waiting = cluster.sbatch("-p", "share", "--gres=gpumem:3G", "--wrap", "true")
    assert _seen(cluster, "a") == "0/62/0=10240M/"
    assert _seen(cluster, "b") == "0/25/0=4096M/"
    assert _seen(cluster, "c") == "1///"
    assert _seen(cluster, "d") == "0/50//"
    assert _seen(cluster, "e") == "0///3"
    # 2 GB of GPU 0 left, GPU 1 whole elsewhere: the next fraction waits.
    cluster.wait_for(lambda: cluster.job(waiting)["reason"] == "Resources", 10, "no reason")
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    assert "GresUsed=gpu:a100:1(IDX:1),mps:50(IDX:0),gpumem:14G(IDX:0),shard:3(IDX:0)" in node
    tres = cluster.run("squeue", "-h", "-j", str(jobs[0]), "-O", "tres-alloc:80").stdout
    assert f"gres/gpumem={10 << 30}" in tres and "#" not in tres
    cluster.run("scancel", str(jobs[2]))  # GPU 1 free again: the fraction starts there
    cluster.wait_done(waiting)
    for job in jobs:
        cluster.run("scancel", str(job))


def test_a_share_larger_than_one_gpu_is_refused(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    result = cluster.run("sbatch", "--gres=mps:150", "--wrap", "true", check=False)
    assert result.returncode == 1
    assert "Requested node configuration is not available" in result.stderr
