"""Shared GPUs end to end: fractions by memory pack onto one GPU, a whole GPU is
never one in shared use, and each job sees its GPU and its slice of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.integration.cluster import Cluster

#: Where the fake ``nvidia-cuda-mps-control`` lies (it records what it is told).
FAKES = Path(__file__).resolve().parent.parent / "fakes" / "bin"

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
    assert _seen(cluster, "d") == "0/50/0=8192M/"  # half of the GPU's 16G
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


def _with_mps(make_cluster: Callable[..., Cluster], *settings: str) -> tuple[Cluster, Path]:
    """A one-node cluster whose agent finds the fake MPS control program."""
    cluster = make_cluster(nodes=1, settings=SETTINGS + settings, start=False)
    log = cluster.dir / "mps.log"
    cluster.env["PATH"] = f"{FAKES}:{cluster.env['PATH']}"
    cluster.env["FAKE_MPS_LOG"] = str(log)
    cluster.start()
    return cluster, log


def test_the_agent_runs_an_mps_server_while_shares_are_held(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster, log = _with_mps(make_cluster)
    show = (
        "echo $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY; srun printenv CUDA_MPS_PIPE_DIRECTORY"
    )
    first = cluster.sbatch(
        "-p", "share", "--gres=mps:50", "-o", "1.out", "--wrap", f"{show}; sleep 3"
    )
    second = cluster.sbatch("-p", "share", "--gres=gpumem:8G", "-o", "2.out", "--wrap", show)
    cluster.wait_done(second)
    cluster.wait_done(first)
    one, two = ((cluster.dir / f"{n}.out").read_text().split() for n in (1, 2))
    assert one[0] == two[0] == "0"  # both on GPU 0, beside each other
    assert one[1] == one[2] == two[1] == two[2] and one[1].endswith("/mps/node1/gpu0/pipe")
    calls = log.read_text().splitlines()
    # One server for GPU 0, started for the first holder and stopped after the last.
    assert calls == [f"gpu=0 pipe={one[1]} args=-d", f"gpu=0 pipe={one[1]} args= stdin=quit"]


def test_unenforceable_fractions_are_refused_where_the_site_demands_it(
    make_cluster: Callable[..., Cluster],
) -> None:
    demand = "SchedulerParameters=enforce_gpu_fractions"
    cluster = make_cluster(nodes=1, settings=(*SETTINGS, demand))
    result = cluster.run("sbatch", "--gres=gpumem:4G", "--wrap", "true", check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "sbatch: error: Batch job submission failed: "
        "GPU memory fractions cannot be enforced: no node of partition "
        "debug runs MPS (SchedulerParameters=enforce_gpu_fractions)"
    )
    assert cluster.run("squeue", "-h").stdout == ""
    # MPS shares and whole GPUs are not fractions: they still run.
    job = cluster.sbatch("--gres=mps:10", "--wrap", "true")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    # With MPS on the node the same fraction runs, fenced.
    fenced, _ = _with_mps(make_cluster, demand)
    job = fenced.sbatch(
        "--gres=gpumem:4G", "-o", "f.out", "--wrap", "echo $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
    )
    assert fenced.wait_done(job)["state"] == "COMPLETED"
    assert (fenced.dir / "f.out").read_text() == "0=4096M\n"
