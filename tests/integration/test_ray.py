"""``corral ray`` with the real ``ray`` package, on a live two-node CPU-only cluster.

The emulated nodes share this host, so a Ray task tells which node it runs on by
``SLURMD_NODENAME``: the Ray worker process inherits the environment of the
step's task on its node. The nodes' GPUs are Gres without device files (no GPU
is needed: Ray counts what it is told). Ray is tuned for a small shared machine
(no dashboard, no log monitor, a 100 MB object store) through corral ray's own
--ray-args and --head-args. Each test takes 30-50 s on 2 shared cores at a load
of 3-7 (2026-12-03), most of it Ray starting. At a load of 10 a Ray node once
failed to start within the 30 s Ray itself allows a raylet to register (a
constant in ray/_private/node.py), and corral ray said so.

Without the ray package these tests are skipped, except under CI (``$CI`` set),
where a missing ray is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.demo import client_command as command
from tests.integration.cluster import Cluster

SETTINGS = ("KillWait=2", "SlurmdTimeout=6")
#: Two GPUs a node (no device files: nothing to fence), of which the job takes one a node.
GPUS = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:2")
RAY_OPTIONS = (
    "--timeout=200",
    "--ray-args=--object-store-memory=100000000 --disable-usage-stats --include-log-monitor=false",
    "--head-args=--include-dashboard=false",
)
#: Ray on 2 shared cores takes 10-60 s to start; the bounds are far above that.
JOB_TIMEOUT = 300

#: Runs a task pinned to each Ray node; checks each node's CPUs against the job's there.
DRIVER = """\
import os, sys
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(logging_level="ERROR", log_to_driver=False)

@ray.remote(num_cpus=1, num_gpus=1)
def where():
    return f"{os.environ['SLURMD_NODENAME']} with GPU {os.environ['CUDA_VISIBLE_DEVICES']}"

def job_cpus():
    counts = []
    for item in os.environ["SLURM_JOB_CPUS_PER_NODE"].split(","):
        number, _, times = item.partition("(x")
        counts += [int(number)] * int(times.rstrip(")") or 1)
    return counts

nodes = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["NodeName"])
pinned = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in nodes]
ran_on = ray.get([where.options(scheduling_strategy=s).remote() for s in pinned])
for node, name, cpus in zip(nodes, ran_on, job_cpus()):
    print(f"{node['NodeName']}: Ray CPUs {node['Resources']['CPU']:g} of the job's {cpus}, "
          f"Ray GPUs {node['Resources'].get('GPU', 0):g}; a task there ran on {name}")
total, allocated = ray.cluster_resources()["CPU"], sum(job_cpus())
print(f"Ray CPUs {total:g}, the job's {allocated}")
sys.exit(3 if total == allocated else 1)  # 3: the status corral ray must pass on
"""

#: Says where it runs and what it sees, then waits to be cancelled.
SLEEPER = """\
import os, time
import ray

ray.init(logging_level="ERROR", log_to_driver=False)
alive = sorted(n["NodeName"] for n in ray.nodes() if n["Alive"])
print(f"driver on {os.environ['SLURMD_NODENAME']} sees {','.join(alive)}", flush=True)
time.sleep(600)
"""


def need_ray() -> None:
    """A skip without the ray package; under CI a failure instead."""
    if importlib.util.find_spec("ray") is None:
        if os.environ.get("CI"):
            raise AssertionError("the ray package is not installed (pip install '.[test]')")
        pytest.skip("the ray package is not installed")


def corral_ray(*driver: str) -> str:
    """``corral ray`` with the tuning options, as a shell command line."""
    return shlex.join([*command("corral"), "ray", *RAY_OPTIONS, "--", *driver])


def test_a_driver_reaches_every_node_and_ray_ends_before_corral_ray_returns(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    need_ray()
    cluster = make_cluster(nodes=2, settings=SETTINGS + GPUS)
    (tmp_path / "driver.py").write_text(DRIVER)
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"{corral_ray('python', 'driver.py')}\n"
        "status=$?\n"
        'echo "corral ray exited $status"\n'
        "squeue -h -s -j $SLURM_JOB_ID -o %j  # the steps still running\n"
        "exit $status\n"
    )
    job = cluster.sbatch(
        "-N2", "--gpus-per-node=1", "-o", "out", "-e", "err", str(script), cwd=tmp_path
    )
    info = cluster.wait_done(job, JOB_TIMEOUT)

    err = (tmp_path / "err").read_text()
    lines = (tmp_path / "out").read_text().splitlines()
    assert len(lines) == 5, (lines, err[-3000:])
    for line, node in zip(lines, ("node1", "node2"), strict=False):
        # Each node's Ray has the job's CPUs there and its one GPU there, not the node's two.
        found = re.fullmatch(
            rf"{node}: Ray CPUs (\d+) of the job's (\d+), Ray GPUs 1; "
            r"a task there ran on (\w+) with GPU 0",
            line,
        )
        assert found and found[1] == found[2] and found[3] == node, (line, err[-3000:])
    assert re.fullmatch(r"Ray CPUs (\d+), the job's \1", lines[2]), lines
    # corral ray exits with the driver's status, and leaves no Ray step running.
    assert lines[3:] == ["corral ray exited 3", "batch"]
    assert (info["state"], info["exit_status"] >> 8) == ("FAILED", 3)
    steps = {step["name"]: step["state"] for step in info["steps"]}
    assert steps == {"ray-head": "COMPLETED", "ray-workers": "COMPLETED"}
    assert "corral ray: Ray is up at " in err
    assert cluster.job_processes(job) == []


def test_under_salloc_it_runs_on_the_first_node_only_the_job_connects_and_scancel_ends_it(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    need_ray()
    cluster = make_cluster(nodes=2, settings=SETTINGS)
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    out = tmp_path / "out"
    with out.open("w") as stdout, (tmp_path / "err").open("w") as stderr:
        salloc = subprocess.Popen(
            [
                *command("salloc"),
                "-N2",
                "-J",
                "ray",
                "sh",
                "-c",
                corral_ray("python", "sleeper.py"),
            ],
            env=cluster.env,
            cwd=tmp_path,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        cluster.wait_for(
            lambda: "sees" in out.read_text() or salloc.poll() is not None,
            JOB_TIMEOUT,
            "the driver did not start",
        )
        # salloc's command runs here; corral ray ran itself, and so the driver, on node1.
        assert out.read_text() == "driver on node1 sees node1,node2\n", (
            tmp_path / "err"
        ).read_text()
        # Token authentication: what is not the job's own cannot reach its Ray.
        up = re.search(r"corral ray: Ray is up at (\S+):", (tmp_path / "err").read_text())
        assert up, (tmp_path / "err").read_text()
        outsider = {k: v for k, v in cluster.env.items() if not k.startswith("RAY_")}
        probe = subprocess.run(
            [str(shutil.which("ray", path=cluster.env["PATH"])), "status", "--address", up[1]],
            env=outsider,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert probe.returncode != 0 and "InvalidAuthToken" in probe.stderr, probe
        (job,) = [j["job_id"] for j in cluster.jobs() if j["name"] == "ray"]
        assert {s["name"] for s in cluster.job(job)["steps"]} == {
            "corral-ray",
            "ray-head",
            "ray-workers",
        }
        cluster.run("scancel", str(job))
        assert salloc.wait(timeout=60) != 0
    finally:
        if salloc.poll() is None:
            salloc.kill()
            salloc.wait()
    assert cluster.wait_done(job)["state"] == "CANCELLED"
    cluster.wait_for(lambda: cluster.job_processes(job) == [], 30, "Ray outlived the job")
