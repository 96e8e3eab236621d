"""Fail closed: a job or step whose GPU fence or user switch cannot be set up never runs.

The attack: a node where the device cgroup cannot be made (a cgroup's
``cgroup.max.depth``, a host without cgroup v2, a kernel refusing the
program) used to run the job unfenced, with every GPU of the node; a user
switch that failed half-way could leave the job running as root. Each failure
here is a real one, forced from outside: the agent's cgroups go under a cgroup
of this test's own (``CORRAL_CGROUP_TOP``) whose depth limit makes the job's
cgroup impossible, or under a plain directory where no program attaches; the
user is a uid with no passwd entry.

The GPUs' files are device nodes with the numbers of /dev/zero and /dev/full,
so that a fence is needed on any machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nodeagent import devcgroup
from tests.integration.cluster import Cluster
from tests.integration.test_gpu_isolation import remove_cgroup
from tests.security.asuser import open_cluster, run_as, shared_top

MOUNT = devcgroup.cgroup2_mount()
WHY_NOT = devcgroup.unavailable(devcgroup.default_top())
needs_cgroups = pytest.mark.skipif(WHY_NOT is not None, reason=f"no device isolation: {WHY_NOT}")

#: Jobs tracked by process group: these tests are about the GPU fence alone (a
#: containment cgroup that cannot be made fails the launch too: the test below them).
SETTINGS = (
    "GresTypes=gpu",
    "NodeName=DEFAULT Gres=gpu:2",
    "KillWait=1",
    "ProctrackType=proctrack/pgid",
)
#: A uid no passwd file names.
NO_SUCH_UID = 64999


def _rmtree_cgroups(path: str) -> None:
    if not os.path.isdir(path):
        return
    for name in os.listdir(path):
        child = os.path.join(path, name)
        if os.path.isdir(child):
            _rmtree_cgroups(child)
    remove_cgroup(path)


@pytest.fixture
def shallow_top() -> Iterator[str]:
    """A cgroup of this test's own where cgroups two deep can be made, not three: the
    agent's start-up probe (``TOP/probe.N``) works, a job's ``TOP/node/job_N/step``
    cannot be made."""
    assert MOUNT is not None
    top = os.path.join(MOUNT, f"corral_failclosed{os.getpid()}")
    os.mkdir(top)
    with open(os.path.join(top, "cgroup.max.depth"), "w") as limit:
        limit.write("2")
    # Something in it, so that the agent does not remove it as the last of its cgroups
    # (and then make it anew, without the limit).
    os.mkdir(os.path.join(top, "keep"))
    try:
        yield top
    finally:
        _rmtree_cgroups(top)


def gpu_cluster(make_cluster: Callable[..., Cluster], top: str) -> Cluster:
    """One node, two GPUs whose files are device nodes; cgroups under ``top``."""
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    devices = cluster.dir / "dev"
    devices.mkdir()
    lines = []
    for index, minor in enumerate((5, 7)):  # /dev/zero's and /dev/full's numbers
        node = devices / f"gpu{index}"
        os.mknod(node, 0o666 | 0o020000, os.makedev(1, minor))  # S_IFCHR
        lines.append(f"Name=gpu File={node}\n")
    (cluster.dir / "gres.conf").write_text("".join(lines))
    cluster.env["CORRAL_CGROUP_TOP"] = top
    return cluster.start()


def assert_launch_failed(cluster: Cluster, job: int, why: str) -> None:
    """FAILED, JobLaunchFailure, and the reason (``why``, its start) in SystemComment."""
    info = cluster.wait_done(job)
    assert info["state"] == "FAILED", info
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "JobState=FAILED Reason=JobLaunchFailure" in shown, shown
    assert f"SystemComment={why}" in shown, shown


@needs_cgroups
def test_a_job_whose_gpu_fence_cannot_be_made_never_runs(
    shallow_top: str, make_cluster: Callable[..., Cluster]
) -> None:
    cluster = gpu_cluster(make_cluster, shallow_top)
    assert "GPU isolation on" in cluster.log("nodeagent")
    ran = cluster.dir / "ran"
    job = cluster.sbatch("--gpus=1", "-o", "fence.out", "--wrap", f"touch {ran}")
    assert_launch_failed(cluster, job, "cannot fence GPUs: cgroup ")
    assert not ran.exists()
    said = (cluster.dir / "fence.out").read_text()
    assert said.startswith(f"corral: error: job {job}: launch failed: cannot fence GPUs"), said
    assert "launch failed: cannot fence GPUs" in cluster.log("nodeagent")
    # A step of a job that holds every GPU needs no fence of its own until it asks for
    # fewer: then srun fails at once, in Slurm's words, and its task never runs.
    script = cluster.dir / "steps.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"srun -n1 touch {cluster.dir}/whole\n"
        f"srun -n1 --gpus=1 touch {cluster.dir}/part\n"
        "echo srun exit $?\n"
    )
    job = cluster.sbatch("--gpus=2", "-o", "steps.out", str(script))
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    out = (cluster.dir / "steps.out").read_text()
    assert (cluster.dir / "whole").exists(), out
    assert not (cluster.dir / "part").exists(), out
    assert (
        f"srun: error: Task launch for StepId={job}.1 failed on node node1: cannot fence GPUs"
        in out
    ), out
    assert "srun exit 1" in out, out


@needs_cgroups
def test_a_host_that_cannot_fence_runs_no_job_that_needs_a_fence(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    # Not a cgroup file system: the agent's probe fails at start-up.
    cluster = gpu_cluster(make_cluster, str(tmp_path / "not-a-cgroup"))
    assert "GPU isolation unavailable" in cluster.log("nodeagent")
    ran = cluster.dir / "ran"
    job = cluster.sbatch("--gpus=1", "-o", "fence.out", "--wrap", f"touch {ran}")
    assert_launch_failed(cluster, job, "cannot fence GPUs on node node1: ")
    assert not ran.exists()
    said = (cluster.dir / "fence.out").read_text()
    assert said.startswith(f"corral: error: job {job}: launch failed: cannot fence GPUs on node")
    # Holding every GPU, there is nothing to fence: the job runs.
    job = cluster.sbatch("--gpus=2", "-o", "all.out", "--wrap", f"touch {ran}")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    assert ran.exists()


@needs_cgroups
def test_a_job_whose_containment_cannot_be_made_never_runs(
    shallow_top: str, make_cluster: Callable[..., Cluster]
) -> None:
    """proctrack/cgroup (the default): a job whose cgroup cannot be made is not run
    uncontained, with or without GPUs."""
    cluster = make_cluster(nodes=1, settings=("KillWait=1",), start=False)
    cluster.env["CORRAL_CGROUP_TOP"] = shallow_top
    cluster.start()
    ran = cluster.dir / "ran"
    job = cluster.sbatch("-o", "contain.out", "--wrap", f"touch {ran}")
    assert_launch_failed(cluster, job, "cannot create the job's cgroups: ")
    assert not ran.exists()


@pytest.fixture
def shared() -> Iterator[Path]:
    yield from shared_top()


def test_a_job_whose_user_cannot_be_become_never_runs(users: tuple[str, ...], shared: Path) -> None:
    """A uid with no passwd entry (a container's, a user removed since) submits: the
    node cannot switch to it, and the script never runs, as root or anyone; the
    same for a step of its allocation."""
    cluster = open_cluster(shared, ("KillWait=1",))
    try:
        ran = shared / "work" / "ran"
        done = run_as(
            cluster, NO_SUCH_UID, NO_SUCH_UID, "sbatch", "--parsable", "--wrap", f"touch {ran}"
        )
        assert done.returncode == 0, done.stderr
        job = int(done.stdout.strip())
        assert_launch_failed(cluster, job, f"invalid user id {NO_SUCH_UID}")
        assert not ran.exists()
        assert f"invalid user id {NO_SUCH_UID}" in cluster.log("nodeagent")
        step = run_as(cluster, NO_SUCH_UID, NO_SUCH_UID, "srun", "-n1", "touch", str(ran))
        assert step.returncode != 0
        assert "srun: error: Task launch for StepId=" in step.stderr, step.stderr
        assert f"invalid user id {NO_SUCH_UID}" in step.stderr, step.stderr
        assert not ran.exists()
    finally:
        cluster.stop()
