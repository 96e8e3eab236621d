"""``corral ray``'s pure part: the allocation read from SLURM_* variables, each node's
Ray resources, and the command lines of the steps, the check and the launcher."""

from __future__ import annotations

import pytest

from cli.boundary import UsageError
from cli.ray import node, plan

ENV = {
    "SLURM_JOB_ID": "42",
    "SLURM_JOB_NODELIST": "gpu[01-03],cpu7",
    "SLURM_JOB_CPUS_PER_NODE": "8(x2),4,2",
}


def _plan(nodes: tuple[str, ...] = ("gpu01", "gpu02", "gpu03", "cpu7")) -> plan.Plan:
    cpus = (8, 8, 4, 2)[: len(nodes)]
    return plan.Plan(
        allocation=plan.Allocation("42", nodes, cpus),
        ray="/opt/venv/bin/ray",
        python=("/opt/venv/bin/python3",),
        srun=("srun",),
        launcher=("/usr/bin/python3", "-m", "cli.ray.node"),
        address="10.0.0.1:6380",
        ray_args=("--object-store-memory=100000000",),
        head_args=("--include-dashboard=false",),
        token="5eb7",
    )


@pytest.mark.parametrize(
    ("text", "values"),
    [("4", [4]), ("2(x3),1", [2, 2, 2, 1]), ("8(x2),4,2", [8, 8, 4, 2]), ("1,1", [1, 1])],
    ids=["one node", "repeat then single", "repeats and singles", "no repeats"],
)
def test_slurms_per_node_counts_expand(text: str, values: list[int]) -> None:
    assert plan.counts(text) == values


@pytest.mark.parametrize("text", ["", "x", "2(x0)", "2(x", "2(x3", "-1", "2(y3)"])
def test_malformed_per_node_counts_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        plan.counts(text)


def test_the_allocation_is_its_nodes_in_order_with_their_cpus() -> None:
    alloc = plan.allocation(ENV)
    assert alloc == plan.Allocation("42", ("gpu01", "gpu02", "gpu03", "cpu7"), (8, 8, 4, 2))
    assert alloc.head == "gpu01"
    assert alloc.workers == ("gpu02", "gpu03", "cpu7")


def test_outside_an_allocation_it_says_where_to_run() -> None:
    with pytest.raises(UsageError, match=r"not inside an allocation \(SLURM_JOB_ID is not set\)"):
        plan.allocation({"SLURM_JOB_NODELIST": "n1", "SLURM_JOB_CPUS_PER_NODE": "1"})


@pytest.mark.parametrize(
    ("nodelist", "cpus"),
    [("n[1-2]", "4"), ("", "4"), ("n[1-2", "4(x2)"), ("n1", "")],
    ids=["fewer counts than nodes", "no nodes", "bad hostlist", "no counts"],
)
def test_nodes_and_counts_that_disagree_are_refused(nodelist: str, cpus: str) -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": nodelist, "SLURM_JOB_CPUS_PER_NODE": cpus}
    with pytest.raises(UsageError, match="job 7: cannot read its nodes and CPUs"):
        plan.allocation(env)


def test_each_node_reads_its_own_cpus_from_one_list() -> None:
    alloc = plan.Allocation("1", ("n1", "n2", "n3", "n4", "n5"), (4, 4, 2, 4, 1))
    text = alloc.cpus_of(alloc.workers)
    assert text == "n[2,4]=4;n3=2;n5=1"
    assert [plan.node_cpus(text, n) for n in alloc.workers] == [4, 2, 4, 1]
    with pytest.raises(KeyError):
        plan.node_cpus(text, "n1")  # the head is not in the workers' list


def test_the_head_step_is_one_task_on_the_first_node() -> None:
    assert _plan().head_step() == [
        *("srun", "-N1", "-n1", "-w", "gpu01", "--overlap", "-J", "ray-head"),
        *("/usr/bin/python3", "-m", "cli.ray.node", "--cpus", "gpu01=8"),
        *("/opt/venv/bin/ray", "start", "--head", "--block"),
        *("--node-ip-address=10.0.0.1", "--port=6380"),
        "--object-store-memory=100000000",
        "--include-dashboard=false",
    ]


def test_the_workers_are_one_step_with_a_task_on_every_other_node() -> None:
    assert _plan().worker_step() == [
        *("srun", "-N3", "--ntasks-per-node=1", "-x", "gpu01", "--overlap", "-J", "ray-workers"),
        *("/usr/bin/python3", "-m", "cli.ray.node", "--cpus", "gpu02=8;gpu03=4;cpu7=2"),
        *("/opt/venv/bin/ray", "start", "--address=10.0.0.1:6380", "--block"),
        "--object-store-memory=100000000",  # --head-args stay on the head
    ]


def test_a_one_node_allocation_has_no_workers_step() -> None:
    assert _plan(("gpu01",)).worker_step() is None


def test_the_check_waits_for_every_node_and_the_driver_gets_the_address() -> None:
    check = _plan().check()
    assert check[:3] == ["/opt/venv/bin/python3", "-c", plan.CHECK]
    assert check[3:] == ["10.0.0.1:6380", "gpu01", "gpu02", "gpu03", "cpu7"]
    env = _plan().driver_environment({"PATH": "/bin", "RAY_ADDRESS": "elsewhere:1"})
    assert env == {
        "PATH": "/bin",
        "RAY_ADDRESS": "10.0.0.1:6380",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": "5eb7",
    }


def test_ray_processes_get_the_clusters_token_unless_the_job_chose_a_mode() -> None:
    """Without a token anyone who reaches the head's port can run code as the job's user."""
    assert _plan().ray_environment({"HOME": "/h"}) == {
        "HOME": "/h",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": "5eb7",
    }
    own = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/h/t"}
    assert _plan().ray_environment(own) == own
    assert _plan().ray_environment({"RAY_AUTH_MODE": "disabled"}) == {"RAY_AUTH_MODE": "disabled"}


@pytest.mark.parametrize(
    ("env", "gpus"),
    [({"SLURM_GPUS_ON_NODE": "4"}, "4"), ({}, "0"), ({"SLURM_GPUS_ON_NODE": ""}, "0")],
    ids=["the step's GPUs", "none given: 0, not Ray's own count", "empty"],
)
def test_a_node_gets_its_cpus_its_gpus_and_its_slurm_name(env: dict[str, str], gpus: str) -> None:
    assert plan.launch_options("gpu02", 8, env) == [
        "--num-cpus=8",
        f"--num-gpus={gpus}",
        "--node-name=gpu02",
    ]


def test_the_launcher_finds_its_node_in_the_list() -> None:
    argv = ["--cpus", "gpu[02-03]=8;cpu7=2", "/opt/ray", "start", "--block"]
    env = {"SLURMD_NODENAME": "cpu7", "SLURM_GPUS_ON_NODE": "1"}
    assert node.command(argv, env) == [
        *("/opt/ray", "start", "--block"),
        *("--num-cpus=2", "--num-gpus=1", "--node-name=cpu7"),
    ]


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--cpus", "n1=2", "ray", "start"], {}, "usage"),
        (["ray", "start"], {"SLURMD_NODENAME": "n1"}, "usage"),
        (["--cpus", "n2=2", "ray", "start"], {"SLURMD_NODENAME": "n1"}, "no CPU count for n"),
    ],
    ids=["not in a task", "no list", "not in the list"],
)
def test_the_launcher_refuses_what_it_cannot_place(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(SystemExit, match=message):
        node.command(argv, env)


@pytest.mark.parametrize(
    "text",
    [
        "--num-cpus=4",
        "--num-gpus 2",
        "--head",
        "--address=x:1",
        "--port=1",
        "--block",
        "--node-name=a",
        "--node-ip-address=1.2.3.4",
    ],
)
def test_options_corral_ray_sets_are_refused_in_extra_args(text: str) -> None:
    with pytest.raises(UsageError, match=r"--ray-args: --[a-z-]+ is set by corral ray"):
        plan.start_options("--ray-args", f"--disable-usage-stats {text}")


def test_extra_args_are_shell_words() -> None:
    words = plan.start_options("--head-args", "--include-dashboard=false --temp-dir '/a b'")
    assert words == ("--include-dashboard=false", "--temp-dir", "/a b")
    with pytest.raises(UsageError, match="--head-args: No closing quotation"):
        plan.start_options("--head-args", "--temp-dir '/a")


@pytest.mark.parametrize(
    ("head", "python"),
    [
        (b"#!/opt/venv/bin/python3\nimport re\n", ("/opt/venv/bin/python3",)),
        (b"#!/usr/bin/env python3\n", ("/usr/bin/env", "python3")),
        (
            b"#!/bin/sh\n'''exec' \"/a b/python3.11\" \"$0\" \"$@\"\n' '''\n",
            ("/a b/python3.11",),
        ),
    ],
    ids=["pip", "distribution", "pip for a path with spaces"],
)
def test_the_check_runs_on_the_python_that_runs_ray(head: bytes, python: tuple[str, ...]) -> None:
    assert plan.interpreter(head, "/x/ray") == python


@pytest.mark.parametrize("head", [b"\x7fELF\x02\x01", b"#!/bin/bash\nexec ray", b""])
def test_a_ray_without_a_python_line_is_refused(head: bytes) -> None:
    with pytest.raises(UsageError, match="cannot tell which Python runs /x/ray"):
        plan.interpreter(head, "/x/ray")


def test_under_salloc_it_runs_itself_on_the_head_node() -> None:
    argv = plan.relaunch(["srun"], "gpu01", ["python3", "-m", "cli.corral", "ray"], ["--", "d"])
    assert argv == [
        *("srun", "-N1", "-n1", "-w", "gpu01", "--overlap", "-J", "corral-ray"),
        *("python3", "-m", "cli.corral", "ray", "--", "d"),
    ]
