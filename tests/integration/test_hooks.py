"""Site hooks on a real cluster (issue 16 point 4): Prolog, Epilog, TaskProlog and
HealthCheckProgram as slurm.conf names them, with Slurm 22.05's variables,
states and reasons (checked against slurmctld and slurmd 22.05 on this machine).

The hook scripts are written by each test; they use no PATH (a hook gets none)
and act on files in the cluster's directory, which is how a test steers them.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.integration.cluster import Cluster

SETTINGS = ("KillWait=2", "SlurmdTimeout=6", "SchedulerParameters=bf_interval=1,requeue_delay=1")


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _written(path: Path) -> bool:
    """Whether a hook's `env > FILE` has written FILE (the shell creates it first)."""
    return path.exists() and "SLURM_JOB_ID=" in path.read_text()


def _ended(path: Path) -> bool:
    """Whether an epilog's `env > FILE` has written its exit code variables (the shell
    creates FILE first, and env writes them in no fixed place)."""
    return path.exists() and "SLURM_JOB_EXIT_CODE2=" in path.read_text()


def _node(cluster: Cluster, name: str) -> str:
    return cluster.run("scontrol", "show", "node", name).stdout


def _wait_requeued_held(cluster: Cluster, job_id: int) -> None:
    """Wait until a failed Prolog has put ``job_id`` back, held, after its first run."""
    cluster.wait_for(
        lambda: cluster.job(job_id)["reason"] == "launch failed requeued held",
        30,
        "the job was not requeued held",
    )
    job = cluster.job(job_id)
    assert job["state"] == "PENDING" and job["restarts"] == 1


def _batch(cluster: Cluster, body: str, *args: str) -> int:
    path = cluster.dir / f"job-{len(list(cluster.dir.glob('job-*')))}.sh"
    path.write_text("#!/bin/sh\n" + body)
    return cluster.sbatch(*args, "-o", str(cluster.dir / "out-%j.txt"), str(path))


def test_prolog_epilog_and_task_prolog_run_with_slurms_variables(tmp_path: Path) -> None:
    d = tmp_path
    hooks = (
        "Prolog=" + _script(d / "prolog", f"/usr/bin/env > {d}/prolog.$SLURM_JOB_ID\n"),
        "Epilog=" + _script(d / "epilog", f"/usr/bin/env > {d}/epilog.$SLURM_JOB_ID\n"),
        "TaskProlog="
        + _script(
            d / "taskprolog",
            "echo 'export FOO=bar baz'\necho 'print hello from the task prolog'\n"
            "echo 'unset DROPME'\necho 'not a command'\n",
        ),
    )
    cluster = Cluster(tmp_path, nodes=1, settings=(*SETTINGS, *hooks))
    try:
        cluster.start()
        job_id = _batch(cluster, 'echo "FOO=$FOO DROPME=${DROPME-unset}"\nexit 3\n', "-p", "debug")
        job = cluster.wait_done(job_id, 60)
        assert job["state"] == "FAILED"
        out = (d / f"out-{job_id}.txt").read_text()
        assert out == "hello from the task prolog\nFOO=bar baz DROPME=unset\n"
        prolog = _env(d / f"prolog.{job_id}")
        assert prolog["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd"
        assert prolog["SLURM_JOB_ID"] == prolog["SLURM_JOBID"] == str(job_id)
        assert prolog["SLURM_JOB_USER"] == "root" and prolog["SLURM_JOB_UID"] == "0"
        assert prolog["SLURMD_NODENAME"] == "node1"
        assert prolog["SLURM_JOB_PARTITION"] == "debug"
        assert prolog["SLURM_JOB_NODELIST"] == prolog["SLURM_NODELIST"] == "node1"
        assert prolog["SLURM_CONF"] == cluster.conf
        assert "PATH" not in prolog and "FOO" not in prolog
        cluster.wait_for(lambda: _ended(d / f"epilog.{job_id}"), 10, "no epilog")
        epilog = _env(d / f"epilog.{job_id}")
        assert epilog["SLURM_SCRIPT_CONTEXT"] == "epilog_slurmd"
        assert epilog["SLURM_JOB_EXIT_CODE"] == str(3 << 8)
        assert epilog["SLURM_JOB_EXIT_CODE2"] == "3:0"
        assert "Reason=" not in _node(cluster, "node1")  # nothing failed: not drained
    finally:
        cluster.stop()


def test_a_failing_prolog_drains_the_node_and_requeues_the_job_held(tmp_path: Path) -> None:
    d = tmp_path
    # It fails once, on the first node it runs on, and says which.
    prolog = _script(
        d / "prolog", f"[ -e {d}/failed ] && exit 0\necho $SLURMD_NODENAME > {d}/failed\nexit 1\n"
    )
    epilog = _script(d / "epilog", f"echo ran > {d}/epilog.$SLURM_JOB_ID\n")
    settings = (*SETTINGS, f"Prolog={prolog}", f"Epilog={epilog}")
    cluster = Cluster(tmp_path, nodes=2, settings=settings)
    try:
        cluster.start()
        job_id = _batch(cluster, "echo ran\n")
        _wait_requeued_held(cluster, job_id)
        shown = cluster.run("scontrol", "show", "job", str(job_id)).stdout
        assert "Reason=launch_failed_requeued_held" in shown
        assert "Restarts=1" in shown
        first = (d / "failed").read_text().strip()
        node = _node(cluster, first)
        assert "State=IDLE+DRAIN" in node and "Reason=Prolog error [" in node
        assert (d / f"epilog.{job_id}").exists()  # the Epilog runs after a failed Prolog
        assert "Error running slurm prolog: 1" in (d / f"out-{job_id}.txt").read_text()
        # Released, it runs on the other node: the first is drained.
        cluster.run("scontrol", "release", str(job_id))
        job = cluster.wait_done(job_id, 90)
        assert job["state"] == "COMPLETED" and job["nodes"] != first
    finally:
        cluster.stop()


def test_a_failing_or_overrunning_epilog_drains_the_node(tmp_path: Path) -> None:
    d = tmp_path
    epilog = _script(
        d / "epilog",
        f"[ -e {d}/slow ] && exec /bin/sleep 30\n"
        '[ "$SLURMD_NODENAME" = node1 ] && exit 2\nexit 0\n',
    )
    cluster = Cluster(
        tmp_path,
        nodes=2,
        settings=(*SETTINGS, f"Epilog={epilog}", "PrologEpilogTimeout=2", "PrologFlags=Serial"),
    )
    try:
        cluster.start()
        job_id = _batch(cluster, "true\n", "-w", "node1")
        assert cluster.wait_done(job_id, 60)["state"] == "COMPLETED"
        cluster.wait_for(
            lambda: "Reason=Epilog error" in _node(cluster, "node1"), 10, "node1 not drained"
        )
        # An Epilog past PrologEpilogTimeout is killed (with what it started) and fails:
        # the job's end is reported when the time is up, not when the sleep would end.
        (d / "slow").touch()
        began = time.monotonic()
        job_id = _batch(cluster, "true\n", "-w", "node2")
        assert cluster.wait_done(job_id, 60)["state"] == "COMPLETED"
        assert time.monotonic() - began < 20
        cluster.wait_for(
            lambda: "Reason=Epilog error" in _node(cluster, "node2"), 10, "node2 not drained"
        )
    finally:
        cluster.stop()


def test_a_failing_health_check_drains_its_node_with_the_programs_words(tmp_path: Path) -> None:
    d = tmp_path
    check = _script(
        d / "check",
        f'[ "$SLURMD_NODENAME" = node2 ] && [ -e {d}/sick ] && '
        '{ echo "scratch is full"; exit 1; }\nexit 0\n',
    )
    settings = (*SETTINGS, f"HealthCheckProgram={check}", "HealthCheckInterval=1")
    cluster = Cluster(tmp_path, nodes=2, settings=settings)
    try:
        cluster.start()
        (d / "sick").touch()
        cluster.wait_for(
            lambda: "Reason=scratch is full [" in _node(cluster, "node2"), 20, "node2 not drained"
        )
        assert "Reason=" not in _node(cluster, "node1")
    finally:
        cluster.stop()


def test_controller_hooks_run_around_a_job_and_a_failed_prolog_requeues_it(
    tmp_path: Path,
) -> None:
    d = tmp_path
    # PrologSlurmctld fails the first time, then lets the job launch; both log their env.
    prolog = _script(
        d / "ctld-prolog",
        f"/usr/bin/env > {d}/ctld-prolog.$$\n[ -e {d}/failed ] && exit 0\n: > {d}/failed\nexit 1\n",
    )
    epilog = _script(d / "ctld-epilog", f"/usr/bin/env > {d}/ctld-epilog.$$\n")
    settings = (*SETTINGS, f"PrologSlurmctld={prolog}", f"EpilogSlurmctld={epilog}")
    cluster = Cluster(tmp_path, nodes=1, settings=settings)
    try:
        cluster.start()
        job_id = _batch(cluster, "echo ran\nexit 4\n")
        job = cluster.wait_done(job_id, 60)
        assert job["state"] == "FAILED" and job["restarts"] == 1
        assert (d / f"out-{job_id}.txt").read_text() == "ran\n"  # launched once, after success
        prologs = sorted(d.glob("ctld-prolog.*"))
        assert len(prologs) == 2
        env = _env(prologs[0])
        assert env["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmctld"
        assert env["SLURM_JOB_ID"] == str(job_id) and env["SLURM_JOB_NODELIST"] == "node1"
        assert env["SLURM_JOB_USER"] == "root" and env["SLURM_JOB_PARTITION"] == "debug"
        # EpilogSlurmctld after the requeue and after the end, with how it ended.
        ended = lambda: sum(_ended(p) for p in d.glob("ctld-epilog.*")) == 2  # noqa: E731
        cluster.wait_for(ended, 10, "no epilogs")
        codes = sorted(_env(p)["SLURM_JOB_EXIT_CODE2"] for p in d.glob("ctld-epilog.*"))
        assert codes == ["0:0", "4:0"]
        assert "prolog_slurmctld failed: rc:1" in cluster.log("controller")
    finally:
        cluster.stop()


def test_srun_and_task_prologs_around_a_step(tmp_path: Path) -> None:
    d = tmp_path
    srun_prolog = _script(d / "srun-prolog", f'echo "$SLURM_JOB_ID $*" > {d}/srun-prolog\n')
    srun_epilog = _script(d / "srun-epilog", f'echo "$SLURM_JOB_ID $*" > {d}/srun-epilog\n')
    task_prolog = _script(d / "task-prolog", "echo export RANK_SEEN=$SLURM_PROCID\n")
    # TaskEpilog after each task, the batch script's and each step's, with its variables.
    task_epilog = _script(
        d / "task-epilog",
        f"/usr/bin/env > {d}/task-epilog.${{SLURM_STEP_ID-batch}}.$SLURM_PROCID\n",
    )
    settings = (
        *SETTINGS,
        f"SrunProlog={srun_prolog}",
        f"SrunEpilog={srun_epilog}",
        f"TaskProlog={task_prolog}",
        f"TaskEpilog={task_epilog}",
    )
    cluster = Cluster(tmp_path, nodes=2, settings=settings)
    try:
        cluster.start()
        job_id = _batch(cluster, "srun -N2 -n2 -l /bin/sh -c 'echo seen $RANK_SEEN'\n", "-N2")
        assert cluster.wait_done(job_id, 60)["state"] == "COMPLETED"
        lines = sorted((d / f"out-{job_id}.txt").read_text().splitlines())
        assert lines == ["0: seen 0", "1: seen 1"]
        command = f"{job_id} /bin/sh -c echo seen $RANK_SEEN"
        assert (d / "srun-prolog").read_text().strip() == command
        assert (d / "srun-epilog").read_text().strip() == command
        for rank, node in ((0, "node1"), (1, "node2")):
            env = _env(d / f"task-epilog.0.{rank}")
            assert env["SLURMD_NODENAME"] == node and env["SLURM_JOB_ID"] == str(job_id)
            assert env["SLURM_LOCALID"] == "0" and int(env["SLURM_TASK_PID"]) > 0
            # What srun carried from the batch script, not the task's own TaskProlog
            # export (rank 1's was 1): that changed the task's process alone.
            assert env["RANK_SEEN"] == "0"
        assert _env(d / "task-epilog.batch.0")["SLURM_JOB_ID"] == str(job_id)
        # A failing SrunProlog launches nothing.
        _script(d / "srun-prolog", "exit 3\n")
        job_id = _batch(cluster, "srun /bin/echo never\necho after $?\n")
        assert cluster.wait_done(job_id, 60)["state"] == "COMPLETED"
        out = (d / f"out-{job_id}.txt").read_text()
        assert "never" not in out
        assert "srun: error: srun prolog failed rc = 3. Aborting step." in out
        assert out.endswith("after 1\n")
        # A failing TaskProlog: the task does not run and exits 1, with slurmstepd's line
        # (here the step's task fails; the batch script's TaskProlog succeeds).
        _script(d / "srun-prolog", "exit 0\n")
        _script(d / "task-prolog", '[ -n "$FAILME" ] && exit 5\nexit 0\n')
        job_id = _batch(cluster, "FAILME=1 srun -w node1 -n1 /bin/echo never\necho after $?\n")
        cluster.wait_done(job_id, 60)
        out = (d / f"out-{job_id}.txt").read_text()
        assert "never" not in out and "slurmstepd-node1: error: TaskProlog failed status=5" in out
        assert out.endswith("after 1\n")
    finally:
        cluster.stop()


def test_prolog_slurmctld_runs_before_an_allocation_is_used(tmp_path: Path) -> None:
    d = tmp_path
    # Slow, so that a client that did not wait would find no file; fails on demand.
    prolog = _script(
        d / "ctld-prolog",
        f"/bin/sleep 1\n[ -e {d}/fail ] && exit 1\n"
        f"echo $SLURM_SCRIPT_CONTEXT > {d}/ctld-prolog.$SLURM_JOB_ID\n",
    )
    cluster = Cluster(tmp_path, nodes=1, settings=(*SETTINGS, f"PrologSlurmctld={prolog}"))
    try:
        cluster.start()
        read = f"cat {d}/ctld-prolog.$SLURM_JOB_ID"
        done = cluster.run("salloc", "-N1", "/bin/sh", "-c", read)
        assert done.stdout == "prolog_slurmctld\n"
        done = cluster.run("srun", "-N1", "/bin/sh", "-c", read)
        assert done.stdout == "prolog_slurmctld\n"
        # A failure kills the allocation: only batch jobs can be requeued.
        (d / "fail").touch()
        done = cluster.run("salloc", "-N1", "/bin/echo", "never", check=False)
        assert done.returncode == 1 and "never" not in done.stdout
        revoked = re.search(r"Job allocation (\d+) has been revoked\.", done.stderr)
        assert revoked is not None, done.stderr
        job_id = int(revoked.group(1))
        assert cluster.job(job_id)["state"] == "CANCELLED"
        assert "prolog_slurmctld failed: rc:1 output:: killed" in cluster.log("controller")
    finally:
        cluster.stop()


def test_prolog_and_epilog_run_on_every_node_of_a_job(tmp_path: Path) -> None:
    d = tmp_path
    # It fails once on node2, once the test asks for it.
    prolog = _script(
        d / "prolog",
        f"/usr/bin/env > {d}/prolog.$SLURMD_NODENAME.$SLURM_JOB_ID\n"
        f'[ "$SLURMD_NODENAME" = node2 ] && [ -e {d}/fail ] && [ ! -e {d}/failed ] && '
        f"{{ : > {d}/failed; exit 1; }}\nexit 0\n",
    )
    epilog = _script(d / "epilog", f"/usr/bin/env > {d}/epilog.$SLURMD_NODENAME.$SLURM_JOB_ID\n")
    cluster = Cluster(
        tmp_path, nodes=2, settings=(*SETTINGS, f"Prolog={prolog}", f"Epilog={epilog}")
    )
    try:
        cluster.start()
        # By default the Prolog runs on a node at the job's first step there.
        job_id = _batch(cluster, "srun -N2 -n2 /bin/true\nexit 2\n", "-N2")
        assert cluster.wait_done(job_id, 60)["state"] == "FAILED"
        env = _env(d / f"prolog.node2.{job_id}")
        assert env["SLURM_SCRIPT_CONTEXT"] == "prolog_slurmd" and env["SLURMD_NODENAME"] == "node2"
        assert env["SLURM_JOB_ID"] == str(job_id) and env["SLURM_JOB_USER"] == "root"
        assert env["SLURM_JOB_NODELIST"] == "node[1-2]" and "PATH" not in env
        assert (d / f"prolog.node1.{job_id}").exists()
        epilogs = [d / f"epilog.{node}.{job_id}" for node in ("node1", "node2")]
        cluster.wait_for(lambda: all(_written(p) for p in epilogs), 20, "no epilogs")
        env = _env(d / f"epilog.node2.{job_id}")
        assert env["SLURM_SCRIPT_CONTEXT"] == "epilog_slurmd"
        assert env["SLURM_JOB_EXIT_CODE2"] == "2:0"
        # No step on node2: no Prolog there, but the Epilog runs on every node.
        job_id = _batch(cluster, "true\n", "-N2")
        assert cluster.wait_done(job_id, 60)["state"] == "COMPLETED"
        cluster.wait_for(lambda: (d / f"epilog.node2.{job_id}").exists(), 20, "no epilog")
        assert not (d / f"prolog.node2.{job_id}").exists()
        # An allocation has no batch node: its step runs the Prolog on both nodes first.
        done = cluster.run("salloc", "-N2", "srun", "-N2", "-n2", "/bin/true")
        granted = re.search(r"Granted job allocation (\d+)", done.stderr)
        assert granted is not None, done.stderr
        alloc = granted.group(1)
        assert all((d / f"prolog.{n}.{alloc}").exists() for n in ("node1", "node2"))
        epilogs = [d / f"epilog.{node}.{alloc}" for node in ("node1", "node2")]
        cluster.wait_for(lambda: all(_written(p) for p in epilogs), 20, "no epilogs")
        # A Prolog failing on node2 drains it and requeues the job held.
        (d / "fail").touch()
        job_id = _batch(cluster, "srun -N2 -n2 /bin/true\n", "-N2")
        _wait_requeued_held(cluster, job_id)
        node = _node(cluster, "node2")
        assert "DRAIN" in node and "Reason=Prolog error [" in node
        assert "Reason=" not in _node(cluster, "node1")
        assert "prolog failed on node2: requeued" in cluster.log("controller")
    finally:
        cluster.stop()


def _slow_prolog_cluster(d: Path, seconds: int, flags: str) -> Cluster:
    """Two nodes whose Prolog takes ``seconds``, then leaves its context in a file."""
    prolog = _script(
        d / "prolog",
        f"/bin/sleep {seconds}\n"
        f"echo $SLURM_SCRIPT_CONTEXT > {d}/prolog.$SLURMD_NODENAME.$SLURM_JOB_ID\n",
    )
    return Cluster(d, nodes=2, settings=(*SETTINGS, f"Prolog={prolog}", f"PrologFlags={flags}"))


def test_prolog_flags_alloc_runs_the_prolog_on_every_node_at_allocation(tmp_path: Path) -> None:
    d = tmp_path
    cluster = _slow_prolog_cluster(d, 1, "Alloc")
    try:
        cluster.start()
        # The batch node's Prolog ran before the script; node2's ran with no step there.
        job_id = _batch(cluster, f"cat {d}/prolog.node1.$SLURM_JOB_ID\n", "-N2")
        assert cluster.wait_done(job_id, 60)["state"] == "COMPLETED"
        assert (d / f"out-{job_id}.txt").read_text() == "prolog_slurmd\n"
        cluster.wait_for(lambda: (d / f"prolog.node2.{job_id}").exists(), 10, "no prolog")
        # salloc waits for every node's Prolog before it runs its command.
        read = f"cat {d}/prolog.node1.$SLURM_JOB_ID {d}/prolog.node2.$SLURM_JOB_ID"
        done = cluster.run("salloc", "-N2", "/bin/sh", "-c", read)
        assert done.stdout == "prolog_slurmd\nprolog_slurmd\n"
    finally:
        cluster.stop()


def test_prolog_flags_nohold_lets_salloc_go_on_and_steps_wait(tmp_path: Path) -> None:
    d = tmp_path
    cluster = _slow_prolog_cluster(d, 2, "Alloc,NoHold")
    try:
        cluster.start()
        command = (
            f"ls {d}/prolog.node1.$SLURM_JOB_ID 2>/dev/null || echo not yet\n"
            f"srun -N2 -n2 /bin/sh -c 'cat {d}/prolog.$SLURMD_NODENAME.$SLURM_JOB_ID'\n"
        )
        done = cluster.run("salloc", "-N2", "/bin/sh", "-c", command)
        assert done.stdout == "not yet\nprolog_slurmd\nprolog_slurmd\n"
    finally:
        cluster.stop()
