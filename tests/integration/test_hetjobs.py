"""Heterogeneous jobs on a real two-node cluster with accounting: the components of
``#SBATCH hetjob`` and of ``:`` start together or not at all, are shown and
accounted as ``J+0``, ``J+1``, give the script SLURM_*_HET_GROUP_N, end with their
leader, and are cancelled whole while pending, as Slurm's scancel insists."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration import mpiprog
from tests.integration.cluster import Cluster

WAIT_FOR_GO = "while [ ! -e go ]; do sleep 0.2; done"


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("het"), nodes=2, settings=("KillWait=2",), accounting=True)
    try:
        yield c.start()
    finally:
        c.stop()


def _env(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_components_start_together_and_show_as_slurm_shows_them(two: Cluster) -> None:
    work = two.dir
    (work / "go").unlink(missing_ok=True)
    blocker = two.sbatch(
        "-D", str(work), "-o", "/dev/null", "--exclusive", "-N1", "--wrap", WAIT_FOR_GO
    )
    two.wait_state(blocker, {"RUNNING"})
    script = work / "het.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH --exclusive -N1 -J het\n#SBATCH hetjob\n#SBATCH --exclusive -N1\n"
        "env > het.env\n"
        "srun sh -c 'echo $SLURMD_NODENAME $SLURM_JOB_ID' > step0.out\n"
        "srun --het-group=1 sh -c 'echo $SLURMD_NODENAME $SLURM_JOB_ID' > step1.out\n"
        "srun --het-group=2 true 2> step2.err || true\n"
    )
    leader = two.sbatch("-D", str(work), "-o", "/dev/null", str(script))
    # One node is free, enough for either component alone: neither may start.
    two.wait_for(lambda: two.job(f"{leader}+0")["reason"] == "Resources", 15, "no reason")
    assert [j["state"] for j in two.jobs(leader)] == ["PENDING", "PENDING"]
    rows = two.run("squeue", "-h", "-o", "%i %j %T", "-j", str(leader)).stdout.splitlines()
    assert rows == [f"{leader}+0 het PENDING", f"{leader}+1 het PENDING"], rows  # as 22.05

    refused = two.run("scancel", f"{leader}+1", check=False)
    assert refused.returncode == 60  # as Slurm 22.05's: the error code (2108) cut to a byte
    assert refused.stderr == (
        f"scancel: error: Kill job error on job id {leader}+1: "
        "Operation not permitted on individual component of heterogeneous job\n"
    ), refused.stderr

    shown = two.run("scontrol", "show", "job", f"{leader}+1").stdout
    assert f"JobId={leader + 1} HetJobId={leader} HetJobOffset=1 JobName=het\n" in shown, shown
    assert f"   HetJobIdSet={leader}-{leader + 1}\n" in shown, shown
    assert " BatchFlag=1 " in shown, shown  # the leader's, as Slurm shows every component

    (work / "go").touch()
    two.wait_done(blocker)
    assert two.wait_done(f"{leader}+0")["state"] == "COMPLETED"
    assert two.wait_done(f"{leader}+1")["state"] == "COMPLETED"
    first, second = two.jobs(leader)
    assert first["start_time"] == second["start_time"]
    assert set(first["nodes"].split(",")) != set(second["nodes"].split(","))
    env = _env(work / "het.env")
    assert env["SLURM_JOB_ID"] == str(leader)
    assert env["SLURM_HET_SIZE"] == env["SLURM_PACK_SIZE"] == "2"
    assert env["SLURM_JOB_ID_PACK_GROUP_1"] == str(leader + 1)
    assert "SLURM_NODELIST_HET_GROUP_1" not in env  # not one of 22.05's per-group names
    assert env["SLURM_JOB_ID_HET_GROUP_1"] == str(leader + 1)
    assert env["SLURM_JOB_NODELIST_HET_GROUP_0"] == first["nodes"]
    assert env["SLURM_JOB_NODELIST_HET_GROUP_1"] == second["nodes"]
    assert env["SLURM_JOB_NUM_NODES_HET_GROUP_1"] == "1"
    assert env["SLURM_JOB_PARTITION_HET_GROUP_1"] == "debug"
    # srun runs in component 0 unless --het-group names another.
    assert (work / "step0.out").read_text() == f"{first['nodes']} {leader}\n"
    assert (work / "step1.out").read_text() == f"{second['nodes']} {leader + 1}\n"
    assert (work / "step2.err").read_text() == (
        "srun: error: Requested het-group offset exceeds highest hetjob index (2 > 1)\n"
    )

    def accounted() -> list[str]:
        out = two.run("sacct", "-n", "-X", "-P", "-o", "JobID", "-S", "now-1hour", check=False)
        return [r for r in out.stdout.split() if r.startswith(f"{leader}+")]

    two.wait_for(lambda: len(accounted()) == 2, 15, "no accounting rows")
    rows = two.run("sacct", "-n", "-P", "-o", "JobID,State", "-S", "now-1hour").stdout.split()
    assert f"{leader}+0|COMPLETED" in rows and f"{leader}+1|COMPLETED" in rows, rows
    assert f"{leader}+0.batch|COMPLETED" in rows and f"{leader}+1.batch|COMPLETED" not in rows
    # -j names the leader: every component, each after it, as Slurm lists them.
    named = two.run("sacct", "-n", "-P", "-o", "JobID", "-j", str(leader)).stdout.split()
    assert named == [
        f"{leader}+0", f"{leader}+0.batch", f"{leader}+0.0", f"{leader}+1", f"{leader}+1.0"
    ], named  # fmt: skip


def test_command_line_components_and_scancel_of_the_leader(two: Cluster) -> None:
    work = two.dir
    (work / "go").unlink(missing_ok=True)
    leader = two.sbatch(
        "-D", str(work), "-o", "/dev/null", "-n1", "-J", "cl", ":", "-n1", "--wrap", WAIT_FOR_GO
    )
    two.wait_state(f"{leader}+0", {"RUNNING"})
    assert two.job(f"{leader}+1")["state"] == "RUNNING"
    assert two.job(f"{leader}+1")["name"] == "cl"  # --job-name propagates
    two.run("scancel", str(leader))
    assert two.wait_done(f"{leader}+0")["state"] == "CANCELLED"
    assert two.wait_done(f"{leader}+1")["state"] == "CANCELLED"


def test_a_component_no_partition_can_hold_is_refused(two: Cluster) -> None:
    before = len(two.jobs())
    refused = two.run("sbatch", "-n1", ":", "-N", "3", "--wrap", "true", check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        "sbatch: error: Batch job submission failed: "
        "Requested node configuration is not available\n"
    ), refused.stderr
    assert len(two.jobs()) == before


#: sbatch --test-only's line for a heterogeneous job, as Slurm 22.05 prints it: the
#: processors summed, the nodes merged, no partition.
WILL_START = re.compile(r"sbatch: Job (\d+) to start at (\S+) using (\d+) processors on (\S+)\n")


def _will_start(two: Cluster, *args: str) -> tuple[int, float, int, str]:
    """sbatch --test-only's answer: the id, the start (seconds from now), processors, nodes."""
    before = len(two.jobs())
    answered = two.run("sbatch", "--test-only", *args, "--wrap", "true")
    assert answered.stdout == "", answered.stdout
    found = WILL_START.fullmatch(answered.stderr)
    assert found, answered.stderr
    assert len(two.jobs()) == before  # nothing submitted
    job_id, when, cpus, nodes = found.groups()
    start = time.mktime(time.strptime(when, "%Y-%m-%dT%H:%M:%S"))
    return int(job_id), start - time.time(), int(cpus), nodes


def test_test_only_plans_every_component_together(two: Cluster) -> None:
    work = two.dir
    (work / "go").unlink(missing_ok=True)
    _, wait, cpus, nodes = _will_start(two, "-w", "node2", "-n1", ":", "-w", "node1", "-n2")
    assert (cpus, nodes) == (3, "node[1-2]") and wait < 5
    blocker = two.sbatch("-o", "/dev/null", "-t", "10", "--exclusive", "-w", "node1",
                         "--wrap", WAIT_FOR_GO)  # fmt: skip
    two.wait_state(blocker, {"RUNNING"})
    # Either component alone fits on node2 now; the two together only once node1 is free.
    _, wait, _, nodes = _will_start(two, "--exclusive", "-N1", ":", "--exclusive", "-N1")
    assert 500 < wait < 700 and nodes == "node[1-2]", (wait, nodes)  # its 10 min, rounded
    refused = two.run("sbatch", "--test-only", "-n1", ":", "-N", "3", "--wrap", "true", check=False)
    assert (refused.returncode, refused.stderr) == (
        1,
        "allocation failure: Requested node configuration is not available\n",
    )
    arrays = two.run("sbatch", "--test-only", "-a", "1-2", "-n1", ":", "-n1", "--wrap", "true",
                     check=False)  # fmt: skip
    assert (arrays.returncode, arrays.stderr) == (
        1,
        "allocation failure: Invalid job array specification\n",
    )  # as a real Slurm 22.05's
    (work / "go").touch()
    two.wait_done(blocker)


@pytest.mark.parametrize("where", [("-a", "1-2", "-n1", ":", "-n1"), ("-n1", ":", "-a", "1-2")])
def test_arrays_of_heterogeneous_jobs_are_refused_in_slurms_words(
    two: Cluster, where: tuple[str, ...]
) -> None:
    before = len(two.jobs())
    refused = two.run("sbatch", *where, "--wrap", "true", check=False)
    assert (refused.returncode, refused.stderr) == (
        1,
        "sbatch: error: Batch job submission failed: Invalid job array specification\n",
    )  # a real Slurm 22.05's words, for an array in any component
    assert len(two.jobs()) == before


def test_salloc_components_and_a_step_in_each(two: Cluster) -> None:
    command = (
        "echo $SLURM_HET_SIZE $SLURM_JOB_ID_HET_GROUP_1 $SLURM_NTASKS "
        "${SLURM_JOB_NODELIST:-none} $SLURM_NODELIST_HET_GROUP_1; "
        "srun --het-group=1 sh -c 'echo $SLURM_JOB_ID'"
    )
    ran = two.run("salloc", "-Q", "-n1", "-J", "al", ":", "-n1", "sh", "-c", command)
    leader = int(ran.stdout.split()[1]) - 1
    nodes = two.job(f"{leader}+1")["nodes"]
    # As Slurm 22.05's salloc: the allocation by component only, the tasks summed.
    assert ran.stdout == f"2 {leader + 1} 2 none {nodes}\n{leader + 1}\n", ran.stdout
    assert two.wait_done(f"{leader}+0")["state"] == "COMPLETED"
    assert two.wait_done(f"{leader}+1")["state"] == "COMPLETED"
    assert two.job(f"{leader}+1")["name"] == "al"


def test_one_step_spanning_components(two: Cluster) -> None:
    each = "echo $SLURM_PROCID/$SLURM_NTASKS $SLURM_HET_SIZE $SLURM_JOB_ID.$SLURM_STEP_ID"
    command = (
        f"srun -l --het-group=0,1 sh -c '{each}' | sort; "
        "srun -l -n1 sh -c 'echo a $SLURM_PROCID $SLURM_NTASKS_HET_GROUP_1; exit 3' "
        ": -n2 sh -c 'echo b $SLURM_PROCID $SLURM_JOB_ID_HET_GROUP_1; exit 2' | sort; "
        "echo rc=${PIPESTATUS[0]}"
    )
    ran = two.run(
        "salloc", "-Q", "-N1", "-n1", "--exclusive", ":", "-N1", "-n2", "bash", "-c", command,
        check=False,
    )  # fmt: skip
    lines = ran.stdout.splitlines()
    leader = int(lines[0].split()[-1].split(".")[0])
    # One step (the same id in each component), its tasks numbered across them, the
    # leader's job id in every task: as a real Slurm 22.05's het step.
    assert lines[:3] == [f"0: 0/3 2 {leader}.0", f"1: 1/3 2 {leader}.0", f"2: 2/3 2 {leader}.0"]
    # srun a : b: each group's program and options; the highest exit code.
    assert lines[3:] == ["0: a 0 2", f"1: b 1 {leader + 1}", f"2: b 2 {leader + 1}", "rc=3"]
    # Failed tasks named by their id in their component, as Slurm's srun names them.
    errors = sorted(line.split(": ", 3)[3] for line in ran.stderr.splitlines())
    assert errors == ["task 0: Exited with exit code 3", "tasks 0-1: Exited with exit code 2"]
    steps = two.run("sacct", "-n", "-P", "-o", "JobID", "-j", str(leader)).stdout.split()
    assert f"{leader}+0.1" in steps and f"{leader}+1.1" in steps, steps


def test_mpi_ranks_wire_up_across_components(two: Cluster) -> None:
    program = mpiprog.build("mpich", two.dir)
    srun = f"srun --mpi=pmi2 -N1 -n1 {program} : -N1 -n2 {program}"
    ran = two.run("salloc", "-Q", "-N1", "-n1", "--exclusive", ":", "-N1", "-n2", "sh", "-c", srun)
    ranks = mpiprog.ranks(ran.stdout)
    # One world of three ranks, its PMI fence through srun spanning both components.
    assert sorted(ranks) == [0, 1, 2], ran
    assert {(size, total) for size, total, _ in ranks.values()} == {(3, 0 + 1 + 2)}
    assert ranks[1][2] == ranks[2][2] != ranks[0][2], ranks
