"""srun's own heterogeneous jobs on a real two-node cluster with accounting: ``srun a :
b`` outside a job makes a job of one component per group, runs one step spanning
them and gives the job back; inside an ordinary job it runs one step of that job, each
group on the next of its nodes: as Slurm 22.05's srun does (measured on one: slurmctld
and two ``slurmd -N``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from cli.demo import client_command
from corral import hostlist
from tests.integration import mpiprog
from tests.integration.cluster import Cluster

#: What each task prints: its rank, the step's size, the job's and the components'.
EACH = (
    "echo $SLURM_PROCID/$SLURM_NTASKS $SLURM_NODEID $SLURM_HET_SIZE $SLURM_JOB_ID "
    "$SLURM_JOB_ID_PACK_GROUP_1 ${SLURM_JOB_ID_HET_GROUP_1:-none} $SLURM_JOB_NAME"
)


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("srunhet"),
        nodes=2,
        settings=(
            "KillWait=2",
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=task=1,energy=0",
        ),
        accounting=True,
    )
    try:
        yield c.start()
    finally:
        c.stop()


def test_srun_outside_a_job_makes_a_heterogeneous_job_for_its_step(two: Cluster) -> None:
    ran = two.run("srun", "-l", "-J", "hx", "-N1", "-n1", "sh", "-c", EACH, ":", "-N1", "-n2",
                  "sh", "-c", EACH)  # fmt: skip
    assert ran.stderr == "", ran.stderr
    lines = sorted(ran.stdout.splitlines())
    leader = int(lines[0].split()[4])
    # One step over both components, ranks and node ids numbered across them, the
    # leader's job id in every task and each component's as NAME_PACK_GROUP_N only.
    tail = f"2 {leader} {leader + 1} none hx"
    assert lines == [f"0: 0/3 0 {tail}", f"1: 1/3 1 {tail}", f"2: 2/3 1 {tail}"], lines
    first, second = two.jobs(leader)
    assert (first["state"], second["state"]) == ("COMPLETED", "COMPLETED")
    assert first["name"] == second["name"] == "hx"
    assert second["het_job_id"] == leader and second["het_job_offset"] == 1

    def accounted() -> list[str]:
        out = two.run("sacct", "-n", "-P", "-o", "JobID", "-j", str(leader), check=False)
        return out.stdout.split()

    two.wait_for(lambda: len(accounted()) == 4, 15, "no accounting rows")
    assert accounted() == [f"{leader}+0", f"{leader}+0.0", f"{leader}+1", f"{leader}+1.0"]


def test_the_highest_exit_code_and_slurms_line_for_a_failed_part(two: Cluster) -> None:
    ran = two.run("srun", "-n1", "true", ":", "-n1", "sh", "-c", "exit 3", check=False)
    assert ran.returncode == 3
    node = ran.stderr.split(": ")[2]
    assert ran.stderr == f"srun: error: {node}: task 0: Exited with exit code 3\n", ran.stderr


def test_scancel_of_the_job_ends_both_components_and_the_step(two: Cluster) -> None:
    srun = subprocess.Popen(
        [*client_command("srun"), "-J", "hc", "sleep", "60", ":", "sleep", "60"],
        env=two.env,
        cwd=two.dir,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        two.wait_for(
            lambda: (
                [(j["state"], bool(j["steps"])) for j in two.jobs() if j["name"] == "hc"]
                == [("RUNNING", True)] * 2
            ),
            30,
            "no step in both components",
        )
        leader = min(j["job_id"] for j in two.jobs() if j["name"] == "hc")
        rows = two.run("squeue", "-h", "-o", "%i %j %T", "-j", str(leader)).stdout.splitlines()
        assert rows == [f"{leader}+0 hc RUNNING", f"{leader}+1 hc RUNNING"], rows
        two.run("scancel", str(leader))
        _, err = srun.communicate(timeout=30)
    finally:
        srun.kill()
        srun.wait()
    assert srun.returncode != 0, err
    assert two.wait_done(f"{leader}+0")["state"] == "CANCELLED"
    assert two.wait_done(f"{leader}+1")["state"] == "CANCELLED"


def test_a_component_that_cannot_be_had_is_refused_in_slurms_words(two: Cluster) -> None:
    before = len(two.jobs())
    ran = two.run("srun", "-n1", "true", ":", "-p", "nosuch", "-n1", "true", check=False)
    assert ran.returncode == 1
    assert ran.stderr == (
        "srun: error: invalid partition specified: nosuch\n"
        "srun: error: Unable to allocate resources: Invalid partition name specified\n"
    ), ran.stderr
    assert len(two.jobs()) == before


#: What each task of a step in an ordinary job prints: its part, rank, node, job.step.
PART = (
    "echo {} $SLURM_PROCID/$SLURM_NTASKS $SLURM_NODEID ${{SLURM_HET_SIZE:-none}} "
    "$SLURM_JOB_ID.$SLURM_STEP_ID $SLURM_STEP_NODELIST"
)


def test_colon_in_an_ordinary_job_is_one_step_each_group_on_the_next_nodes(two: Cluster) -> None:
    command = (
        f"srun -l -n1 sh -c '{PART.format('a')}' : -n1 sh -c '{PART.format('b')}' | sort; "
        "srun -n1 true : -n1 sh -c 'exit 4'; echo rc=$?; "
        "srun --het-group=0,1 true; echo rc=$?"
    )
    ran = two.run("salloc", "-Q", "-N2", "-n2", "bash", "-c", command, check=False)
    lines = ran.stdout.splitlines()
    job = lines[0].split()[5].split(".")[0]
    # As a real 22.05's: one ordinary step of the job (no SLURM_HET_SIZE), ranks and
    # node ids across the groups, group 0 on the job's first node and group 1 on the next.
    nodes = two.job(job)["nodes"]
    assert lines[:2] == [f"0: a 0/2 0 none {job}.0 {nodes}", f"1: b 1/2 1 none {job}.0 {nodes}"]
    assert lines[2:] == ["rc=4", "rc=1"], lines
    assert ran.stderr == (  # group 1's task by its id in the group, as 22.05's srun says
        f"srun: error: {hostlist.expand(nodes)[1]}: task 0: Exited with exit code 4\n"
        "srun: error: Allocation failure of 2 nodes: job size of 2, already allocated 2 nodes "
        "to previous components.\n"
    ), ran.stderr
    # Recorded as 22.05 records them: a step of its own per group (J.0+0, J.0+1), on
    # its own node, with its own tasks; and accounted so.
    steps = two.job(job)["steps"]
    first, second = hostlist.expand(nodes)
    assert [(s["step_id"], s["het_comp"], s["nodes"], s["ntasks"]) for s in steps] == [
        (0, 0, first, 1), (0, 1, second, 1), (1, 0, first, 1), (1, 1, second, 1)
    ], steps  # fmt: skip

    def accounted() -> list[str]:
        return two.run("sacct", "-n", "-P", "-o", "JobID,NodeList,NTasks,State", "-j", job,
                       check=False).stdout.splitlines()  # fmt: skip

    two.wait_for(lambda: len(accounted()) == 5, 15, "no accounting rows")
    assert accounted()[1:] == [
        f"{job}.0+0|{first}|1|COMPLETED",
        f"{job}.0+1|{second}|1|COMPLETED",
        f"{job}.1+0|{first}|1|COMPLETED",
        f"{job}.1+1|{second}|1|FAILED",
    ], accounted()
    # -j J.S names every part of the step, and so does J.S+N (as 22.05's sacct reads it).
    for named in (f"{job}.1", f"{job}.1+0"):
        rows = two.run("sacct", "-n", "-P", "-o", "JobID", "-j", named).stdout.split()
        assert rows == [f"{job}.1+0", f"{job}.1+1"], (named, rows)


def test_scancel_of_an_ordinary_job_ends_every_part_of_its_step(two: Cluster) -> None:
    salloc = subprocess.Popen(
        [*client_command("salloc"), "-Q", "-J", "mp", "-N2", "-n2", "srun", "-n1", "sleep",
         "60", ":", "-n1", "sleep", "60"],
        env=two.env,
        cwd=two.dir,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        two.wait_for(
            lambda: any(j["name"] == "mp" and j["steps"] for j in two.jobs()), 30, "no step"
        )
        job = next(j for j in two.jobs() if j["name"] == "mp")
        two.wait_for(lambda: len(two.job(job["job_id"])["steps"]) == 2, 10, "not both parts")
        two.run("scancel", str(job["job_id"]))
        _, err = salloc.communicate(timeout=30)
    finally:
        salloc.kill()
        salloc.wait()
    assert salloc.returncode != 0, err
    done = two.wait_done(job["job_id"])
    assert done["state"] == "CANCELLED"
    assert [s["state"] for s in done["steps"]] == ["CANCELLED"] * 2, done["steps"]


def test_a_step_of_parts_is_shown_and_cancelled_as_slurms(two: Cluster) -> None:
    """Measured on a real 22.05 (slurmctld, slurmdbd, two ``slurmd -N``): each part is a
    step ``J.0+N`` in squeue -s and scontrol; ``J.0+N`` typed reads as ``J.0`` there,
    where scontrol shows the first part; sstat shows ``J.0`` as its first part and
    prints nothing for a part named; scancel refuses ``J.0+1`` and ends every part for
    ``J.0``."""
    salloc = subprocess.Popen(
        [*client_command("salloc"), "-Q", "-J", "parts", "-N2", "-n4", "srun", "-N1", "-n1",
         "sleep", "60", ":", "-N1", "-n2", "sleep", "60"],
        env=two.env,
        cwd=two.dir,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        two.wait_for(
            lambda: any(j["name"] == "parts" and len(j["steps"]) == 2 for j in two.jobs()),
            30,
            "no step",
        )
        job = next(j for j in two.jobs() if j["name"] == "parts")
        j = job["job_id"]
        first, second = (s["nodes"] for s in job["steps"])
        listed = [f"{j}.0+0 {first} 1", f"{j}.0+1 {second} 2"]
        for named in (["-j", str(j)], [f"--steps={j}.0"], [f"--steps={j}.0+1"]):
            rows = two.run("squeue", "-h", "-s", "-o", "%i %N %A", *named).stdout
            assert rows.splitlines() == listed, (named, rows)
        for named in (f"{j}.0", f"{j}.0+0", f"{j}.0+1"):
            shown = two.run("scontrol", "-o", "show", "step", named).stdout
            assert shown.startswith(f"StepId={j}.0+0 ") and shown.count("\n") == 1, shown
            assert f" NodeList={first} Nodes=1 " in shown and " Tasks=1 " in shown, shown
        every = two.run("scontrol", "show", "step", f"{j}").stdout
        assert every.count("StepId=") == 2 and f"StepId={j}.0+1 " in every, every
        missing = two.run("scontrol", "show", "step", f"{j}.7+1", check=False)
        assert (missing.returncode, missing.stdout) == (1, f"Job step {j}.7 not found\n")

        def stat(named: str) -> list[str]:
            out = two.run("sstat", "-n", "-P", "-a", "-o", "JobID,NTasks", "-j", named)
            return out.stdout.split()

        two.wait_for(lambda: len(stat(str(j))) == 2, 15, "no samples of both parts")
        assert stat(str(j)) == [f"{j}.0+0|1", f"{j}.0+1|2"]
        assert stat(f"{j}.0") == [f"{j}.0+0|1"]
        part = two.run("sstat", "-n", "-P", "-j", f"{j}.0+1")
        assert (part.stdout, part.stderr) == ("", "")
        refused = two.run("scancel", f"{j}.0+1", check=False)
        assert (refused.returncode, refused.stderr) == (
            1,
            f"scancel: error: Invalid job id {j}.0+1\n",
        )
        assert [s["state"] for s in two.job(j)["steps"]] == ["RUNNING"] * 2
        two.run("scancel", f"{j}.0")
        two.wait_for(
            lambda: [s["state"] for s in two.job(j)["steps"]] == ["CANCELLED"] * 2,
            15,
            "not every part ended",
        )
        salloc.communicate(timeout=30)
    finally:
        salloc.kill()
        salloc.wait()


def test_het_group_outside_a_job_runs_a_plain_job(two: Cluster) -> None:
    """22.05's srun runs ``--het-group=1 prog`` outside a job as a plain job of one
    step (measured: no SLURM_HET_SIZE, the job not heterogeneous)."""
    ran = two.run("srun", "--het-group=1", "-J", "hg1", "-N1", "sh", "-c",
                  "echo $SLURM_JOB_ID ${SLURM_HET_SIZE:-none} $SLURM_STEP_ID")  # fmt: skip
    job, het, step = ran.stdout.split()
    assert (het, step, ran.stderr) == ("none", "0", "")
    record = two.job(job)
    assert (record["name"], record["het_job_id"], record["state"]) == ("hg1", 0, "COMPLETED")
    bad = two.run("srun", "--het-group=x", "true", check=False)
    assert bad.returncode == 1 and "Invalid --het-group value: x" in bad.stderr, bad.stderr


def test_mpi_ranks_wire_up_across_the_groups_of_both_forms(two: Cluster) -> None:
    program = mpiprog.build("mpich", two.dir)
    line = ["srun", "--mpi=pmi2", "-N1", "-n1", str(program), ":", "-N1", "-n2", str(program)]
    own = two.run(*line)  # srun's own heterogeneous job
    inside = two.run("salloc", "-Q", "-N2", "-n4", *line)  # an ordinary job
    for ran in (own, inside):
        ranks = mpiprog.ranks(ran.stdout)
        # One world of three ranks, its PMI fence through srun spanning both groups.
        assert sorted(ranks) == [0, 1, 2], ran
        assert {(size, total) for size, total, _ in ranks.values()} == {(3, 0 + 1 + 2)}
    assert mpiprog.ranks(inside.stdout)[1][2] != mpiprog.ranks(inside.stdout)[0][2]
