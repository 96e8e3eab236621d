"""GPU isolation as with Slurm's ConstrainDevices=yes: a job (and each of its steps) can
open the GPU device files it was given and not the others.

gres.conf's ``File=`` lines name device nodes made here with the numbers of
real drivers (/dev/zero, /dev/full, /dev/random, /dev/urandom), so that opening
one that is allowed works on any machine. Not /dev/null's: a job refused that
"GPU" could not open /dev/null either (its stdin: the launch would fail). Needs
root and a cgroup2 mount (the agent confines jobs with the cgroup v2 device
program).
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nodeagent import cgroups, devcgroup
from tests.integration.cluster import Cluster

TOP = devcgroup.default_top()
WHY_NOT = devcgroup.unavailable(TOP)
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no device isolation: {WHY_NOT}")

#: gpu0..gpu3: the numbers of /dev/zero, /dev/full, /dev/random and /dev/urandom
#: (which Python never opens: it has getrandom(2)).
MINORS = (5, 7, 8, 9)
#: gpu0 is an a100, the others v100s: a v100 job gets the node's GPU 1 (its own GPU 0).
SETTINGS = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:1,gpu:v100:3", "KillWait=1")
#: Opens each file named; prints "LABEL NAME ok" or "LABEL NAME <error>".
PROBE = """\
import os, sys
label = sys.argv[1]
for path in sys.argv[2:]:
    try:
        os.close(os.open(path, os.O_RDONLY))
        print(label, os.path.basename(path), "ok", flush=True)
    except OSError as exc:
        print(label, os.path.basename(path), exc.strerror, flush=True)
"""


def remove_cgroup(path: str) -> None:
    """Kill what is left in a cgroup and remove it (after a failure)."""
    kill = os.path.join(path, "cgroup.kill")
    if os.path.exists(kill):
        with open(kill, "w") as sink:
            sink.write("1")
    deadline = time.monotonic() + 5
    while True:
        try:
            os.rmdir(path)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


#: The cgroup of this module's clusters (their agents' ``CORRAL_CGROUP_NAME``).
NAME = f"corral-gpu-{os.getpid()}"


@pytest.fixture
def node_cgroups(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """node1's cgroup directory; checked empty and removed afterwards (ask for it
    before make_cluster, so that this runs once the cluster is stopped)."""
    monkeypatch.setenv(cgroups.NAME_ENV, NAME)
    top = devcgroup.default_top(NAME)
    assert top is not None
    path = os.path.join(top, "node1")
    try:
        yield path
    finally:
        left = os.listdir(path) if os.path.isdir(path) else []
        jobs = [name for name in left if name.startswith("job_")]
        for name in jobs:  # what a failed test left, innermost first
            job = os.path.join(path, name)
            for leaf in os.listdir(job):
                if os.path.isdir(os.path.join(job, leaf)):
                    remove_cgroup(os.path.join(job, leaf))
            remove_cgroup(job)
        for directory in (path, top):
            try:
                os.rmdir(directory)
            except OSError as exc:  # another cluster on this host may use them
                assert exc.errno in (errno.ENOENT, errno.EBUSY, errno.ENOTEMPTY), exc
        assert jobs == [], f"cgroups left behind: {jobs}"


def gpu_cluster(make_cluster: Callable[..., Cluster]) -> tuple[Cluster, str]:
    """One node with four GPUs, their files device nodes; the probe command."""
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    devices = cluster.dir / "dev"
    devices.mkdir()
    lines = []
    for index, minor in enumerate(MINORS):
        node = devices / f"gpu{index}"
        os.mknod(node, 0o666 | 0o020000, os.makedev(1, minor))  # S_IFCHR
        os.chmod(node, 0o666)
        lines.append(f"Name=gpu Type={'a100' if index == 0 else 'v100'} File={node}\n")
    (cluster.dir / "gres.conf").write_text("".join(lines))
    (cluster.dir / "probe.py").write_text(PROBE)
    cluster.start()
    assert "GPU isolation on" in cluster.log("nodeagent")
    files = " ".join(str(devices / f"gpu{i}") for i in range(4))
    return cluster, f"{sys.executable} {cluster.dir / 'probe.py'} LABEL {files} /dev/null /dev/tty0"


def seen(text: str, label: str) -> dict[str, str]:
    """What one probe found: file name -> "ok" or the error."""
    found = {}
    for line in text.splitlines():
        if line.startswith(label + " "):
            _, name, outcome = line.split(" ", 2)
            found[name] = outcome
    return found


def expected(mine: set[int]) -> dict[str, str]:
    gpus = {f"gpu{i}": "ok" if i in mine else "Operation not permitted" for i in range(4)}
    return {**gpus, "null": "ok"}


def without_tty(found: dict[str, str]) -> dict[str, str]:
    """The probe's findings but /dev/tty0's, which may be missing: never refused."""
    assert found.pop("tty0", "ok") != "Operation not permitted"
    return found


def wait_gone(cluster: Cluster, path: str) -> None:
    """Wait until the jobs' cgroups are removed (their supervisors do it as they exit)."""

    def gone() -> bool:
        return not os.path.isdir(path) or not any(n.startswith("job_") for n in os.listdir(path))

    cluster.wait_for(gone, 10, f"job cgroups under {path} were not removed")


def test_a_job_and_its_step_open_only_their_gpus(
    node_cgroups: str, make_cluster: Callable[..., Cluster]
) -> None:
    cluster, probe = gpu_cluster(make_cluster)
    script = cluster.dir / "one.sh"
    script.write_text(
        "#!/bin/sh\n"
        "echo gpus $SLURM_JOB_GPUS $CUDA_VISIBLE_DEVICES\n"
        f"{probe.replace('LABEL', 'batch')}\n"
        "srun -n1 sh -c 'echo stepgpus $SLURM_STEP_GPUS $CUDA_VISIBLE_DEVICES; "
        f"{probe.replace('LABEL', 'step')}'\n"
        "srun -n1 sh -c 'echo procs $(cat /proc/self/cgroup)'\n"
    )
    job = cluster.sbatch("--gpus=v100:1", "-o", "one.out", str(script))
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    # A job without GPUs may open none of them, whatever grants its submitter's
    # environment carries (sbatch run inside a GPU job, or forged).
    forged = {
        "SLURM_JOB_GPUS": "0,1,2,3",
        "SLURM_STEP_GPUS": "0,1,2,3",
        "CUDA_VISIBLE_DEVICES": "0",
        "SLURM_SHARDS_ON_NODE": "1",
    }
    submitted = cluster.run(
        "sbatch", "--parsable", "-o", "none.out", "--wrap", probe.replace("LABEL", "none"),
        env=forged,
    )  # fmt: skip
    none = int(submitted.stdout.strip())
    assert cluster.wait_done(none)["state"] == "COMPLETED"
    out = (cluster.dir / "one.out").read_text()
    lines = out.splitlines()
    assert lines[0] == "gpus 1 0", out  # the node's GPU 1, the job's GPU 0
    assert "stepgpus 1 0" in lines, out
    assert without_tty(seen(out, "batch")) == expected({1}), out
    assert without_tty(seen(out, "step")) == expected({1}), out
    assert f"0::/{NAME}/node1/job_{job}/step_1" in out  # the second step's own cgroup
    nothing = (cluster.dir / "none.out").read_text()
    assert without_tty(seen(nothing, "none")) == expected(set()), nothing
    wait_gone(cluster, node_cgroups)


def test_a_step_opens_only_the_gpus_it_asked_for(
    node_cgroups: str, make_cluster: Callable[..., Cluster]
) -> None:
    cluster, probe = gpu_cluster(make_cluster)
    script = cluster.dir / "two.sh"
    script.write_text(
        "#!/bin/sh\n"
        "echo gpus $SLURM_JOB_GPUS $CUDA_VISIBLE_DEVICES\n"
        f"{probe.replace('LABEL', 'batch')}\n"
        "srun -n1 --gpus=1 sh -c 'echo stepgpus $SLURM_STEP_GPUS $CUDA_VISIBLE_DEVICES; "
        f"{probe.replace('LABEL', 'step')}'\n"
    )
    job = cluster.sbatch("--gpus=2", "-o", "two.out", str(script))
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    out = (cluster.dir / "two.out").read_text()
    lines = out.splitlines()
    assert lines[0] == "gpus 0,1 0,1", out
    assert without_tty(seen(out, "batch")) == expected({0, 1}), out
    step = [line.split() for line in lines if line.startswith("stepgpus ")]
    assert len(step) == 1 and step[0][1] in ("0", "1") and step[0][2] == "0", out
    assert without_tty(seen(out, "step")) == expected({int(step[0][1])}), out
    wait_gone(cluster, node_cgroups)


def test_gres_conf_files_that_are_no_devices_confine_nothing(
    make_cluster: Callable[..., Cluster], tmp_path: Path
) -> None:
    """The GPUs' files missing (not a GPU host): no device cgroup, jobs run as before
    (not contained either: ProctrackType=proctrack/pgid)."""
    cluster = make_cluster(
        nodes=1, settings=(*SETTINGS, "ProctrackType=proctrack/pgid"), start=False
    )
    (cluster.dir / "gres.conf").write_text(f"Name=gpu File={tmp_path}/missing[0-3]\n")
    cluster.start()
    job = cluster.sbatch("-o", "cg.out", "--wrap", "cat /proc/self/cgroup")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    assert "corral" not in (cluster.dir / "cg.out").read_text()
