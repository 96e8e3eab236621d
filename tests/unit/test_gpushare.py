"""Sharing GPUs: per-GPU pools of mps, shard and gpumem, how they pack and couple
with whole GPUs, and the variables that bind a job to its share."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller import gpushare
from controller.core.request import gres_fit
from corral import config
from corral.gres import parse_node

SLURM_CONF = """\
ClusterName=pod
SlurmctldHost=ctl
GresTypes=gpu,mps,shard,gpumem
NodeName=n1 CPUs=8 Gres=gpu:a100:2,gpu:v100:1,mps:300,shard:7,gpumem:48G
NodeName=n2 CPUs=8 Gres=shard:4
PartitionName=p Nodes=ALL Default=YES
"""
G = 1 << 30


def _conf(tmp_path: Path, gres_conf: str = "") -> config.SlurmConfig:
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    if gres_conf:
        (tmp_path / "gres.conf").write_text(gres_conf)
    return config.load(str(tmp_path / "slurm.conf"))


def test_shared_counts_split_evenly_over_the_gpus(tmp_path: Path) -> None:
    conf = _conf(tmp_path)
    pools = gpushare.pools(conf, "n1", parse_node(conf.node("n1").gres))
    assert pools == (
        ("gpu", "a100", 2),
        ("gpu", "v100", 1),
        ("mps", "a100#0", 100),
        ("mps", "a100#1", 100),
        ("mps", "v100#2", 100),
        ("shard", "a100#0", 3),  # the first GPUs take the remainder
        ("shard", "a100#1", 2),
        ("shard", "v100#2", 2),
        ("gpumem", "a100#0", 16 * G),
        ("gpumem", "a100#1", 16 * G),
        ("gpumem", "v100#2", 16 * G),
    )
    # Without GPUs a shared GRES is a plain count.
    assert gpushare.pools(conf, "n2", (("shard", "", 4),)) == (("shard", "", 4),)


def test_gres_conf_gives_each_gpu_its_own_count_and_number(tmp_path: Path) -> None:
    conf = _conf(
        tmp_path,
        "NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[4-5]\n"
        "NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia0\n"
        "NodeName=n1 Name=mps Count=200 File=/dev/nvidia4\n"
        "NodeName=n1 Name=mps Count=100 File=/dev/nvidia0\n",
    )
    pools = gpushare.pools(conf, "n1", (("mps", "", 300),))
    assert pools == (("mps", "a100#4", 200), ("mps", "v100#0", 100))


FREE = (
    ("gpu", "a100", 2),
    ("mps", "a100#0", 100),
    ("mps", "a100#1", 40),
    ("gpumem", "a100#0", 16 * G),
    ("gpumem", "a100#1", 6 * G),
)


@pytest.mark.parametrize(
    ("request_", "taken"),
    [
        ((("mps", "", 30),), (("mps", "a100#1", 30),)),  # the fullest pool that fits
        ((("mps", "", 50),), (("mps", "a100#0", 50),)),
        ((("mps", "a100", 50),), (("mps", "a100#0", 50),)),
        ((("mps", "", 101),), None),  # one GPU's pool, never two
        ((("mps", "v100", 1),), None),
        ((("gpumem", "", 5 * G),), (("gpumem", "a100#1", 5 * G),)),
        ((("gpumem", "", 20 * G),), None),
        ((("gpu", "", 1), ("mps", "", 10)), (("gpu", "a100", 1), ("mps", "a100#1", 10))),
    ],
)
def test_a_share_takes_one_pool(
    request_: tuple[tuple[str, str, int], ...], taken: tuple[tuple[str, str, int], ...] | None
) -> None:
    assert gres_fit(request_, FREE) == taken


def test_whole_gpus_and_shares_exclude_each_other() -> None:
    gpus = [("a100", 0), ("a100", 1), ("v100", 2)]
    free = (("gpu", "a100", 1), ("gpu", "v100", 1), ("mps", "a100#0", 100), ("mps", "a100#1", 60))
    # GPU 0 is held whole; GPU 1 has MPS shares in use, so it is no longer free whole.
    assert gpushare.couple(free, whole={0}, shared={1}, gpus=gpus) == (
        ("gpu", "a100", 0),
        ("gpu", "v100", 1),
        ("mps", "a100#0", 0),
        ("mps", "a100#1", 60),
    )
    assert gpushare.couple(free, whole=set(), shared=set(), gpus=gpus) == free


def test_a_share_binds_its_gpu_compute_and_memory() -> None:
    totals = {("mps", "a100#1"): 100, ("gpumem", "a100#3"): 40 * G}
    assert gpushare.shares((("mps", "a100#1", 25),), totals).environment() == {
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
        "CUDA_VISIBLE_DEVICES": "1",
        "GPU_DEVICE_ORDINAL": "1",
        "ROCR_VISIBLE_DEVICES": "1",
        "ZE_AFFINITY_MASK": "1",
    }
    env = gpushare.shares((("gpumem", "a100#3", 10 * G),), totals).environment()
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=10240M"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"  # its share of the memory
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    env = gpushare.shares((("shard", "#0", 2),), {}).environment()
    assert env["SLURM_SHARDS_ON_NODE"] == "2" and env["CUDA_VISIBLE_DEVICES"] == "0"


def test_pool_types_show_their_gpu_type() -> None:
    from corral.gres import shown_type

    assert gpushare.pool_gpu("a100#3") == ("a100", 3)
    assert gpushare.pool_gpu("a100") is None
    assert shown_type("a100#3") == "a100" and shown_type("#0") == ""


def test_cpus_near_the_gpus_come_first() -> None:
    from dataclasses import replace

    from controller.core.devices import cpu_ids, mask
    from controller.core.snapshot import NodeDevices, NodeView
    from tests.unit.scenario import node

    near = ((0, (0, 1, 2, 3)), (1, (0, 1, 2, 3)), (2, (4, 5, 6, 7)))
    gpus = NodeDevices((("a100", 0), ("a100", 1), ("a100", 2), ("a100", 3)), near=near)
    base = replace(node("n1", cpus=8), devices=gpus)

    def held(*ids: int) -> NodeView:
        return replace(base, kept_ids=mask(ids))

    assert cpu_ids(base, 2, 0, (2,)) == (4, 5)
    assert cpu_ids(held(4), 2, 0, (2,)) == (5, 6)
    # Near CPUs run out: the rest come from the other free ones, lowest first.
    assert cpu_ids(held(4), 6, 0, (2,)) == (0, 1, 2, 5, 6, 7)
    assert cpu_ids(held(0, 1, 2, 3), 3, 0, (0, 2)) == (4, 5, 6)
    assert cpu_ids(base, 2, 0, (3,)) == (0, 1)  # GPU 3's cores are unknown: the lowest free
    assert cpu_ids(held(7), 8, 0, (2,)) is None  # too few free


def test_gres_conf_cores_name_the_cpus_of_each_gpu(tmp_path: Path) -> None:
    from controller.gpuaffinity import gpu_cpus

    (tmp_path / "slurm.conf").write_text(
        SLURM_CONF.replace("NodeName=n2 CPUs=8", "NodeName=n2 CPUs=8 ThreadsPerCore=2")
    )
    (tmp_path / "gres.conf").write_text(
        "NodeName=n[1-2] Name=gpu File=/dev/nvidia[0-1] Cores=0-1\n"
        "NodeName=n[1-2] Name=gpu File=/dev/nvidia2 Cores=2-3\n"
    )
    conf = config.load(str(tmp_path / "slurm.conf"))
    assert gpu_cpus(conf, "n1") == {0: (0, 1), 1: (0, 1), 2: (2, 3)}
    # Two threads a core: core c holds CPUs 2c and 2c+1.
    assert gpu_cpus(conf, "n2")[2] == (4, 5, 6, 7)


def test_scontrol_shows_the_sockets_near_each_gpu_type(tmp_path: Path) -> None:
    from controller.gpuaffinity import gpu_sockets, gres_with_sockets

    def shown(node: str, found: str = "") -> str:
        return gres_with_sockets(conf.node(node).gres, gpu_sockets(conf, node), found)

    (tmp_path / "slurm.conf").write_text(
        "ClusterName=c\nSlurmctldHost=h\nGresTypes=gpu,mps\n"
        "NodeName=DEFAULT Sockets=2 CoresPerSocket=4 ThreadsPerCore=1\n"
        "NodeName=n1 Gres=gpu:a100:2,gpu:v100:2,mps:200\n"
        "NodeName=n2 Gres=gpu:h100:8\n"
        "PartitionName=p Nodes=ALL\n"
    )
    (tmp_path / "gres.conf").write_text(
        "NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-3\n"
        "NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia2 Cores=4-5\n"
        "NodeName=n1 Name=gpu Type=v100 File=/dev/nvidia3 Cores=0\n"
    )
    conf = config.load(str(tmp_path / "slurm.conf"))
    assert shown("n1") == "gpu:a100:2(S:0),gpu:v100:2(S:0-1),mps:200"
    # Without Cores=, what the node's agent probed; else nothing.
    assert shown("n2", "gpu:h100:8(S:0-1)") == "gpu:h100:8(S:0-1)"
    assert shown("n2") == "gpu:h100:8"
