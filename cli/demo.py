"""The demo workload ``corral up --demo`` runs through the real client commands.

It submits a few batch jobs, a job array, a dependent job and a two-node job
whose tasks ``srun`` starts with ``sbatch``, shows ``squeue`` and ``sinfo``
while they run, waits for all of them and then shows their final states and
two jobs' output, so a newcomer sees the whole path (submission, scheduling,
launch, steps, completion) in under a minute.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

DEMO_TIMEOUT = 120.0


def client_command(name: str) -> list[str]:
    """How to run client ``name``: the installed script next to this interpreter, else
    the module itself (a checkout without console scripts). The demo, the integration
    tests and the benchmarks all run clients this way."""
    script = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-c", f"from cli.{name} import main; main()"]


def _run(env: dict[str, str], name: str, *args: str, show: bool = True) -> str:
    result = subprocess.run(
        [*client_command(name), *args], env=env, capture_output=True, text=True, check=False
    )
    if show:
        print(f"$ {name} {shlex.join(args)}")
        sys.stdout.write(result.stdout + result.stderr)
    if result.returncode != 0:
        raise RuntimeError(f"{name} failed: {result.stderr.strip()}")
    return result.stdout


def run_demo(conf: str, accounting: bool = True) -> int:
    # The jobs call srun by name: the clients installed next to this interpreter.
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env = {**os.environ, "SLURM_CONF": conf, "PATH": path}
    workdir = os.path.join(os.path.dirname(conf), "demo")
    os.makedirs(workdir, exist_ok=True)
    print("\nSubmitting the demo workload:")
    first = _run(
        env,
        "sbatch",
        "--parsable",
        "-J",
        "hello",
        "-D",
        workdir,
        "--wrap",
        "echo Hello from $SLURMD_NODENAME, job $SLURM_JOB_ID; sleep 2",
    ).strip()
    for i in range(3):
        _run(env, "sbatch", "-J", f"work{i}", "-D", workdir, "-n", "1", "--wrap", f"sleep {1 + i}")
    _run(
        env,
        "sbatch",
        "-J",
        "sweep",
        "-D",
        workdir,
        "--array=1-6%3",
        "--wrap",
        "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID; sleep 1",
    )
    steps = _run(
        env,
        "sbatch",
        "--parsable",
        "-J",
        "tasks",
        "-D",
        workdir,
        "-N2",
        "--ntasks-per-node=2",
        "--wrap",
        "srun -l sh -c 'echo task $SLURM_PROCID of $SLURM_NTASKS on $SLURMD_NODENAME'",
    ).strip()
    _run(
        env,
        "sbatch",
        "-J",
        "report",
        "-D",
        workdir,
        f"--dependency=afterok:{first}",
        "--wrap",
        "echo all done",
    )
    time.sleep(0.5)
    print()
    _run(env, "squeue")
    print()
    _run(env, "sinfo")
    deadline = time.monotonic() + DEMO_TIMEOUT
    while _run(env, "squeue", "-h", show=False).strip():
        if time.monotonic() > deadline:
            print("demo: jobs did not finish in time", file=sys.stderr)
            return 1
        time.sleep(0.5)
    print("\nAll jobs finished:")
    _run(env, "squeue", "-t", "all", "-o", "%.10i %.9P %.8j %.10T %.10M %N")
    if accounting:
        print("\nAnd in the accounting database (corral-dbd):")
        _run(env, "sacct", "-X", "-o", "JobID,JobName,Partition,Account,State,Elapsed,NodeList")
    for job_id in (first, steps):
        print(f"\n$ cat {workdir}/slurm-{job_id}.out")
        with open(os.path.join(workdir, f"slurm-{job_id}.out")) as out:
            sys.stdout.write(out.read())
    print("\nThe demo is over; the cluster stops now. `corral up` keeps one running.")
    return 0
