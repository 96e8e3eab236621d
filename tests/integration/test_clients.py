"""Popular Python Slurm clients, unchanged, against a real Corral cluster.

submitit and dask-jobqueue run as their users run them: they find ``sbatch``,
``sacct``, ``scancel`` and ``srun`` on PATH and parse what those print
(docs: the shared reference slurm-clients.md, sections 1-3). Snakemake's Slurm
executor is not installed; its exact command lines are run instead, with its
jobstep plugin's stripped environment for the srun inside the job.

Without the libraries these tests are skipped, except under CI (``$CI`` set),
where a missing library is a failure.
"""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.integration.cluster import Cluster

# requeue_delay=1: corral up's own value (Slurm's 121 s would stall the requeue test).
SETTINGS = ("KillWait=2", "SlurmdTimeout=6", "SchedulerParameters=requeue_delay=1")


def library(name: str) -> ModuleType:
    """The module, or a skip; under CI a missing library fails the test instead."""
    if os.environ.get("CI"):
        return importlib.import_module(name)
    return pytest.importorskip(name)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Four nodes and accounting (submitit and Snakemake read sacct), shared by the module:
    submitit keeps one status watcher per process, keyed by job id, so job ids must not
    start again at 1 for each test."""
    c = Cluster(tmp_path_factory.mktemp("clients"), 4, SETTINGS, accounting=True)
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture
def on_path(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """This process finds our clients on PATH and our cluster through SLURM_CONF, as the
    libraries' subprocesses (and the jobs, which inherit the environment) need."""
    monkeypatch.setenv("PATH", cluster.env["PATH"])
    monkeypatch.setenv("SLURM_CONF", cluster.conf)
    return cluster


def wait_until(predicate: Callable[[], Any], timeout: float, message: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{message} within {timeout} s")


# ----------------------------------------------------------------------------- submitit


@pytest.fixture
def executor(on_path: Cluster, tmp_path: Path) -> Iterator[Any]:
    submitit = library("submitit")
    cloudpickle = library("cloudpickle")
    # The job functions below live in this module: ship them by value, so the job's
    # interpreter need not import the tests package.
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    try:
        ex = submitit.AutoExecutor(folder=tmp_path / "%j", cluster="slurm")
        ex.update_parameters(timeout_min=10)
        yield ex
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def ended(job: Any, timeout: float = 60) -> Any:
    """``job`` once its result is there or sacct shows it finished: submitit's own
    ``result()`` would wait for ever on a job that never starts."""
    wait_until(job.done, timeout, f"job {job.job_id} did not end")
    return job


def final_state(job: Any, timeout: float = 30) -> str:
    """``job.state`` once sacct (forced, not on submitit's back-off schedule) shows the job
    finished; submitit reads the result file first, so ``result()`` may return while the
    job is still RUNNING."""
    watcher = job.watcher

    def finished() -> str | None:
        state = str(watcher.get_state(job.job_id, mode="force"))
        return state if watcher.is_done(job.job_id, mode="cache") else None

    return str(wait_until(finished, timeout, f"sacct did not show job {job.job_id} finished"))


def sacct_state(job_id: str) -> str | None:
    """The State submitit's watcher reads for ``job_id``, from the very command it runs."""
    argv = ["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", job_id]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    rows = [line.split("|") for line in out.splitlines()[1:]]
    return next((row[1] for row in rows if row[0] == job_id), None)


def processes(word: str) -> list[int]:
    """Processes with ``word`` in their command line."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if word.encode() in cmdline:
            found.append(int(pid))
    return found


def double(x: int) -> int:
    return 2 * x


def fail() -> None:
    raise ValueError("the job's own error: 4711")


def rank() -> tuple[int, int, str]:
    import submitit

    env = submitit.JobEnvironment()
    return env.global_rank, env.num_tasks, env.job_id


def test_submitit_job_returns_its_value(executor: Any) -> None:
    job = executor.submit(double, 21)
    assert ended(job).result() == 42
    assert final_state(job) == "COMPLETED"


def test_submitit_failure_brings_the_exception_back(executor: Any) -> None:
    from submitit.core.utils import FailedJobError

    job = executor.submit(fail)
    error = ended(job).exception()
    assert isinstance(error, FailedJobError)
    assert "ValueError: the job's own error: 4711" in str(error)
    with pytest.raises(FailedJobError, match="the job's own error: 4711"):
        job.result()
    assert final_state(job) == "FAILED"


def test_submitit_map_array_is_one_array_job(executor: Any) -> None:
    jobs = executor.map_array(double, range(4))
    master = jobs[0].job_id.split("_")[0]
    assert [j.job_id for j in jobs] == [f"{master}_{i}" for i in range(4)]
    assert [ended(j).result() for j in jobs] == [0, 2, 4, 6]
    assert [final_state(j) for j in jobs] == ["COMPLETED"] * 4


def test_submitit_tasks_per_node_runs_every_task_through_srun(executor: Any) -> None:
    executor.update_parameters(tasks_per_node=2)
    job = executor.submit(rank)
    assert ended(job).results() == [(0, 2, job.job_id), (1, 2, job.job_id)]
    assert final_state(job) == "COMPLETED"


def test_submitit_cancel(executor: Any) -> None:
    job = executor.submit(time.sleep, 300)
    # Running: the task has written its log (submitit's logger starts each task).
    wait_until(lambda: job.paths.stderr.exists(), 30, "the job did not start")
    assert processes(str(job.paths.folder.parent))  # the task, by its folder argument
    job.cancel()  # scancel N, which must exit 0
    assert final_state(job).startswith("CANCELLED")  # Slurm prints "CANCELLED by <uid>"
    wait_until(lambda: not processes(str(job.paths.folder.parent)), 30, "the task survived")


def _checkpointable() -> Any:
    """A Checkpointable callable that notes each attempt and waits to be preempted on the
    first (built here: submitit is imported only once the tests know it is installed)."""
    from submitit.helpers import Checkpointable

    class Resumable(Checkpointable):
        def __call__(self, notes: str, value: int) -> int:
            restarts = os.environ.get("SLURM_RESTART_COUNT", "0")
            with open(notes, "a") as out:
                out.write(f"{os.environ['SLURM_JOB_ID']} {restarts}\n")
            if restarts == "0":
                time.sleep(300)  # until the preemption signal
            return 2 * value

    return Resumable()


def test_submitit_checkpoint_and_requeue_keep_the_job_id(executor: Any, tmp_path: Path) -> None:
    notes = tmp_path / "attempts.txt"
    # A long limit: the USR2 counts as a preemption, not as the time limit coming.
    executor.update_parameters(timeout_min=30)
    job = executor.submit(_checkpointable(), str(notes), 21)
    wait_until(lambda: notes.exists() and notes.read_text(), 30, "the first attempt did not run")
    job._interrupt()  # scancel N --signal SIGTERM; scancel N --signal USR2
    # Until the second attempt's result, submitit's own sacct call must never show the job
    # finished (FAILED when the first attempt exits, say): submitit would give up on it.
    # (None: no row at all, which submitit reads as "no news" and keeps the last state.)
    seen = set()
    deadline = time.monotonic() + 60
    while not job.paths.result_pickle.exists():
        assert time.monotonic() < deadline, f"no second attempt; sacct showed {seen}"
        seen.add(sacct_state(job.job_id))
        time.sleep(0.05)
    assert seen <= {"PENDING", "RUNNING", "REQUEUED", "COMPLETING", None}, seen
    assert ended(job).result() == 42
    assert notes.read_text().splitlines() == [f"{job.job_id} 0", f"{job.job_id} 1"]
    assert final_state(job) == "COMPLETED"
    log = job.stderr() or ""
    # Both signals reached the task (not the batch shell, which would have died).
    assert "Bypassing signal SIGTERM" in log
    assert "Caught signal SIGUSR2" in log and "this job is preempted" in log


# ------------------------------------------------------------------------- dask-jobqueue


def test_dask_jobqueue_workers_come_and_go(on_path: Cluster, tmp_path: Path) -> None:
    jobqueue = library("dask_jobqueue")
    distributed = library("distributed")
    logs = tmp_path / "dask-logs"
    with jobqueue.SLURMCluster(
        cores=1,
        memory="1GB",
        processes=1,
        walltime="00:10:00",
        python=sys.executable,
        interface="lo",
        scheduler_options={"host": "127.0.0.1", "dashboard_address": None},
        log_directory=str(logs),
        local_directory=str(tmp_path),
        death_timeout=30,
    ) as dask_cluster:
        address = dask_cluster.scheduler_address
        dask_cluster.scale(2)
        with distributed.Client(dask_cluster) as client:
            client.wait_for_workers(2, timeout=60)
            assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6
            assert client.gather(client.map(pow, range(5), [2] * 5)) == [0, 1, 4, 9, 16]
            ids = sorted(int(job.job_id) for job in dask_cluster.workers.values())
            assert len(ids) == 2
            jobs = {j["job_id"]: j for j in on_path.jobs(*ids)}
            assert {j["state"] for j in jobs.values()} == {"RUNNING"}
            assert {j["name"] for j in jobs.values()} == {"dask-worker"}
            dask_cluster.scale(0)
            wait_until(lambda: not client.scheduler_info()["workers"], 30, "workers stayed")
    for job_id in ids:
        job = on_path.wait_done(job_id, 30)
        assert job["state"] in ("CANCELLED", "COMPLETED"), job
    wait_until(lambda: not processes(address), 30, "dask worker processes remain")


# ------------------------------------------------------------------- Snakemake's commands

# What snakemake-executor-plugin-slurm-jobstep 0.6.1 keeps of SLURM_* for its srun.
JOBSTEP_KEEPS = {
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_CLUSTER_NAME",
    "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST",
    # Not SLURM_CONF: srun finds the slurm.conf its node published (corral.configless).
}

# The jobstep plugin's run_job for a one-task rule with pass_command_as_script: srun in a
# shell, the environment stripped, the rule's script on srun's stdin.
JOBSTEP = """\
import os, subprocess, sys
keep = {keep!r}
env = os.environ.copy()
for var in list(env):
    if var.startswith("SLURM_") and var not in keep:
        env.pop(var, None)
    if var.startswith("SRUN_") or var.startswith("SBATCH_"):
        env.pop(var, None)
step = subprocess.Popen(
    "srun -n1 --cpu-bind=q  --cpus-per-task=1   --nodes=1  sh -s",
    shell=True, text=True, stdin=subprocess.PIPE, env=env,
)
step.stdin.write({script!r})
step.stdin.close()
sys.exit(step.wait())
"""

RULE = (
    'echo "rule_a: step $SLURM_STEP_ID of job $SLURM_JOB_ID, $SLURM_NTASKS task'
    ' of $SLURM_CPUS_PER_TASK CPU, on $SLURMD_NODENAME"\n'
)


def test_snakemake_submits_polls_and_runs_its_jobstep(on_path: Cluster, tmp_path: Path) -> None:
    run_uuid = str(uuid.uuid4())
    logdir = tmp_path / ".snakemake" / "slurm_logs" / "rule_a"
    logdir.mkdir(parents=True)  # the plugin makes it before submitting
    jobstep = tmp_path / "jobstep.py"
    jobstep.write_text(JOBSTEP.format(keep=sorted(JOBSTEP_KEEPS), script=RULE))
    exec_job = f"{sys.executable} {jobstep}"
    call = (
        f"sbatch --parsable --job-name {run_uuid} --output {logdir}/%j.log --export=ALL "
        f"--comment rule_a -t 10 --mem 100 --ntasks=1 --cpus-per-task=1 -D {tmp_path}"
        f' --wrap="{exec_job}"'
    )
    submitted = subprocess.run(
        call, shell=True, text=True, capture_output=True, timeout=30, check=False
    )
    assert submitted.returncode == 0, submitted.stderr
    assert "submission failed" not in submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    assert job_id.isdigit(), submitted.stdout

    # The status queries, built and run as the plugin does (exec of shlex.split).
    starttime = f"{datetime.now() - timedelta(days=2):%Y-%m-%dT%H:00}"
    sacct = shlex.split(
        "sacct -X --parsable2 --clusters all --noheader --format=JobIdRaw,State "
        f"--starttime {starttime} --endtime now --name {run_uuid}"
    )
    squeue = shlex.split(
        f"squeue --format={shlex.quote('%i|%T')} --states=all --noheader --name {run_uuid}"
    )

    def status(argv: list[str]) -> dict[str, str]:
        done = subprocess.run(argv, text=True, capture_output=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr
        rows = [line.split("|") for line in done.stdout.splitlines()]
        return {row[0].strip(): row[1].strip() for row in rows}

    assert status(squeue).get(job_id) in ("PENDING", "RUNNING", "COMPLETING", "COMPLETED")
    finished = wait_until(
        lambda: status(sacct).get(job_id) == "COMPLETED" and status(sacct),
        30,
        f"sacct --name did not show job {job_id} COMPLETED",
    )
    assert finished == {job_id: "COMPLETED"}
    assert status(squeue) == {job_id: "COMPLETED"}  # squeue keeps it for MinJobAge
    log = (logdir / f"{job_id}.log").read_text()
    assert log == f"rule_a: step 0 of job {job_id}, 1 task of 1 CPU, on node1\n"
