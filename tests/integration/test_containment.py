"""Jobs contained in cgroups (ProctrackType=proctrack/cgroup, TaskPlugin=task/cgroup).

Real daemons, real cgroups: a process that leaves its job's process group
(setsid) still ends with the job; a job past its memory ends OUT_OF_MEMORY with
Slurm's line in its error file and in sacct; a fork bomb stops at PidsMax; a
pinned job cannot widen its CPUs. Needs root and a cgroup file system (either
layout: pure cgroup v2, or v2 for processes and v1 for the controllers); where
CI is set these fail rather than skip.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nodeagent import cgroups
from tests.databases import fresh_database
from tests.integration.cluster import Cluster

LAYOUT = cgroups.detect()
WHY_NOT = cgroups.unusable(LAYOUT)
if WHY_NOT is not None and os.environ.get("CI"):
    pytest.fail(f"cgroups unusable in CI: {WHY_NOT}", pytrace=False)
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no cgroups: {WHY_NOT}")

SETTINGS = ("KillWait=1", "ProctrackType=proctrack/cgroup", "TaskPlugin=task/cgroup")
CGROUP_CONF = "ConstrainRAMSpace=yes\nConstrainSwapSpace=yes\nConstrainCores=yes\nPidsMax=40\n"
#: Starts a daemon that leaves the job's process group and session, and says its pid.
DAEMON = "setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' </dev/null >/dev/null 2>&1 &"


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as src:
            return src.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def contained(make_cluster: Callable[..., Cluster], *settings: str) -> Cluster:
    """One node, cgroup.conf beside slurm.conf, containment checked on."""
    cluster = make_cluster(nodes=1, settings=(*SETTINGS, *settings), start=False)
    (cluster.dir / "cgroup.conf").write_text(CGROUP_CONF)
    cluster.start()
    assert "jobs contained in cgroups" in cluster.log("nodeagent")
    return cluster


def daemon_pid(cluster: Cluster) -> int:
    path = cluster.dir / "daemon.pid"
    cluster.wait_for(lambda: path.exists() and path.read_text().strip(), 15, "no daemon")
    return int(path.read_text())


def test_a_setsid_daemon_ends_with_its_job(make_cluster: Callable[..., Cluster]) -> None:
    cluster = contained(make_cluster)
    job = cluster.sbatch("-o", "d.out", "--wrap", f"{DAEMON} sleep 1")
    pid = daemon_pid(cluster)
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    cluster.wait_for(lambda: not alive(pid), 10, f"daemon {pid} outlived its job")


def test_setsid_daemons_end_with_their_cancelled_job_and_step(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = contained(make_cluster)
    (cluster.dir / "step.sh").write_text(DAEMON.replace("daemon.pid", "step.pid") + " sleep 1000\n")
    job = cluster.sbatch("-o", "d.out", "--wrap", f"{DAEMON} srun sh step.sh")
    pid = daemon_pid(cluster)
    step = cluster.dir / "step.pid"
    cluster.wait_for(lambda: step.exists() and step.read_text().strip(), 15, "no step daemon")
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"
    for daemon in (pid, int(step.read_text())):
        cluster.wait_for(lambda d=daemon: not alive(d), 10, f"daemon {daemon} outlived its job")
    assert sleepers(cluster.dir) == []


def test_a_contained_job_outlives_an_agent_restart_and_still_ends_whole(
    make_cluster: Callable[..., Cluster],
) -> None:
    """The supervisor keeps the job's cgroups across an agent restart; a cancel from
    the new agent still ends the daemon that left the process group."""
    cluster = contained(make_cluster)
    job = cluster.sbatch("-o", "d.out", "--wrap", f"{DAEMON} sleep 1000")
    pid = daemon_pid(cluster)
    cluster.kill("agent", signal.SIGKILL)
    cluster.start_agent()

    def back() -> bool:
        return cluster.log("controller").count("registered node1") == 2

    cluster.wait_for(back, 20, "the agent did not come back")
    assert alive(pid) and cluster.job(job)["state"] == "RUNNING"
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"
    cluster.wait_for(lambda: not alive(pid), 10, f"daemon {pid} outlived its job")
    assert sleepers(cluster.dir) == []


def sleepers(directory: Path) -> list[int]:
    """The ``sleep`` processes working in ``directory``: what a job left running."""
    found = []
    for name in os.listdir("/proc"):
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            with open(f"/proc/{name}/cmdline", "rb") as src:
                command = src.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if cwd.startswith(str(directory)) and command[:1] == [b"sleep"] and alive(int(name)):
            found.append(int(name))
    return found


@pytest.fixture
def accounted(tmp_path: Path) -> Iterator[Cluster]:
    """A contained node with corral-dbd on SQLite, for sacct."""
    with fresh_database("sqlite", tmp_path) as url:
        cluster = Cluster(tmp_path / "c", 1, SETTINGS, accounting=True, database=url)
        (cluster.dir / "cgroup.conf").write_text(CGROUP_CONF)
        try:
            yield cluster.start()
        finally:
            cluster.stop()


def test_a_job_past_its_memory_ends_out_of_memory(accounted: Cluster) -> None:
    cluster = accounted
    hog = "python3 -c 'x = bytearray(400 << 20); print(len(x))'"
    job = cluster.sbatch("--mem=60M", "-o", "m.out", "--wrap", f"{hog}; echo after")
    done = cluster.wait_done(job)
    assert done["state"] == "OUT_OF_MEMORY"
    out = (cluster.dir / "m.out").read_text()
    line = (
        f"slurmstepd: error: Detected 1 oom_kill event in StepId={job}.batch. "
        "Some of the step tasks have been OOM Killed."
    )
    assert line in out.splitlines()
    assert "after" in out  # the script itself ran on: only the hog was killed

    def in_sacct() -> bool:
        shown = cluster.run("sacct", "-j", str(job), "-X", "-n", "-P", "-o", "State")
        return shown.stdout.strip() == "OUT_OF_MEMORY"

    cluster.wait_for(in_sacct, 20, "sacct does not show OUT_OF_MEMORY")


def test_a_step_past_its_memory_ends_out_of_memory(accounted: Cluster) -> None:
    cluster = accounted
    hog = "python3 -c 'x = bytearray(400 << 20)'"
    job = cluster.sbatch("--mem=60M", "-o", "s.out", "--wrap", f"srun {hog}; echo after")
    assert cluster.wait_done(job)["state"] == "COMPLETED"  # the batch script was not killed
    out = (cluster.dir / "s.out").read_text()
    line = (
        f"slurmstepd: error: Detected 1 oom_kill event in StepId={job}.0. "
        "Some of the step tasks have been OOM Killed."
    )
    assert line in out.splitlines()

    def in_sacct() -> bool:
        shown = cluster.run("sacct", "-j", str(job), "-n", "-P", "-o", "JobID,State")
        return f"{job}.0|OUT_OF_MEMORY" in shown.stdout.splitlines()

    cluster.wait_for(in_sacct, 20, "sacct does not show the step OUT_OF_MEMORY")


def test_a_steps_own_memory_limits_it_within_its_jobs(accounted: Cluster) -> None:
    """srun --mem in a job of 200 MiB: the step is held to its 40 MiB (the batch script
    allocates 100 MiB, the step is killed for the same) and ends OUT_OF_MEMORY while the
    job goes on; a step asking for more than the job has is refused as Slurm does."""
    cluster = accounted
    hog = "python3 -c 'x = bytearray(100 << 20); print(len(x))'"
    script = (
        f"{hog}; srun --mem=40M {hog}; echo step $?; "
        "srun --mem=300M true; echo refused $?; srun --mem-per-cpu=20M true; echo small $?"
    )
    job = cluster.sbatch("--mem=200M", "-o", "m.out", "--wrap", script)
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    out = (cluster.dir / "m.out").read_text().splitlines()
    assert out[0] == str(100 << 20)  # the job's own limit let the batch script have it
    line = (
        f"slurmstepd: error: Detected 1 oom_kill event in StepId={job}.0. "
        "Some of the step tasks have been OOM Killed."
    )
    assert line in out
    assert str(100 << 20) not in out[1:]
    refusal = (
        f"srun: error: Unable to create step for job {job}: "
        "Memory required by task is not available"
    )
    assert refusal in out
    assert "refused 1" in out and "small 0" in out

    def in_sacct() -> bool:
        shown = cluster.run("sacct", "-j", str(job), "-n", "-P", "-o", "JobID,State")
        return {f"{job}.0|OUT_OF_MEMORY", f"{job}.1|COMPLETED"} <= set(shown.stdout.splitlines())

    cluster.wait_for(in_sacct, 20, "sacct does not show the step OUT_OF_MEMORY")


def test_a_fork_bomb_stops_at_pids_max(make_cluster: Callable[..., Cluster]) -> None:
    cluster = contained(make_cluster)
    bomb = (
        "import os, time\n"
        "made = refused = 0\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os.execvp('sleep', ['sleep', '1000'])\n"
        "            os._exit(0)\n"
        "        made += 1\n"
        "    except OSError:\n"
        "        refused += 1\n"
        "print(made, refused, flush=True)\n"
    )
    (cluster.dir / "bomb.py").write_text(bomb)
    job = cluster.sbatch("-o", "b.out", "--wrap", "python3 bomb.py")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    made, refused = map(int, (cluster.dir / "b.out").read_text().split())
    assert made < 40 and refused == 200 - made
    cluster.wait_for(lambda: not sleepers(cluster.dir), 10, "the bomb's children outlived it")


def test_a_pinned_job_cannot_widen_its_cpus(make_cluster: Callable[..., Cluster]) -> None:
    gpu = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:1")
    cluster = make_cluster(nodes=1, settings=(*SETTINGS, *gpu), start=False)
    (cluster.dir / "cgroup.conf").write_text(CGROUP_CONF)
    # The GPU is near core 0 (its file absent here: no device fence), so the job is
    # given CPU 0; it then asks for every CPU of the host.
    (cluster.dir / "gres.conf").write_text(f"Name=gpu Type=a100 File={cluster.dir}/gpu0 Cores=0\n")
    cluster.start()
    widen = (
        "python3 -c 'import os; os.sched_setaffinity(0, range(os.cpu_count())); "
        "print(*sorted(os.sched_getaffinity(0)))'"
    )
    where = "grep Cpus_allowed_list /proc/self/status | cut -f2"
    job = cluster.sbatch("--gpus=a100:1", "-o", "c.out", "--wrap", f"{where}; {widen}")
    assert cluster.wait_done(job)["state"] == "COMPLETED"
    assert (cluster.dir / "c.out").read_text().split() == ["0", "0"]


def test_two_jobs_on_one_node_are_held_to_disjoint_cpus(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = contained(make_cluster)
    half = (os.cpu_count() or 1) // 2  # the node has the host's CPUs: each job half of them
    assert half, "a node of one CPU cannot hold two jobs"
    where = "grep Cpus_allowed_list /proc/self/status | cut -f2"
    jobs = []
    for mine, other in (("a", "b"), ("b", "a")):
        # Each reports its CPUs and those of an unpinned step (still held by its cgroup),
        # then waits (at most 30 s) for the other: both run at once.
        step = f"srun --cpu-bind=none sh -c '{where}'"
        wait = f"for i in $(seq 150); do [ -e {other}.up ] && break; sleep 0.2; done"
        script = f"{where}; {step}; touch {mine}.up; {wait}; [ -e {other}.up ] && echo both"
        jobs.append(cluster.sbatch("-c", str(half), "-o", f"{mine}.out", "--wrap", script))
    for job in jobs:
        assert cluster.wait_done(job)["state"] == "COMPLETED"
    seen = [(cluster.dir / f"{n}.out").read_text().split() for n in ("a", "b")]
    assert [lines[1:] for lines in seen] == [[lines[0], "both"] for lines in seen]
    first, second = (cgroups.cpu_list(lines[0]) for lines in seen)
    assert first == set(range(half)) and second == set(range(half, 2 * half))
