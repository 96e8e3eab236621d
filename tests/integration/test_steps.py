"""Job steps end to end: srun in batch jobs (multi-node too), salloc and on its own;
squeue -s, scontrol show step, scancel N.S, -b and --full, srun -K, --signal's timing,
sacct's step rows; Slurm's words for failures."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.demo import client_command
from tests.integration.cluster import Cluster

SETTINGS = ("KillWait=2", "SlurmdTimeout=6", "SchedulerParameters=bf_interval=1")


@pytest.fixture
def four(tmp_path: Path) -> Iterator[Cluster]:
    """Four emulated nodes (the test machine's CPUs each)."""
    c = Cluster(tmp_path, nodes=4, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def batch(cluster: Cluster, script: str, *args: str) -> tuple[dict[str, object], str]:
    """Run ``script`` as a batch job to its end: (the job record, its output)."""
    path = cluster.dir / f"job-{len(list(cluster.dir.glob('job-*')))}.sh"
    path.write_text("#!/bin/bash\n" + script)
    job_id = cluster.sbatch(*args, "-o", str(cluster.dir / "out-%j.txt"), str(path))
    job = cluster.wait_done(job_id, 60)
    return job, (cluster.dir / f"out-{job_id}.txt").read_text()


def test_srun_runs_every_task_with_its_slurm_variables(four: Cluster) -> None:
    script = (
        "srun -l sh -c 'echo $SLURM_PROCID/$SLURM_LOCALID/$SLURM_NODEID "
        "$SLURMD_NODENAME $SLURM_STEP_ID $SLURM_STEP_NUM_TASKS $SLURM_STEP_NODELIST "
        "$SLURM_STEP_TASKS_PER_NODE'\n"
    )
    job, out = batch(four, script, "-N2", "--ntasks-per-node=2")
    assert job["state"] == "COMPLETED"
    lines = sorted(out.splitlines())
    assert lines == [
        "0: 0/0/0 node1 0 4 node[1-2] 2(x2)",
        "1: 1/1/0 node1 0 4 node[1-2] 2(x2)",
        "2: 2/0/1 node2 0 4 node[1-2] 2(x2)",
        "3: 3/1/1 node2 0 4 node[1-2] 2(x2)",
    ]


def test_a_step_has_all_the_jobs_cpus_unless_it_asks_exact(four: Cluster) -> None:
    """Slurm 22.05's srun(1): a step gets every CPU of the job on its nodes, so a
    second one waits for it; --exact (and -c, which implies it) gives only what the
    tasks ask, and such steps run side by side."""
    script = (
        "srun -n1 sh -c 'echo whole=$SLURM_CPUS_ON_NODE'\n"
        "srun --exact -n1 sh -c 'echo exact=$SLURM_CPUS_ON_NODE'\n"
        "srun -c1 -n1 sh -c 'echo c=$SLURM_CPUS_ON_NODE'\n"
        "srun -n1 sleep 2 &\n"
        "sleep 0.5\n"
        "srun -n1 true\n"
        "wait\n"
    )
    job, out = batch(four, script, "-N1", "-n2")
    assert job["state"] == "COMPLETED"
    assert out.splitlines()[:3] == ["whole=2", "exact=1", "c=1"]
    assert (
        f"srun: Job {job['job_id']} step creation temporarily disabled, retrying "
        "(Requested nodes are busy)"
    ) in out


def test_unbuffered_tasks_write_to_a_terminal_and_cpu_bind_none_is_accepted(
    four: Cluster,
) -> None:
    """srun -u runs the tasks' stdout on a pseudo-terminal (their C library flushes each
    line), with no "\r" added; without it stdout is a pipe."""
    tty = "python3 -c 'import os; print(os.isatty(1), flush=True)'"
    script = (
        f"srun -u -n2 -l {tty}\n"
        f"srun -n1 {tty}\n"
        "srun --cpu-bind=none --mpi=none -n1 true && echo bound=none\n"
    )
    job, out = batch(four, script, "-n2")
    assert job["state"] == "COMPLETED", out
    assert sorted(out.splitlines()) == ["0: True", "1: True", "False", "bound=none"], repr(out)


def test_exit_codes_stdin_files_and_an_oversized_step(four: Cluster) -> None:
    script = (
        "echo hello | srun -n2 cat\n"
        "srun -n2 -o task-%t.txt sh -c 'echo I am $SLURM_PROCID'\n"
        "srun -n99 true\n"
        "echo oversized=$?\n"
        "srun -n2 sh -c 'exit $SLURM_PROCID'\n"
        "echo failed=$?\n"
        "srun -n2 sh -c 'exit 3'\n"
    )
    job, out = batch(four, script, "-n2")
    assert out.count("hello") == 2  # stdin reaches every task, as srun forwards it
    assert (four.dir / "task-0.txt").read_text() == "I am 0\n"
    assert (four.dir / "task-1.txt").read_text() == "I am 1\n"
    job_id = job["job_id"]
    assert (
        f"srun: error: Unable to create step for job {job_id}: "
        "More processors requested than permitted"
    ) in out
    assert "oversized=1" in out
    assert "srun: error: node1: task 1: Exited with exit code 1" in out
    assert "failed=1" in out
    assert "srun: error: node1: tasks 0-1: Exited with exit code 3" in out
    assert job["state"] == "FAILED" and job["exit_status"] >> 8 == 3


def test_kill_on_bad_exit_terminates_the_other_tasks(four: Cluster) -> None:
    """``-K``: task 0's exit 3 gets task 1 a TERM it can trap (KILL only after KillWait)."""
    script = (
        "srun -n2 -K sh -c 'if [ $SLURM_PROCID = 0 ]; then sleep 1; exit 3; fi; "
        'trap "echo task 1 got TERM; exit 7" TERM; while :; do sleep 0.1; done\'\n'
        "echo srun=$?\n"
    )
    job, out = batch(four, script, "-n2")
    assert f"srun: Terminating StepId={job['job_id']}.0" in out
    assert "task 1 got TERM" in out
    assert "srun: error: node1: task 0: Exited with exit code 3" in out
    assert "srun=7" in out


def test_steps_are_listed_cancelled_and_accounted(four: Cluster) -> None:
    script = "srun -n1 --overlap sleep 60 &\nsrun -n1 --overlap sleep 60\nwait\n"
    path = four.dir / "steps.sh"
    path.write_text("#!/bin/bash\n" + script)
    job_id = four.sbatch("-n2", "-o", str(four.dir / "steps.out"), str(path))

    def listed() -> list[str]:
        out = four.run("squeue", "-s", "-h", "-o", "%i %j %N").stdout
        return sorted(out.split("\n")[:-1])

    four.wait_for(lambda: len(listed()) == 3, 30, "two steps and the batch step not listed")
    assert listed() == [
        f"{job_id}.0 sleep node1",
        f"{job_id}.1 sleep node1",
        f"{job_id}.batch batch node1",
    ]
    shown = four.run("scontrol", "show", "step", f"{job_id}.0").stdout
    assert shown.startswith(f"StepId={job_id}.0 UserId=0 ")
    assert "State=RUNNING" in shown and "Tasks=1 Name=sleep" in shown
    missing = four.run("scancel", f"{job_id}.99", check=False)
    assert missing.returncode == 1
    assert missing.stderr == (
        f"scancel: error: Kill job error on job step id {job_id}.99: Invalid job id specified\n"
    )
    four.run("scancel", f"{job_id}.0")
    four.wait_for(lambda: len(listed()) == 2, 20, "the cancelled step is still listed")
    four.run("scancel", f"{job_id}.1")
    job = four.wait_done(job_id, 30)
    assert job["state"] in ("COMPLETED", "FAILED")
    states = {s["step_id"]: s["state"] for s in job["steps"]}
    assert states == {0: "CANCELLED", 1: "CANCELLED"}
    ended = four.run("srun", f"--jobid={job_id}", "true", check=False)
    assert ended.returncode == 1
    assert ended.stderr == (
        f"srun: error: Unable to create step for job {job_id}: "
        "Job/step already completing or completed\n"
    )


def test_signals_reach_the_steps_not_the_batch_shell(four: Cluster) -> None:
    script = (
        "trap 'echo shell got USR1' USR1\n"
        "srun sh -c \"trap 'echo task got USR1; exit 0' USR1; "
        'echo ready; while true; do sleep 0.1; done"\n'
        "echo after srun\n"
    )
    path = four.dir / "signal.sh"
    path.write_text("#!/bin/bash\n" + script)
    out = four.dir / "signal.out"
    job_id = four.sbatch("-o", str(out), str(path))
    four.wait_for(lambda: out.exists() and "ready" in out.read_text(), 30, "no ready")
    four.run("scancel", "--signal=USR1", str(job_id))
    four.wait_done(job_id, 30)
    text = out.read_text()
    assert "task got USR1" in text and "after srun" in text
    assert "shell got USR1" not in text


def test_a_two_node_batch_job_launches_one_task_per_node_as_torchrun_does(
    four: Cluster,
) -> None:
    """The usual multi-node launch: the first host from ``scontrol show hostnames``
    as the rendezvous address, one task per node that knows its node rank."""
    script = (
        'scontrol show hostnames "$SLURM_JOB_NODELIST"\n'
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        "srun -N2 --ntasks-per-node=1 sh -c "
        "'echo $SLURMD_NODENAME rank=$SLURM_NODEID proc=$SLURM_PROCID of $SLURM_NTASKS "
        "master='$head\n"
    )
    job, out = batch(four, script, "-N2")
    assert job["state"] == "COMPLETED"
    lines = out.splitlines()
    assert lines[:2] == ["node1", "node2"]
    assert sorted(lines[2:]) == [
        "node1 rank=0 proc=0 of 2 master=node1",
        "node2 rank=1 proc=1 of 2 master=node1",
    ]


def test_scancel_batch_and_full_signal_the_batch_shell(four: Cluster) -> None:
    """``-b``: the batch shell alone; ``--full``: the shell and the steps."""
    script = (
        "trap 'echo shell got USR1' USR1\n"
        "trap 'echo shell got USR2' USR2\n"
        "srun sh -c \"trap 'echo task got USR1' USR1; trap 'echo task got USR2; exit 0' USR2; "
        'echo ready; while true; do sleep 0.1; done" &\n'
        "until wait; do :; done\n"  # a trapped signal interrupts ``wait``
    )
    path = four.dir / "full.sh"
    path.write_text("#!/bin/bash\n" + script)
    out = four.dir / "full.out"
    job_id = four.sbatch("-o", str(out), str(path))
    four.wait_for(lambda: out.exists() and "ready" in out.read_text(), 30, "no ready")
    four.run("scancel", "-b", "--signal=USR1", str(job_id))
    four.wait_for(lambda: "shell got USR1" in out.read_text(), 10, "the shell missed USR1")
    four.run("scancel", "--full", "--signal=USR2", str(job_id))
    assert four.wait_done(job_id, 30)["state"] == "COMPLETED"
    text = out.read_text()
    assert "shell got USR2" in text and "task got USR2" in text
    assert "task got USR1" not in text


def test_salloc_and_srun_outside_an_allocation(four: Cluster) -> None:
    done = four.run("srun", "-N2", "-l", "sh", "-c", "echo $SLURMD_NODENAME")
    assert sorted(done.stdout.splitlines()) == ["0: node1", "1: node2"]
    done = four.run("salloc", "-N2", "sh", "-c", "echo $SLURM_JOB_NUM_NODES; srun -N2 hostname")
    lines = done.stdout.splitlines()
    assert lines[0] == "2" and len(lines) == 3
    assert "salloc: Granted job allocation" in done.stderr
    assert "salloc: Relinquishing job allocation" in done.stderr
    # No command: the user's shell, with the allocation's environment; its status is salloc's.
    shell = four.run(
        "salloc",
        "-N1",
        input="echo job=$SLURM_JOB_ID nodes=$SLURM_JOB_NODELIST\nexit 3\n",
        env={"SHELL": "/bin/sh"},
        check=False,
    )
    assert shell.returncode == 3, shell.stderr
    assert shell.stdout.startswith("job=") and "nodes=node" in shell.stdout, shell.stdout
    failed = four.run("srun", "-n1", "false", check=False)
    assert failed.returncode == 1
    assert "srun: error: node1: task 0: Exited with exit code 1" in failed.stderr
    jobs = four.jobs()
    assert {j["state"] for j in jobs} == {"COMPLETED", "FAILED"}, jobs
    assert all(not j["batch_flag"] for j in jobs)


def test_ctrl_c_twice_stops_the_step(four: Cluster) -> None:
    srun = subprocess.Popen(
        [*client_command("srun"), "-n2", "sleep", "60"],
        env=four.env,
        cwd=four.dir,
        stderr=subprocess.PIPE,
        text=True,
    )
    four.wait_for(
        lambda: any(j["state"] == "RUNNING" and j["steps"] for j in four.jobs()), 30, "no step"
    )
    srun.send_signal(signal.SIGINT)
    time.sleep(0.3)  # two signals sent at once would arrive as one
    srun.send_signal(signal.SIGINT)
    _, err = srun.communicate(timeout=30)
    assert srun.returncode != 0
    assert "srun: interrupt (one more within 1 sec to abort)" in err
    assert "srun: sending Ctrl-C to StepId=" in err


#: What snakemake-executor-plugin-slurm-jobstep keeps of SLURM_* for its srun (its
#: ``keep_slurm``), for a job that is not an array task; SLURM_CONF is not among them.
IDENTITY = (
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_CLUSTER_NAME",
    "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST",
)


def test_an_srun_that_lost_slurm_conf_reaches_its_own_cluster(tmp_path: Path) -> None:
    """As in Slurm's configless mode, the node publishes the configuration it runs
    with and a client without SLURM_CONF finds it: an srun run with ``env -i`` and
    only the job's identity (and PATH, PYTHONPATH) starts its step in its own job."""
    c = Cluster(tmp_path, nodes=1, settings=SETTINGS).start()
    try:
        keep = " ".join(f'{name}="${name}"' for name in IDENTITY)
        script = (
            f'env -i PATH="$PATH" PYTHONPATH="$PYTHONPATH" {keep} '
            "srun -n1 sh -c 'echo step $SLURM_STEP_ID of $SLURM_JOB_ID'\n"
        )
        job, out = batch(c, script)
        assert (job["state"], out) == ("COMPLETED", f"step 0 of {job['job_id']}\n")
    finally:
        c.stop()


def test_srun_with_no_cluster_configured_fails_with_slurms_words(tmp_path: Path) -> None:
    env = {**os.environ, "SLURM_CONF": str(tmp_path / "missing.conf"), "SLURM_JOB_ID": "7"}
    done = subprocess.run(
        [*client_command("srun"), "true"], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    assert done.stderr == (
        f"srun: error: {tmp_path / 'missing.conf'}: cannot read: No such file or directory\n"
        "srun: fatal: Unable to process configuration file\n"
    )


@pytest.mark.parametrize(
    ("name", "due", "earliest", "latest"), [("USR1", 58, 0, 6), ("USR2", 45, 10, 20)]
)
def test_signal_option_reaches_the_steps_when_due(
    four: Cluster, name: str, due: int, earliest: int, latest: int
) -> None:
    """``-t 1 --signal=SIG@T``: the step, not the batch shell, gets SIG 60 - T seconds
    after the start: neither at once nor T seconds in (timestamps from the trap)."""
    script = (
        f"trap 'echo shell got {name}' {name}\n"
        'srun sh -c "echo start $(date +%s.%N); '
        f"trap 'echo got \\$(date +%s.%N); exit 0' {name}; "
        'while true; do sleep 0.1; done"\n'
    )
    job, out = batch(four, script, "-t", "1", f"--signal={name}@{due}")
    assert job["state"] == "COMPLETED" and "shell got" not in out
    times = dict(line.split() for line in out.splitlines() if line.startswith(("start", "got")))
    assert earliest <= float(times["got"]) - float(times["start"]) <= latest, out


def test_sacct_lists_each_step_with_its_own_record(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, nodes=2, settings=SETTINGS, accounting=True)
    try:
        cluster.start()
        big = (
            'srun -n2 python3 -c "import os; '
            "x = bytearray((80 if os.environ['SLURM_PROCID'] == '0' else 1) << 20)\"\n"
        )
        job, _ = batch(cluster, big + "srun -n2 true\nsrun -n1 sh -c 'exit 4'\n", "-n2")
        rows = cluster.run(
            "sacct",
            "-j",
            str(job["job_id"]),
            "-P",
            "-n",
            "-o",
            "JobID,JobName,State,ExitCode,NTasks",
        ).stdout.splitlines()
        job_id = job["job_id"]
        assert rows == [
            f"{job_id}|job-0.sh|FAILED|4:0|",
            f"{job_id}.batch|batch|FAILED|4:0|1",
            f"{job_id}.0|python3|COMPLETED|0:0|2",
            f"{job_id}.1|true|COMPLETED|0:0|2",
            f"{job_id}.2|sh|FAILED|4:0|1",
        ]
        use = cluster.run(
            "sacct", "-j", f"{job_id}.0", "-P", "-n", "--units=M", "-o", "MaxRSS,AveRSS"
        ).stdout.strip()
        max_rss, ave_rss = (float(v.rstrip("M")) for v in use.split("|"))
        assert max_rss >= 80 and max_rss / 2 <= ave_rss < max_rss  # task 0's, and the mean
    finally:
        cluster.stop()


def test_prolog_flags_contain_gives_each_job_an_extern_step(tmp_path: Path) -> None:
    cluster = Cluster(
        tmp_path, nodes=2, settings=(*SETTINGS, "PrologFlags=Contain"), accounting=True
    )
    try:
        cluster.start()
        job, _ = batch(cluster, "true\n", "-N2")
        rows = cluster.run(
            "sacct", "-j", str(job["job_id"]), "-P", "-n", "-o", "JobID,State,NNodes,NTasks"
        ).stdout.splitlines()
        job_id = job["job_id"]
        assert rows == [
            f"{job_id}|COMPLETED|2|",
            f"{job_id}.batch|COMPLETED|1|1",
            f"{job_id}.extern|COMPLETED|2|2",
        ]
    finally:
        cluster.stop()


def test_a_step_outlives_a_controller_crash_and_is_recorded(four: Cluster) -> None:
    """kill -9 the controller while srun's tasks run: their output still reaches srun
    (it comes straight from the nodes), and the restarted controller records the end:
    the step's before the job's, though both ended while it was down."""
    script = "srun -n2 -l sh -c 'sleep 3; echo done $SLURM_PROCID'\n"
    path = four.dir / "crash.sh"
    path.write_text("#!/bin/bash\n" + script)
    out = four.dir / "crash.out"
    job_id = four.sbatch("-n2", "-o", str(out), str(path))
    # Once the tasks run, their runner has reached srun: srun had its StepCreate answer
    # (a controller killed before answering leaves srun nothing to wait for).
    started = f"spool/*/step{job_id}.0/started"
    four.wait_for(lambda: any(four.dir.glob(started)), 30, "the step's tasks did not start")
    four.kill("controller", signal.SIGKILL)
    four.wait_for(lambda: out.exists() and len(out.read_text().splitlines()) == 2, 30, "output")
    time.sleep(1)  # the batch script ends too
    four.start_controller()
    job = four.wait_done(job_id, 60)
    assert job["state"] == "COMPLETED"
    assert sorted(out.read_text().splitlines()) == ["0: done 0", "1: done 1"]
    (step,) = job["steps"]
    assert (step["step_id"], step["state"], step["ntasks"]) == (0, "COMPLETED", 2)


def test_a_step_launch_lost_with_its_agent_fails_the_step(four: Cluster) -> None:
    """The controller sends a step's launch to an agent that dies before reading it:
    the new agent's hello does not name the step, and the step fails (srun exits non-zero
    with the node's tasks never started) instead of srun waiting for ever."""
    job_id = four.sbatch("-N1", "--wrap", "sleep 60")
    four.wait_for(lambda: four.job_processes(job_id), 30, "the job's script never ran")
    four.kill("agent", signal.SIGSTOP)
    srun = subprocess.Popen(
        [*client_command("srun"), f"--jobid={job_id}", "--overlap", "-n1", "echo", "launched"],
        env=four.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        four.wait_for(lambda: bool(four.job(job_id)["steps"]), 30, "no step")
    finally:
        four.kill("agent", signal.SIGKILL)
    four.start_agent()
    out, err = srun.communicate(timeout=60)
    assert srun.returncode != 0, (out, err)
    assert "launched" not in out
    (step,) = four.job(job_id)["steps"]
    assert step["state"] == "FAILED", step
    assert "launch on node1 was lost with the agent" in four.log("controller")
    four.run("scancel", str(job_id))


def test_a_step_outlives_its_node_agent_restarting(four: Cluster) -> None:
    script = "srun -n2 -l sh -c 'echo up $SLURM_PROCID; sleep 3; echo done $SLURM_PROCID'\n"
    path = four.dir / "agent.sh"
    path.write_text("#!/bin/bash\n" + script)
    out = four.dir / "agent.out"
    job_id = four.sbatch("-n2", "-o", str(out), str(path))
    # The step's tasks run (its launch reached the agent) before the agent dies.
    four.wait_for(lambda: out.exists() and out.read_text().count("up") == 2, 30, "no tasks")
    four.kill("agent", signal.SIGKILL)
    four.start_agent()
    job = four.wait_done(job_id, 60)
    assert job["state"] == "COMPLETED"
    assert sorted(out.read_text().splitlines()) == ["0: done 0", "0: up 0", "1: done 1", "1: up 1"]
    (step,) = job["steps"]
    assert step["state"] == "COMPLETED"
