"""``corral ray [options] -- COMMAND [ARGS...]``: the subcommand, from its options to
the plan and the run (``cli/ray/cluster.py``).

It runs where the driver is to run, on the allocation's first node: in a batch
script it is there already; under salloc, whose command runs on the submitting
host, it runs itself there as a one-task step (a Ray driver reaches the cluster
through the Ray of its own node, so it must run on one of the nodes).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys

from cli.boundary import UsageError
from cli.corral_options import RAY
from cli.demo import client_command
from cli.options import parse
from cli.ray import plan

USAGE = """\
Usage: corral ray [--timeout SECONDS] [--ray-args ARGS] [--head-args ARGS] -- COMMAND [ARGS...]

Inside an allocation (an sbatch script, or salloc): start a Ray head on the first
node and Ray workers on the others (job steps, through srun), each node's Ray given
the CPUs and GPUs the job has there; wait until all have joined; run COMMAND on the
first node with RAY_ADDRESS set; end the steps; exit with COMMAND's status.

--timeout SECONDS   how long to wait for every node's Ray to join (default 120)
--ray-args ARGS     more `ray start` options for every node ("--object-store-memory=...")
--head-args ARGS    more `ray start` options for the head only ("--include-dashboard=false")"""

DEFAULT_TIMEOUT = 120


def _seconds(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"--timeout wants a positive number of seconds, got {value!r}")
    return int(value)


def _ray() -> tuple[str, tuple[str, ...]]:
    """The ``ray`` executable on PATH and the Python that runs it, or UsageError."""
    path = shutil.which("ray")
    if path is None:
        raise UsageError(
            "ray: command not found on PATH: install Ray where the job runs (pip install ray)"
        )
    with open(path, "rb") as script:
        return path, plan.interpreter(script.read(512), path)


def _driver(argv: list[str]) -> list[str]:
    """``argv`` if its program can be run; UsageError before any Ray is started if not."""
    if shutil.which(argv[0]) is None:
        raise UsageError(f"{argv[0]}: command not found")
    return argv


def ray(argv: list[str]) -> int:
    found, driver = parse(RAY, argv)
    timeout = DEFAULT_TIMEOUT
    ray_args: tuple[str, ...] = ()
    head_args: tuple[str, ...] = ()
    for option, value in found:
        if option.key == "help":
            print(USAGE)
            return 0
        if option.key == "timeout":
            timeout = _seconds(value or "")
        elif option.key == "ray-args":
            ray_args = plan.start_options("--ray-args", value or "")
        elif option.key == "head-args":
            head_args = plan.start_options("--head-args", value or "")
    if not driver:
        raise UsageError(f"which command is the driver?\n{USAGE}")
    allocation = plan.allocation(os.environ)
    srun = client_command("srun")
    if os.environ.get("SLURMD_NODENAME") != allocation.head:
        here = [sys.executable, "-m", "cli.corral", "ray"]
        relaunch = plan.relaunch(srun, allocation.head, here, argv)
        os.execv(relaunch[0], relaunch)
    ray_path, python = _ray()
    from cli.ray import cluster

    setup = plan.Plan(
        allocation=allocation,
        ray=ray_path,
        python=python,
        srun=tuple(srun),
        launcher=(sys.executable, "-m", "cli.ray.node"),
        address=f"{cluster.host_address()}:{cluster.free_port()}",
        ray_args=ray_args,
        head_args=head_args,
        token=secrets.token_hex(32),  # as `ray get-auth-token --generate` makes one
    )
    return cluster.run(setup, _driver(driver), timeout)
